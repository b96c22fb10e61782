"""The sbatch templates (examples/train.sbatch, train_gpu.sbatch, train_jax.sbatch) run by bash
directly, without Slurm: stand-ins on PATH for srun (the preflight), scancel and `mpi-resolver`
(supervise, waiting until the test lets it end), each noting its arguments. What they check
before the preflight (SCRIPT), and their trap for the warning signal: USR1 and USR2 both, the
one that is not MPI_RESOLVER_SIGNAL's said and passed on as the configured one. The same
templates under real Slurm: tests/cluster/test_templates.py, test_signals.py."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Dict, List, Optional

import pytest

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
#: srun's and scancel's stand-ins: each call's arguments, one line, in NAME.txt beside them.
NOTE = """#!/bin/sh
echo "$*" >> "$(dirname "$0")/$(basename "$0").txt"
"""
#: supervise's stand-in: notes its arguments, says it started, waits for the file 'stop'
#: (30 s at most), then notes whether the batch script's trap made its --warned-file.
SUPERVISE = """#!/bin/sh
here=$(dirname "$0")
warned="" previous=""
for arg in "$@"; do
  [ "$previous" = "--warned-file" ] && warned=$arg
  previous=$arg
done
echo "$*" > "$here/supervise.txt"
touch "$here/supervise.started"
i=0
while [ ! -e "$here/stop" ] && [ "$i" -lt 600 ]; do sleep 0.05; i=$((i + 1)); done
[ -n "$warned" ] && [ -e "$warned" ] && echo "warned file made" >> "$here/supervise.txt"
exit 0
"""


@pytest.fixture
def bin_dir(tmp_path: Path) -> Path:
    """A directory of the stand-ins (srun, scancel, mpi-resolver)."""
    where = tmp_path / "bin"
    where.mkdir()
    for name, text in (("srun", NOTE), ("scancel", NOTE), ("mpi-resolver", SUPERVISE)):
        (where / name).write_text(text)
        (where / name).chmod(0o755)
    return where


def template_env(bin_dir: Path, **extra: str) -> Dict[str, str]:
    """Returns the environment of a batch script outside Slurm: none of Slurm's, the
    package's or the templates' own variables but ``extra``; the stand-ins first on PATH."""
    own = ("SCRIPT", "TRAIN", "CHECKPOINT_", "SPARE_NODES", "MAX_RESTARTS", "CONTAINER")
    keep = {k: v for k, v in os.environ.items()
            if not k.startswith(("SLURM_", "MPI_RESOLVER_", "SRUN_", *own))}
    return {**keep, "PATH": f"{bin_dir}:{os.environ['PATH']}", "TMPDIR": str(bin_dir.parent),
            **extra}


def noted(bin_dir: Path, name: str) -> List[str]:
    path = bin_dir / f"{name}.txt"
    return path.read_text().splitlines() if path.exists() else []


@pytest.mark.parametrize("template, submit, script, said", [
    pytest.param("train.sbatch", "root", "missing", "train.sbatch: SCRIPT={script}: no such "
                 "file (a relative path is from the submit directory, {submit}); set "
                 "SCRIPT=/path/to/your_script.py", id="train.sbatch: SCRIPT missing"),
    pytest.param("train_gpu.sbatch", "root", "missing", "train_gpu.sbatch: SCRIPT={script}: "
                 "no such file (a relative path is from the submit directory, {submit}); set "
                 "SCRIPT=/path/to/your_script.py", id="train_gpu.sbatch: SCRIPT missing"),
    pytest.param("train_jax.sbatch", "root", "missing", "train.sbatch: SCRIPT={script}: no "
                 "such file (a relative path is from the submit directory, {submit}); set "
                 "SCRIPT=/path/to/your_script.py", id="train_jax.sbatch: train.sbatch says it"),
    pytest.param("train.sbatch", "empty", None, "train.sbatch: train.py not found in {submit} "
                 "or its examples/; submit from examples/ or set "
                 "SCRIPT=/path/to/your_script.py", id="train.sbatch: no train.py"),
    pytest.param("train_jax.sbatch", "empty", None, "train_jax.sbatch: train.sbatch not found "
                 "in {submit} or its examples/; submit from the mpi_resolver checkout or its "
                 "examples/", id="train_jax.sbatch: no train.sbatch"),
])
def test_a_missing_script_is_a_usage_error_before_the_preflight(
        tmp_path: Path, bin_dir: Path, template: str, submit: str, script: Optional[str],
        said: str) -> None:
    """Exit 2 (a usage error: supervise and the templates never requeue it) with one line
    naming what is missing, and nothing run: no preflight (srun), no supervise."""
    where = str(ROOT) if submit == "root" else str(tmp_path)
    extra = {"SLURM_SUBMIT_DIR": where}
    missing = str(tmp_path / "no_such_train.py")
    if script is not None:
        extra["SCRIPT"] = missing
    proc = subprocess.run(["bash", str(EXAMPLES / template), "--epochs", "1"],
                          capture_output=True, text=True, timeout=60, cwd=tmp_path,
                          env=template_env(bin_dir, **extra))
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.splitlines() == [said.format(script=missing, submit=where)]
    assert proc.stdout == ""  # not even the preflight's first line
    assert noted(bin_dir, "srun") == [] and noted(bin_dir, "supervise") == []


def mismatch(came: str, configured: str) -> str:
    """Returns the templates' line for a warning signal ``came`` that is not MPI_RESOLVER_SIGNAL's
    ``configured`` (as 'USR1@120')."""
    name, seconds = configured.split("@")
    return (f"== {came} came to this script, but MPI_RESOLVER_SIGNAL={configured} says {name}: "
            f"passed on to the tasks as {name}, so that they still save; give Slurm and the "
            f"package one signal: MPI_RESOLVER_SIGNAL={came}@{seconds} sbatch "
            f"--signal=B:{came}@{seconds} ...")


@pytest.mark.parametrize("template, configured, came, passed, line", [
    pytest.param("train.sbatch", None, "USR1", "USR1", None, id="the default pair"),
    pytest.param("train.sbatch", None, "USR2", "USR1", mismatch("USR2", "USR1@120"),
                 id="--signal=B:USR2 with the default MPI_RESOLVER_SIGNAL: said, USR1 on"),
    pytest.param("train_gpu.sbatch", None, "USR2", "USR1", mismatch("USR2", "USR1@300"),
                 id="train_gpu.sbatch, its 300 s"),
    pytest.param("train_jax.sbatch", None, "USR2", "USR1", mismatch("USR2", "USR1@120"),
                 id="train_jax.sbatch (train.sbatch's trap, the same process)"),
    pytest.param("train.sbatch", "USR2@300", "USR2", "USR2", None, id="the pair USR2@300"),
    pytest.param("train.sbatch", "USR2@300", "USR1", "USR2", mismatch("USR1", "USR2@300"),
                 id="MPI_RESOLVER_SIGNAL=USR2 with the template's --signal=B:USR1: USR2 on"),
    pytest.param("train.sbatch", "sigusr2@60", "USR2", "USR2", None,
                 id="the variable's other spellings: sigusr2"),
    pytest.param("train.sbatch", "R:USR2@60", "USR2", "USR2", None, id="R:USR2"),
    pytest.param("train.sbatch", f"{int(signal.SIGUSR2)}@60", "USR2", "USR2", None,
                 id="a number"),
])
def test_the_trap_takes_either_user_signal_and_passes_on_the_configured_one(
        tmp_path: Path, bin_dir: Path, template: str, configured: Optional[str], came: str,
        passed: str, line: Optional[str]) -> None:
    """--signal=B:X@N comes to the batch shell alone: a user signal it did not trap would end
    it (exit 128 + the signal) and nothing would be saved. Either one is marked for supervise
    and passed on to the tasks as MPI_RESOLVER_SIGNAL's (the one they watch)."""
    script = tmp_path / "mine.py"
    script.write_text("")
    extra = {"SLURM_SUBMIT_DIR": str(ROOT), "SLURM_JOB_ID": "12", "SLURM_JOB_NODELIST": "node1",
             "SCRIPT": str(script), "CHECKPOINT_DIR": str(tmp_path / "ckpt")}
    if configured is not None:
        extra["MPI_RESOLVER_SIGNAL"] = configured
    proc = subprocess.Popen(["bash", str(EXAMPLES / template)], cwd=tmp_path, text=True,
                            env=template_env(bin_dir, **extra), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    try:
        _wait_for(bin_dir / "supervise.started", proc)
        os.kill(proc.pid, getattr(signal, f"SIG{came}"))
        _wait_for(bin_dir / "scancel.txt", proc)
    finally:
        (bin_dir / "stop").touch()
        out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, (out, err)  # the batch shell lived on: supervise's status
    assert noted(bin_dir, "scancel") == [f"--signal={passed} 12"]
    assert noted(bin_dir, "supervise")[1:] == ["warned file made"]
    assert err.splitlines() == ([line] if line else []), err


def _wait_for(path: Path, proc: subprocess.Popen, seconds: float = 30) -> None:
    """Waits until ``path`` exists; fails where the template ended or ``seconds`` passed."""
    deadline = time.monotonic() + seconds
    while not path.exists():
        assert proc.poll() is None, f"the template ended ({proc.returncode}) before {path.name}"
        assert time.monotonic() < deadline, f"no {path.name} within {seconds} s"
        time.sleep(0.05)
