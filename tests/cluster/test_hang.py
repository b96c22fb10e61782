"""A worker alive but stuck, for real: tests/cluster/hang_train.py on two emulated nodes under
`srun --mpi=pmix --kill-on-bad-exit=1`, TensorFlow 2.21; worker 1's input stops yielding at
batch HANG_AT while worker 0 waits for it in the all-reduce, which TensorFlow never ends by
itself (worker 1 still answers the coordination service's heartbeats).

The step watchdog (T = MINIMUM s) must end the step: worker 1's Python stacks in the output,
its line naming it (task, rank, node) and where it is stuck (the generator's line), exit 124
as srun reports it, and the step over within BOUND seconds of the hang. Worker 0's line, where
it gets to write one before Slurm ends it, says that it waits. About 15 s (two TensorFlow
start-ups, then T, the grace and Slurm's end of the step).
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

SCRIPT = str(ROOT / "tests" / "cluster" / "hang_train.py")
PORT = 24720
HANG_AT = 30
MINIMUM = 3.0
#: seconds from the hang to srun's exit: T, the watchdog's look every 0.2 s, a waiting
#: worker's 2-s grace, Slurm's KillWait (5 s on this cluster) where TensorFlow holds SIGTERM,
#: and 5 s for a loaded machine
BOUND = MINIMUM + 0.2 + 2 + 5 + 5
START = 120
#: the generator's line where worker 1 waits for ever
LINE = next(i for i, text in enumerate(open(SCRIPT), 1) if "threading.Event().wait()" in text)


def tasks(cluster: SlurmCluster) -> List[int]:
    """Returns the PIDs of this cluster's hang_train.py tasks still running (by their command
    line and their environment's SLURM_CONF)."""
    mark = f"SLURM_CONF={cluster.env['SLURM_CONF']}".encode()
    out = []
    for entry in filter(str.isdigit, os.listdir("/proc")):
        try:
            if SCRIPT.encode() in Path(f"/proc/{entry}/cmdline").read_bytes().split(b"\0") \
                    and mark in Path(f"/proc/{entry}/environ").read_bytes().split(b"\0"):
                out.append(int(entry))
        except OSError:
            continue  # gone meanwhile
    return out


def test_a_stuck_worker_is_named_its_stacks_written_and_the_step_ended(
        cluster: SlurmCluster) -> None:
    step = Step(cluster, ["srun", "-N2", "--ntasks-per-node=1", "--mpi=pmix", "--label",
                          "--kill-on-bad-exit=1", PY, SCRIPT, str(PORT), str(HANG_AT),
                          str(MINIMUM)])
    try:
        step.wait_for(r"^\s*0: worker 0: step 10$", START)
        step.wait_for(rf"^\s*1: worker 1: batch {HANG_AT} never comes$", START)
        hung = time.monotonic()
        rc = step.finish(BOUND + 60)
        ended = time.monotonic() - hung
        deadline = time.monotonic() + 10  # slurmstepd reaps its tasks
        while tasks(cluster) and time.monotonic() < deadline:
            time.sleep(0.1)
        left = tasks(cluster)
    finally:
        step.kill()
        for pid in tasks(cluster):  # only this test's tasks, by PID
            os.kill(pid, signal.SIGKILL)
    where = step.context()
    err = "".join(step.stderr)
    print(f"\n--- srun's exit {rc}, {ended:.2f} s after the hang; its stderr:\n{err}")
    stuck = re.findall(
        r"^\s*1: mpi_resolver: step watchdog: worker:1 \(rank 1 on node2, pid \d+\): step "
        r"(\d+) has run (\d+\.\d\d) s, past its limit of 3\.00 s \(10 x the median step \S+ s "
        r"over \d+ steps, at least 3 s\); stuck in (\S+):(\d+) batches, Python that "
        r"TensorFlow runs for the step \(a tf\.data generator or a py_function\)\. Python "
        r"stacks above\. Exit 124 now\.$", err, re.M)
    assert len(stuck) == 1, where
    _, ran, path, line = stuck[0]
    assert (path, int(line)) == (SCRIPT, LINE) and float(ran) < MINIMUM + 1, where
    assert re.search(rf'^\s*1:   File "{re.escape(SCRIPT)}", line {LINE} in batches$', err, re.M)
    assert re.search(r"^srun: error: node2: task 1: Exited with exit code 124$", err, re.M), where
    waiting = re.findall(r"^\s*0: mpi_resolver: step watchdog: worker:0 .*$", err, re.M)
    assert all("; in TensorFlow's step (tensorflow/python/eager/execute.py:" in w
               and "waiting for another worker" in w for w in waiting), where
    assert rc != 0 and not left, (left, where)
    assert ended < BOUND, f"the step ended {ended:.1f} s after the hang{where}"


def test_a_hang_before_the_first_step_ends_at_the_start_bound_and_is_restarted(
        cluster: SlurmCluster, tmp_path: Path) -> None:
    """Worker 1's input never yields its first batch (a rendezvous, a first step that never
    comes): no step is timed, so no median; the start bound (MPI_RESOLVER_START_TIMEOUT,
    here 6 s) ends it, worker 1's own watchdog names it stuck and exits 124, and supervise
    blames its node and runs the step again, which trains (the hang came once)."""
    start = 6.0
    marker = tmp_path / "hung-once"
    env = {"MPI_RESOLVER_START_TIMEOUT": str(int(start))}
    step = Step(cluster, [PY, "-m", "mpi_resolver", "supervise", "--max-restarts", "1", "--",
                          "srun", "-N2", "--ntasks-per-node=1", "--mpi=pmix", "--label",
                          "--kill-on-bad-exit=1", PY, SCRIPT, str(PORT + 1), "0",
                          str(MINIMUM), "20", str(marker)], env=env)
    try:
        step.wait_for(r"^\s*1: worker 1: batch 0 never comes$", START)
        rc = step.finish(START)
    finally:
        step.kill()
        for pid in tasks(cluster):
            os.kill(pid, signal.SIGKILL)
    where = step.context()
    err = "".join(step.stderr)
    assert rc == 0, where
    assert re.search(
        r"^\s*1: mpi_resolver: step watchdog: worker:1 \(rank 1 on node2, pid \d+\): step 1 has "
        r"run \d+\.\d\d s, past its limit of 6\.00 s \(no step timed yet: the start bound, "
        r"MPI_RESOLVER_START_TIMEOUT, a rendezvous or a first step that never came\); stuck in "
        rf"{re.escape(SCRIPT)}:\d+ batches, Python that TensorFlow runs", err, re.M), where
    said = [ln.split("mpi-resolver supervise: ", 1)[1] for ln in err.splitlines()
            if "mpi-resolver supervise: run 1:" in ln]
    ran = re.fullmatch(
        r"run 1: task 1 on node2: hung \(step 1 has run \d+\.\d\d s\), (\d+\.\d) s into the "
        r"run: restart 1 of 1", said[0]) if len(said) == 1 else None
    assert ran, where
    # the run: TensorFlow's start (seconds) and the start bound, not the time limit's hours
    assert float(ran.group(1)) < start + 60, where
    assert "the step completed after 1 restart" in err, where
    assert step.text.count("worker 0: done") == 1, where
