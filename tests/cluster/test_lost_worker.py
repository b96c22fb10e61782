"""A worker lost mid-training, for real: examples/train.py on two emulated nodes under
`srun --mpi=pmix`, TensorFlow 2.21 (.venv) and 2.15.1 (.venv-tf215), worker 1's Python process
on node2 killed (SIGKILL) or stopped (SIGSTOP) once the chief has printed three progress lines.

Each case asserts that the step ends within BOUND seconds of the signal, non-zero, and that
the survivor's last line (examples/lost_worker.py) names the lost worker's task, rank, node and
address. The bound: TensorFlow's coordination service declares a silent worker lost after its
heartbeat timeout, 10 s on both versions (a stopped worker, and a killed one that no collective
was talking to); a killed one that a collective was talking to is noticed at once
("Connection reset by peer", "Socket closed"); the probe where TensorFlow names nobody takes
3 s at most; lost_worker then exits at once. Measured (2026-11-25, 2 cores): SIGKILL 0.1 s
(10-11 s where the heartbeat notices it), SIGSTOP 6.5-10.2 s. BOUND leaves 7 s for a loaded
machine on top of 10 + 3.

Why all four cases (about 60 s in all, most of it eight TensorFlow start-ups): the two
versions report a lost worker in different words (2.15.1: "Task ... heartbeat timeout",
"Socket closed" with the peer's ipv4 address; 2.21: "The following tasks are unhealthy",
"recvmsg:Connection reset by peer"), and lost_worker must name the task from each; a stopped
worker takes the heartbeat's 10 s on either, which is exactly what a bound must be shown for.

SIGSTOP runs with `--kill-on-bad-exit=1`, as train.sbatch does: once the survivor exits,
Slurm resumes (SIGCONT) and ends the stopped task; without it the stopped task would hold the
step for ever. SIGKILL runs with `--kill-on-bad-exit=0`: with 1, srun itself names the killed
task at once ("srun: error: node2: task 1: Killed") and sends the survivor SIGTERM, which
TensorFlow's coordination service catches, so the survivor ends either by itself or by
Slurm's SIGKILL after KillWait (5 s on this cluster), a race (measured 2 of 5 runs on 2.21);
with 0 the survivor must end the step by itself, which is what lost_worker provides.
"""

from __future__ import annotations

import os
import re
import signal
import time
from pathlib import Path
from typing import List

import pytest

from tests.cluster.conftest import PY, ROOT
from tests.cluster.test_jobs import Step
from tests.harness.slurm_cluster import SlurmCluster

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

TRAIN = str(ROOT / "examples" / "train.py")
OLDEST = ROOT / ".venv-tf215" / "bin" / "python"
#: seconds from the signal to srun's exit (see the module's docstring)
BOUND = 20.0
START = 150  # seconds for both workers to start and the chief to print step 15 (2 cores)


@pytest.fixture(scope="module")
def pythons() -> dict:
    """The interpreter of each TensorFlow version; fails (never skips) where 2.15.1's is
    missing."""
    if not OLDEST.exists():
        pytest.fail(f"{OLDEST} is missing: run `bash scripts/setup_versions.sh` (the README's "
                    "test command runs it)")
    return {"2.21": PY, "2.15.1": str(OLDEST)}


def task_pids(cluster: SlurmCluster, port: int) -> dict:
    """{Slurm task rank: PID} of this cluster's train.py tasks on ``port``: the processes
    whose environment names this cluster's slurm.conf and whose command line is train.py."""
    mark = f"SLURM_CONF={cluster.env['SLURM_CONF']}".encode()
    out = {}
    for entry in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes().split(b"\0")
            if TRAIN.encode() not in cmdline or str(port).encode() not in cmdline:
                continue
            environ = Path(f"/proc/{entry}/environ").read_bytes().split(b"\0")
        except OSError:
            continue  # gone meanwhile
        rank = [v for v in environ if v.startswith(b"SLURM_PROCID=")]
        if mark in environ and rank:
            out[int(rank[0].split(b"=")[1])] = int(entry)
    return out


def running(pid: int) -> bool:
    try:
        return TRAIN.encode() in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False


def release(pids: List[int]) -> None:
    """Resumes and kills any of ``pids`` still running train.py (a stopped task the step
    left behind), by PID."""
    for pid in pids:
        if running(pid):
            for sig in (signal.SIGCONT, signal.SIGKILL):
                try:
                    os.kill(pid, sig)
                except ProcessLookupError:
                    break


CASES = [
    pytest.param("2.21", "SIGKILL", 24710, id="2.21-SIGKILL"),
    pytest.param("2.15.1", "SIGKILL", 24711, id="2.15.1-SIGKILL"),
    pytest.param("2.21", "SIGSTOP", 24712, id="2.21-SIGSTOP"),
    pytest.param("2.15.1", "SIGSTOP", 24713, id="2.15.1-SIGSTOP"),
]


@pytest.mark.parametrize("version, signame, port", CASES)
def test_lost_worker_ends_the_step_within_the_bound_and_is_named(
        cluster: SlurmCluster, pythons: dict, version: str, signame: str, port: int) -> None:
    kill_on_bad_exit = 1 if signame == "SIGSTOP" else 0
    step = Step(cluster, ["srun", "-N2", "--ntasks-per-node=1", "--mpi=pmix", "--label",
                          f"--kill-on-bad-exit={kill_on_bad_exit}", pythons[version], TRAIN,
                          "--epochs", "1000", "--steps-per-epoch", "20", "--log-every", "5",
                          "--port-base", str(port)])
    pids: dict = {}
    try:
        step.wait_for(rf"^\s*1: rank 1: worker:1 at node2:{port},", START)
        step.wait_for(r"^\s*0:   step 15: loss ", START)  # three progress lines
        pids = task_pids(cluster, port)
        assert sorted(pids) == [0, 1], f"{pids}{step.context()}"
        signalled = time.monotonic()
        os.kill(pids[1], getattr(signal, signame))
        rc = step.finish(BOUND + 60)
        ended = time.monotonic() - signalled
    finally:
        step.kill()
        release(list(pids.values()))
    where = step.context()
    assert rc != 0, where
    assert "final test accuracy" not in step.text, where
    err = "".join(step.stderr)
    node1, node2 = f"node1:{port}", f"node2:{port}"
    # The survivor named what it lost, and ended itself with exit status 1.
    lost = re.findall(rf"^\s*0: train\.py: lost worker:1 \(rank 1 on node2, {node2}\)\. "
                      rf"TensorFlow: (\w+): (.*)\. This worker, worker:0 \(rank 0 on node1, "
                      rf"{node1}\), exits 1 now\.$", err, re.M)
    assert len(lost) == 1, where
    error, why = lost[0]
    assert error == "UnavailableError", where
    if signame == "SIGSTOP":
        assert "heartbeat" in why, where  # 2.15.1 "heartbeat timeout", 2.21 "stopped sending"
    assert re.search(r"^srun: error: node1: task 0: Exited with exit code 1$", err, re.M), where
    if signame == "SIGKILL":
        assert re.search(r"^srun: error: node2: task 1: Killed$", err, re.M), where
    assert ended < BOUND, f"the step ended {ended:.1f} s after {signame}{where}"
    deadline = time.monotonic() + 10  # slurmstepd reaps its tasks
    while any(map(running, pids.values())) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not [p for p in pids.values() if running(p)], where
    print(f"TensorFlow {version}, {signame} of worker 1: the step ended {ended:.2f} s later, "
          f"exit {rc}; the survivor: {error}: {why}")
