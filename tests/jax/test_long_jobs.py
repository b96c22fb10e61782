"""A long Keras 3 job on JAX interrupted and resumed, for real: examples/train_jax.py
--checkpoint-dir in a batch job on two nodes (`sbatch --requeue`, `srun --mpi=pmix`), Slurm's
warning signal sent as `#SBATCH --signal=USR1@N` sends it (`scancel --signal=USR1`); both
processes stop at the same step, process 0 saves and requeues the job (scontrol, real), the
job's next run resumes there and ends at the planned total (mpi_resolver.jax.long_jobs)."""

from __future__ import annotations

import os
import re
import shlex
import signal
import threading
import time
from pathlib import Path
from typing import Optional

import pytest

from tests.cluster.longjobs import NONE, USR1, Driver, Job
from tests.cluster.test_scenarios import launch
from tests.docs.blocks import command, runs_like
from tests.harness.slurm_cluster import SlurmCluster
from tests.jax.conftest import JAX_ENV, ROOT

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

EPOCHS, STEPS = 12, 50
TOTAL = EPOCHS * STEPS


def test_usr1_saves_at_one_step_requeues_and_resumes(jax_cluster: SlurmCluster,
                                                     jax_python: str, tmp_path: Path) -> None:
    argv = ["srun", "--mpi=pmix", jax_python, str(ROOT / "examples/train_jax.py"), "--epochs",
            str(EPOCHS), "--steps-per-epoch", str(STEPS), "--port-base", "auto",
            "--checkpoint-dir", "ckpt"]
    runs_like(command("jax-long-job", "srun"), argv)  # docs/jax.md's recipe, options added
    script = (f'cd {shlex.quote(str(tmp_path))} && '
              'echo "== job $SLURM_JOB_ID (run $((${SLURM_RESTART_COUNT:-0} + 1)))" && '
              f"{shlex.join(argv)}")
    driver = Driver(jax_cluster, timeout=300)
    job = driver.add(Job("jax usr1", ["-N2", "--ntasks-per-node=1", "--wrap", script],
                         [USR1, NONE], tmp_path / "out.txt", env=dict(JAX_ENV),
                         progress="epoch 1/"))
    driver.run()
    assert job.error is None, job.context()
    steps = job.steps()
    assert len(steps) == 2, job.context()
    (saved, zero), (done, resumed) = steps
    assert zero == 0 and 0 < saved < TOTAL and (done, resumed) == (TOTAL, saved), job.context()
    first, second = job.runs()
    assert first.count("checkpoint saved on SIGUSR1; ") == 1, job.context()
    assert re.search(r"checkpoint saved on SIGUSR1; .*requeue", first), job.context()
    # the barrier is named by the step: a process at another step would not have met it
    assert "not every worker said it had saved" not in first, job.context()
    assert f"resumed from the checkpoint in ckpt at step {saved}" in second, job.context()
    assert (tmp_path / "ckpt" / "weights.npz").exists()
    assert "final test accuracy" in second and "final test accuracy" not in first, \
        job.context()
    assert job.states[0].startswith("PENDING BeginTime Restarts=1"), job.states


def _python_of_rank(marker: str, rank: int) -> Optional[int]:
    """Returns the PID of the Python whose command line names ``marker`` and whose
    SLURM_PROCID is ``rank`` (a task of the step on the emulated nodes), or None."""
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes().split(b"\0")
            environ = Path(f"/proc/{entry}/environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if (Path(cmdline[0].decode()).name.startswith("python")
                and any(marker.encode() in part for part in cmdline)
                and f"SLURM_PROCID={rank}".encode() in environ):
            return int(entry)
    return None


def test_a_signal_to_one_process_stops_both_at_one_step(jax_cluster: SlurmCluster,
                                                        jax_python: str,
                                                        tmp_path: Path) -> None:
    """USR1 to process 1 alone (kill, by its PID): the agreement stops process 0 at the same
    step (its barrier, named by the step, is met), process 0 saves and both exit 75 (an srun
    step, not a batch job: scontrol's refusal to requeue it is said in the line)."""
    ckpt = tmp_path / "ckpt"
    argv = ["srun", "-N2", "--ntasks-per-node=1", "--mpi=pmix", jax_python,
            str(ROOT / "examples/train_jax.py"), "--epochs", "40", "--steps-per-epoch", "50",
            "--port-base", "auto", "--checkpoint-dir", str(ckpt)]
    result: dict = {}
    runner = threading.Thread(target=lambda: result.update(run=launch(
        jax_cluster, argv, env=JAX_ENV, timeout=240, parse=False)))
    runner.start()
    deadline = time.monotonic() + 200
    while not (ckpt / "weights.npz").exists() and time.monotonic() < deadline:
        time.sleep(0.2)  # process 0 saves at the end of epoch 1: training is under way
    pid = _python_of_rank(str(ckpt), 1)
    assert pid is not None, "process 1 not found"
    os.kill(pid, signal.SIGUSR1)
    runner.join(240)
    run = result["run"]
    assert run.returncode == 75, run.context()
    assert re.search(r"^checkpoint saved on SIGUSR1; scontrol requeue \d+ failed .*Only batch "
                     r"jobs", run.stdout, re.M), run.context()
    assert "not every worker said it had saved" not in run.stdout, run.context()
    (done,) = [int(n) for n in re.findall(r"^steps done: (\d+) \(resumed from 0\)$",
                                           run.stdout, re.M)]
    assert 50 <= done < 2000 and not re.search(r"^epoch 40/", run.stdout, re.M), run.context()
