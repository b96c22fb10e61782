"""docs/own-script.md against examples/own_script/: the page's two diffs are `diff -u` of the
scripts (they cannot drift apart), the ports import only public names and take the signal
and the checkpoint directory from the template the page submits them with, and the original
runs on one machine as the page says. tests/cluster/test_own_script.py runs both ports,
submitted as the page submits them, on the two-node cluster."""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import List

import pytest

import mpi_resolver
from tests.docs.blocks import ROOT, block

SCRIPTS = ROOT / "examples" / "own_script"


def unified_diff(port: str) -> str:
    """Returns `diff -u original.py PORT`, its two header lines naming the files alone."""
    proc = subprocess.run(["diff", "-u", "--label", "original.py", "--label", port,
                           "original.py", port], cwd=SCRIPTS, capture_output=True, text=True,
                          timeout=30)
    assert proc.returncode == 1, proc.stderr  # 1: the files differ
    return proc.stdout.rstrip("\n")


def mpi_resolver_imports(path: Path) -> List[str]:
    """Returns what ``path`` imports from mpi_resolver, as 'module:name' ('mpi_resolver.x'
    for a plain import)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("mpi_resolver"):
            found += [f"{node.module}:{a.name}" for a in node.names]
        elif isinstance(node, ast.Import):
            found += [a.name for a in node.names if a.name.startswith("mpi_resolver")]
    return found


@pytest.mark.unit
def test_the_page_shows_each_port_as_diff_u_of_the_scripts():
    for shown, port in [(block("own-script-fit-diff"), "fit_ported.py"),
                        (block("own-script-loop-diff"), "loop_ported.py")]:
        assert shown == unified_diff(port), (
            f"docs/own-script.md does not show `diff -u original.py {port}` of "
            "examples/own_script/: paste the diff's output into the page")


@pytest.mark.unit
@pytest.mark.parametrize("script", ["fit_ported.py", "loop_ported.py"])
def test_the_ports_import_only_public_names(script):
    imports = mpi_resolver_imports(SCRIPTS / script)
    assert imports, script
    for imported in imports:
        module, _, name = imported.partition(":")
        assert module == "mpi_resolver" and name in mpi_resolver.__all__, (script, imported)


@pytest.mark.unit
@pytest.mark.parametrize("script, calls", [
    ("fit_ported.py", ["SlurmBackupAndRestore()"]),
    ("loop_ported.py",
     ["SlurmTerminationConfig(resolver)", "config.handler(resolver, checkpoint)"]),
])
def test_the_ports_take_the_signal_and_the_directory_from_the_template(script, calls):
    """The ports name neither: the package reads MPI_RESOLVER_CHECKPOINT_DIR and
    MPI_RESOLVER_SIGNAL, which examples/train.sbatch (the page submits it) exports, the
    signal the one its `#SBATCH --signal` asks for."""
    text = (SCRIPTS / script).read_text()
    assert all(call in text for call in calls), (script, calls)
    assert "signal=" not in text and "MPI_RESOLVER_" not in text, script
    assert "/examples/train.sbatch" in block("own-script-sbatch")
    template = (ROOT / "examples" / "train.sbatch").read_text()
    asked = re.findall(r"^#SBATCH --signal=B:(\S+)", template, re.M)  # to the batch shell
    assert len(asked) == 1, asked
    # the package is told the same name and seconds, unless the submitter exported its own
    assert re.findall(r"^export MPI_RESOLVER_SIGNAL=\$\{MPI_RESOLVER_SIGNAL:-(\S+)\}$",
                      template, re.M) == asked
    assert re.search(r"^export MPI_RESOLVER_CHECKPOINT_DIR=\S", template, re.M)


@pytest.mark.tf
def test_the_original_trains_on_one_machine(tmp_path):
    """original.py as it is, with plain `python`: it trains its planned steps to a useful
    accuracy (chance is 0.25) and saves model.keras where it runs."""
    proc = subprocess.run([sys.executable, str(SCRIPTS / "original.py")], cwd=tmp_path,
                          capture_output=True, text=True, timeout=300,
                          env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", OMP_NUM_THREADS="1",
                                   TF_NUM_INTRAOP_THREADS="1", TF_NUM_INTEROP_THREADS="1"))
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    trained = re.search(r"^steps trained: (\d+), accuracy: (\d\.\d+)$", proc.stdout, re.M)
    text = (SCRIPTS / "original.py").read_text()
    epochs, batch, samples = (int(re.search(rf"^{name} = (\d+)", text, re.M).group(1))
                              for name in ("EPOCHS", "BATCH_SIZE", "SAMPLES"))
    assert trained and int(trained.group(1)) == epochs * (samples // batch), proc.stdout
    assert float(trained.group(2)) > 0.9, proc.stdout
    assert (tmp_path / "model.keras").is_file()
