"""The docs' command blocks that no test can run as written, checked against what the suite
does run (each check says which test runs the same command); and the blocks that repeat
another block (README.md's and the pages') are the same commands."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
import tomllib

import pytest

from tests.docs.blocks import ROOT, block, command, commands, runs_like

pytestmark = pytest.mark.unit


def _extras() -> set:
    with open(ROOT / "pyproject.toml", "rb") as f:
        return set(tomllib.load(f)["project"]["optional-dependencies"])


def test_the_readme_repeats_the_pages_set_up_and_smallest_use():
    assert block("readme-setup") == block("setup")
    assert commands("smallest-use-commands") == commands("readme-commands")[1:]
    assert commands("readme-commands")[0] == commands("install")[0]
    for line in commands("smallest-use-commands"):  # both are in the list of every command
        assert line in commands("commands"), line


def test_pip_install_names_extras_the_package_has():
    """`pip install ".[tf,mpi]"` and the others: the extras exist (tests/test_release.py
    installs the wheel itself in a fresh virtualenv)."""
    extras = _extras()
    lines = commands("install")
    assert len(lines) == 3
    for line in lines:
        words = shlex.split(line)
        assert words[:2] == ["pip", "install"], line
        named = re.fullmatch(r"\.\[([\w,-]+)\]", words[2])
        assert named, line
        assert set(named.group(1).split(",")) <= extras, (line, extras)


def test_the_test_command_passes_its_arguments_to_pytest_and_the_markers_exist():
    """bash scripts/test.sh is the suite itself (it cannot run inside it): it passes its
    arguments to pytest (without any, the suite runs as two pytest runs side by side:
    tests/test_side_by_side.py), and `-m unit` names a marker the suite has."""
    assert command("readme-setup", "bash scripts/test.sh") == "bash scripts/test.sh"
    assert commands("test-suite") == ["bash scripts/test.sh", "bash scripts/test.sh -m unit"]
    script = (ROOT / "scripts" / "test.sh").read_text()
    assert re.search(r'PYTEST=\(.* -m pytest .*\)', script), script
    assert re.search(r'if \[ \$# -gt 0 \]; then\n  exec "\$\{PYTEST\[@\]\}" "\$@"', script), script
    assert re.search(r'scripts/side_by_side\.py -- "\$\{PYTEST\[@\]\}"\s*$', script), script
    assert '"unit: ' in (ROOT / "pyproject.toml").read_text()


def test_mpirun_without_slurm_is_what_the_mpirun_example_runs():
    """`mpirun -n 8 python train.py`: examples/mpirun.sh runs `mpirun -n "$NP" "$PYTHON"
    ".../train.py"`, and tests/cluster/test_training.py runs that script (NP=2)."""
    doc = command("commands", "mpirun -n 8 python train.py")
    script = (ROOT / "examples" / "mpirun.sh").read_text()
    assert 'MPIRUN=(mpirun -n "$NP")' in script
    assert '"${MPIRUN[@]}" "$PYTHON" "$HERE/train.py" "$@"' in script
    runs_like(doc.replace("-n 8", "-n 2"), ["mpirun", "-n", "2", "python", "/x/train.py"])
    assert "mpirun.sh" in (ROOT / "tests" / "cluster" / "test_training.py").read_text()


@pytest.mark.parametrize("template, seconds", [("train.sbatch", "120"),
                                               ("train_gpu.sbatch", "300")])
def test_both_templates_carry_the_long_job_directives(template, seconds):
    """The lines the docs show, in both templates (the GPU one warns 300 s before the end);
    tests/cluster/test_long_jobs.py submits train.sbatch with them."""
    text = (ROOT / "examples" / template).read_text().splitlines()
    for line in block("long-jobs-sbatch-lines").splitlines():
        directive = line.split("#", 2)[1].strip()  # 'SBATCH --signal=USR1@120'
        assert "#" + directive.replace("@120", "@" + seconds) in text, (template, directive)


def test_the_mpich_loop_takes_the_options_the_docs_give():
    """scripts/mpich_pmi2_loop.py starts clusters of its own N times (minutes): the suite
    runs the same launch (tests/cluster/test_mpich.py); here its options are checked."""
    argv = shlex.split(command("mpich-loop", ".venv/bin/python scripts/mpich_pmi2_loop.py"))
    assert argv[2:] == ["-n", "50"], argv
    out = subprocess.run([sys.executable, argv[1], "--help"], cwd=ROOT, capture_output=True,
                         text=True, timeout=60, check=True).stdout
    assert "-n N" in out and "--netmod {ofi,ucx}" in out and "--shared-dev-shm" in out, out


def test_the_preemption_benchmark_takes_the_options_the_docs_give():
    """benchmarks/preemption.py --repeat 3 takes minutes; tests/cluster/test_bench_preemption.py
    runs it with --repeat 1 (and bash benchmarks/run.sh runs it as its last step)."""
    argv = shlex.split(command("preemption-benchmark", "python benchmarks/preemption.py"))
    assert argv[2:] == ["--repeat", "3"], argv
    out = subprocess.run([sys.executable, argv[1], "--help"], cwd=ROOT, capture_output=True,
                         text=True, timeout=60, check=True).stdout
    assert "--repeat REPEAT" in out, out
    bench = (ROOT / "tests" / "cluster" / "test_bench_preemption.py").read_text()
    assert '"benchmarks/preemption.py", "--repeat", "1"' in bench


def test_tf_keras_is_installed_as_the_docs_say():
    """`pip install --no-deps 'tf-keras~=2.21.0'`: what scripts/setup.sh runs, and the
    version matches TensorFlow's in the suite's virtualenv (tests/cluster/test_training.py
    runs train.py --fit there)."""
    from importlib.metadata import version

    words = shlex.split(command("keras-fit-or-loop", "pip install"))
    assert words[:3] == ["pip", "install", "--no-deps"], words
    name, wanted = words[3].split("~=")
    assert name == "tf-keras", words
    assert f'--no-deps "tf-keras~={wanted}"' in (ROOT / "scripts" / "setup.sh").read_text()
    major_minor = ".".join(wanted.split(".")[:2])
    assert version("tf-keras").startswith(major_minor + "."), version("tf-keras")
    assert version("tensorflow-cpu").startswith(major_minor + "."), version("tensorflow-cpu")
