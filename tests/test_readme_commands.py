"""The commands of README.md and the docs that other tests do not already run, each taken
from its docs block (tests/docs/blocks.py): the demo, the console script,
`eval "$(mpi-resolver tf-config --export)"` in each task, the benchmark script (the mutation
script's is tests/test_mutation_script.py, a run of its own)."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import own_network
from tests.docs.blocks import command, commands, runs_like
from tests.test_mpirun import mpirun_env
from tests.tf.test_bench_background_saves import assert_measured

ROOT = Path(__file__).resolve().parent.parent
CONSOLE_SCRIPT = Path(sys.executable).parent / "mpi-resolver"


@pytest.mark.mpirun
def test_console_script_show_under_mpirun():
    assert CONSOLE_SCRIPT.exists(), "pip install . provides the mpi-resolver console script"
    doc = shlex.split(command("commands", "mpirun -n 4 mpi-resolver show"))
    assert doc == ["mpirun", "-n", "4", "mpi-resolver", "show"], doc
    argv = [str(CONSOLE_SCRIPT) if w == "mpi-resolver" else w for w in doc]
    proc = subprocess.run(own_network([*argv, "--json", "--gpus-per-node", "0"]),
                          capture_output=True, text=True,
                          timeout=120, env=mpirun_env())
    assert proc.returncode == 0, proc.stderr
    assert [r["rank"] for r in json.loads(proc.stdout)["ranks"]] == [0, 1, 2, 3]


@pytest.mark.mpirun
def test_eval_tf_config_export_in_each_task():
    """`srun --mpi=pmix bash -c 'eval "$(mpi-resolver tf-config --export)" && exec python
    train.py'`: each task's shell gets TF_CONFIG and its CUDA_VISIBLE_DEVICES (two GPUs for
    two ranks: one each), then runs the program. Here under mpirun (no Slurm), the program an
    echo of both; tests/cluster/test_exec.py runs the eval under srun."""
    doc = shlex.split(command("commands", "srun --mpi=pmix bash -c"))
    assert doc[:4] == ["srun", "--mpi=pmix", "bash", "-c"] and len(doc) == 5, doc
    assert doc[4] == 'eval "$(mpi-resolver tf-config --export)" && exec python train.py', doc
    shell = (doc[4].replace("mpi-resolver tf-config --export",
                            f"{CONSOLE_SCRIPT} tf-config --export --gpus-per-node 2")
             .replace("exec python train.py", 'exec echo "$CUDA_VISIBLE_DEVICES $TF_CONFIG"'))
    proc = subprocess.run(own_network(["mpirun", "-n", "2", "bash", "-c", shell]),
                          capture_output=True,
                          text=True, timeout=120, env=mpirun_env())
    assert proc.returncode == 0, proc.stderr
    lines = [line.split(" ", 1) for line in proc.stdout.splitlines()]
    configs = {json.loads(config)["task"]["index"]: (gpus, json.loads(config))
               for gpus, config in lines}
    assert sorted(configs) == [0, 1] and len(lines) == 2
    assert [configs[i][0] for i in (0, 1)] == ["0", "1"]
    assert configs[0][1]["cluster"] == configs[1][1]["cluster"]


@pytest.mark.cluster
@pytest.mark.slow
def test_demo_script_end_to_end():
    """bash scripts/demo.sh: starts its own 2-node cluster, checks, trains, runs the long job,
    stops. It runs the README's `srun --mpi=pmix mpi-resolver check` and `srun --mpi=pmix
    python train.py`, with its options (two nodes, one task each, a short training); then
    examples/train.sbatch: worker 1 killed mid-training, supervise restarts the step from the
    last periodic checkpoint; then the warning signal: every worker saves,
    supervise requeues the job, and the requeued run resumes at the saved step and trains to
    the planned total; the report at the end tells the three runs and draws the timeline."""
    text = (ROOT / "scripts" / "demo.sh").read_text()
    demo = text.replace("\\\n", " ").splitlines()
    ran = [shlex.split(line)[3:] for line in demo if re.match(r"run \S+ \w+ srun ", line)]
    assert len(ran) == 2, ran
    for doc in commands("readme-commands")[1:]:
        assert any(_runs(doc, argv) for argv in ran), (doc, ran)
    proc = subprocess.run(shlex.split(command("readme-setup", "bash scripts/demo.sh")),
                          capture_output=True, text=True,
                          timeout=900, cwd=ROOT, stdin=subprocess.DEVNULL)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:]
    assert "OK: Slurm and MPI agree on all 2 ranks." in out
    accuracy = [float(v) for v in re.findall(r"^final test accuracy: ([0-9.]+)$", out, re.M)]
    assert len(accuracy) == 1 and accuracy[0] > 0.8, out[-3000:]
    # The long job's lines, as the demo shows them ('   | ' before each).
    job = "\n".join(line[5:] for line in out.splitlines() if line.startswith("   | "))
    total = int(re.search(r"DEMO_EPOCHS:-(\d+)", text).group(1)) * \
        int(re.search(r"DEMO_LONG_STEPS:-(\d+)", text).group(1))
    runs = re.findall(r"^== job (\d+) \(run (\d)\)", job, re.M)
    assert [run for _, run in runs] == ["1", "2"] and len({j for j, _ in runs}) == 1, job
    assert "checkpoint saved on SIGUSR1; supervise requeues the job; exit code 75" in job, job
    assert re.search(r"^mpi-resolver supervise: run 1: task 1 on node2: Killed \(signal 9\), "
                     r".*: restart 1 of \d+$", job, re.M), job
    assert re.search(r"^mpi-resolver supervise: run 2: .*: the tasks had the warning signal; "
                     r"requeued job \d+ \(scontrol requeue \d+\): exit 75$", job, re.M), job
    steps = [(int(n), int(k)) for n, k in
             re.findall(r"^steps done: (\d+) \(resumed from (\d+)\)$", job, re.M)]
    assert len(steps) == 2 and steps[0][1] > 0, (steps, job)  # run 2 resumed after the kill
    saved = steps[0][0]  # the restarted run's last step: the checkpoint's
    assert 0 < saved < total and steps[1] == (total, saved), (steps, total, job)
    assert re.search(rf"^resumed from the checkpoint in \S+ at step {saved}$", job, re.M), job
    accuracy = [float(v) for v in re.findall(r"^final test accuracy: ([0-9.]+)$", job, re.M)]
    assert len(accuracy) == 1 and accuracy[0] > 0.8, job
    # The report at the end: three runs, the restart and the requeue, the timeline's path.
    assert re.search(r"^   job \d+: 3 runs, 1 restart \(SIGKILL on node2\), 1 requeue \(USR1\), "
                     r"\d+ steps? lost, ETTR 0\.\d\d$", out, re.M), out[-3000:]
    plot = re.search(r"^   the job's timeline: (/tmp/mpi-resolver-demo-job\.\w+\.png)$", out,
                     re.M)
    assert plot, out[-3000:]
    try:
        assert Path(plot.group(1)).read_bytes()[:4] == b"\x89PNG"
    finally:
        os.unlink(plot.group(1))


@pytest.mark.slow
def test_benchmark_script_prints_measured_ratios(tmp_path):
    """bash benchmarks/run.sh --quick --skip-slurm: a table with ratios; results written.
    (228 s on the CI machine before the 2-worker saves, 652 s there on a day twice as slow;
    524 s here beside two other heavy runs, and over 1,200 s in this machine's whole suite at
    a load average of 11-15, 2026-11-29: the bound, for a hang, is 2,400 s.)"""
    proc = subprocess.run([*shlex.split(command("benchmarks", "bash benchmarks/run.sh")),
                           "--quick", "--skip-slurm"],
                          capture_output=True, text=True, timeout=2400, cwd=ROOT,
                          env=dict(os.environ, MPI_RESOLVER_BENCH_RESULTS=str(tmp_path)))
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = [[c.strip() for c in ln.split("|")[1:-1]] for ln in proc.stdout.splitlines()
            if ln.startswith("| Slurm vars")]
    assert len(rows) == 8, proc.stdout[-3000:]
    for measure, ours, theirs, ratio, target, met in rows:
        # The benchmark's own verdict follows its figures: ratio = ours / TensorFlow's, and
        # "met" says whether that ratio is within the stated target (not asserted here).
        ours_ms, theirs_ms = float(ours.split()[0]), float(theirs.split()[0])
        low = (ours_ms - 0.005) / (theirs_ms + 0.005) - 0.005  # figures printed to 0.01
        high = (ours_ms + 0.005) / max(theirs_ms - 0.005, 1e-9) + 0.005
        assert low <= float(ratio) <= high, (measure, ours, theirs, ratio)
        assert target.startswith("<= ") and met in ("yes", "NO"), measure
        # The verdict is the unrounded ratio's: a printed 1.00 may be 1.004 (seen: NO).
        if abs(float(ratio) - float(target[3:])) > 0.005:
            assert (met == "yes") == (float(ratio) <= float(target[3:])), measure
    assert (tmp_path / "latest.json").exists()
    background = json.loads((tmp_path / "background_saves.json").read_text())
    assert [r["MiB"] for r in background] == [10, 100]  # --quick's states, measured
    assert_measured(background, proc.stdout, workers=1)
    two = json.loads((tmp_path / "background_saves_2.json").read_text())
    assert [r["MiB"] for r in two] == [10]  # --workers 2, for real
    assert_measured(two, proc.stdout, workers=2)
    assert "Saves in the background against saves at once (2 workers under mpirun; " \
        in proc.stdout
    goodput = json.loads((tmp_path / "goodput.json").read_text())
    assert [r["nodes"] for r in goodput] == [16, 128, 1024, 2048, 16384]
    # The exchange at scale: its own verdicts follow its figures too.
    exchange = json.loads((tmp_path / "exchange.json").read_text())
    for row in exchange["simulation"]:
        after, slurm = row["after"]["seconds"], row["slurm"]["seconds"]
        assert row["after"]["collectives"] == 2 and row["before"]["collectives"] == 1
        assert row["auto"]["collectives"] == 2  # 'auto' ports: no collective more
        assert row["after"]["received"] < row["before"]["received"] / 100
        limit = 1.2 * slurm + 0.001 if row["after"]["n"] <= 1000 else 1.5 * slurm
        line = next(ln for ln in proc.stdout.splitlines()
                    if ln.startswith(f"| {row['after']['n']:,} |"))
        assert line.split("|")[7].strip() == ("yes" if after <= limit else "NO"), line
    counts = {(r["mode"], r["collectives"]) for r in exchange["mpirun"]}
    assert counts == {("verified", 3), ("mpi", 5), ("auto", 3)}, counts


def test_sizes_script_lists_modules_and_the_longest_functions():
    """python scripts/sizes.py: every module of the package and its subpackages, then its
    longest functions."""
    proc = subprocess.run([sys.executable, "scripts/sizes.py", "-n", "3"], capture_output=True,
                          text=True, timeout=60, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    modules = {line.split()[1]: int(line.split()[0]) for line in proc.stdout.splitlines()
               if line.strip().endswith(".py")}
    package = ROOT / "mpi_resolver"
    assert set(modules) == {p.relative_to(package).as_posix() for p in package.rglob("*.py")}
    assert modules["core/errors.py"] == len((ROOT / "mpi_resolver/core/errors.py").read_text()
                                        .splitlines())
    longest = proc.stdout.split("longest functions:\n", 1)[1].splitlines()
    assert len(longest) == 3 and all(re.match(r"\s*\d+  [\w/]+\.py:\w+$", x) for x in longest)
    assert f"longest module: {max(modules.values())} lines" in proc.stdout


def _runs(doc: str, argv) -> bool:
    """True where ``argv`` runs the docs' command ``doc`` (with options added)."""
    try:
        runs_like(doc, argv)
    except AssertionError:
        return False
    return True
