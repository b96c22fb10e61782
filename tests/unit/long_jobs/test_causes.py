"""long_jobs.causes: how a run ended, as one cause, from the launcher's report and the exit
statuses (the lines as srun, mpirun and the package print them)."""

from __future__ import annotations

from typing import List, Optional

import pytest

from mpi_resolver.long_jobs.causes import Cause, Ending, RunEnd, classify
from mpi_resolver.long_jobs.step_report import StepReport, TaskEnd
from tests.unit.long_jobs.test_step_report import STUCK_LINE, WAITING_LINE

pytestmark = pytest.mark.unit

USR1 = 10
LOST_LINE = ("0: train.py: lost worker:1 (rank 1 on node2, node2:8888). TensorFlow: "
             "UnavailableError: Task /job:worker/replica:0/task:1 heartbeat timeout. This "
             "worker, worker:0 (rank 0 on node1, node1:8888), exits 1 now.")


def run(status: Optional[int], *lines: str) -> RunEnd:
    report = StepReport()
    for line in lines:
        report.feed(line)
    return RunEnd(status, report, 1.0)


def srun(task: int, node: str, how: str) -> str:
    return f"srun: error: {node}: task {task}: {how}"


@pytest.mark.parametrize("end, cause, status, task", [
    (run(None), Cause.NOT_STARTED, 75, None),  # nothing ran: it may run again
    (run(0), Cause.COMPLETED, 0, None),
    (run(0, srun(1, "node2", "Killed")), Cause.COMPLETED, 0, None),  # the step's own 0 wins
    # the tasks' own codes, through srun's kill-on-bad-exit 143
    (run(143, srun(1, "n2", "Exited with exit code 75")), Cause.SAVED_RUN_AGAIN, 75, 1),
    (run(75), Cause.SAVED_RUN_AGAIN, 75, None),
    (run(143, srun(0, "n1", "Exited with exit code 74")), Cause.SAVE_FAILED, 74, 0),
    (run(143, srun(0, "n1", "Exited with exit code 143")), Cause.TERMINATED, 143, 0),
    (run(143, srun(0, "n1", "Terminated")), Cause.TERMINATED, 143, 0),
    (run(143), Cause.TERMINATED, 143, None),
    # killed by the warning signal before its handler: the job's end coming, not a crash
    (run(143, srun(1, "n2", "User defined signal 1")), Cause.WARNED, 138, 1),
    (run(138), Cause.WARNED, 138, None),
    (run(140, srun(1, "n2", "User defined signal 2")), Cause.SIGNALED, 140, 1),
    # usage and configuration errors: argparse's 2, sysexits' 64-78 (not 74, 75)
    (run(143, srun(0, "n1", "Exited with exit code 2")), Cause.USAGE, 2, 0),
    (run(78), Cause.USAGE, 78, None),
    (run(64), Cause.USAGE, 64, None),
    (run(63), Cause.FAILED, 63, None),
    (run(79), Cause.USAGE, 79, None),
    (run(80), Cause.FAILED, 80, None),
    # a hang: the watchdog's code, its lines, its backstop
    (run(143, srun(1, "n2", "Exited with exit code 124")), Cause.HANG, 124, 1),
    (run(124), Cause.HANG, 124, None),
    (run(143, WAITING_LINE, STUCK_LINE, srun(0, "node1", "Exited with exit code 124")),
     Cause.HANG, 124, 1),
    (run(143, STUCK_LINE), Cause.HANG, 124, 1),  # the watchdog's line alone: its status
    (run(143, "Timeout (0:11:00)!", srun(1, "n2", "Exited with exit code 1")), Cause.HANG, 1, 1),
    # out of memory: srun's words have no status; slurmstepd's event alone
    (run(143, srun(1, "n2", "Out Of Memory"), srun(0, "n1", "Terminated")), Cause.OUT_OF_MEMORY,
     143, 1),
    (run(137, "slurmstepd: error: Detected 1 oom-kill event(s) in StepId=7.0.",
         srun(0, "n1", "Killed")), Cause.OUT_OF_MEMORY, 137, 0),
    (run(143, "slurmstepd-n1: error: Detected 1 oom-kill event(s) in StepId=7.0.",
         srun(0, "n1", "Exited with exit code 1")), Cause.OUT_OF_MEMORY, 1, 0),
    (run(143, srun(0, "n1", "Exited with exit code 1"), srun(1, "n2", "Out Of Memory")),
     Cause.OUT_OF_MEMORY, 143, 1),  # the task out of memory, whichever srun named first
    # signals and other exits
    (run(143, srun(1, "node2", "Killed"), srun(0, "node1", "Terminated")), Cause.SIGNALED, 137,
     1),
    (run(139, srun(1, "n2", "Segmentation fault (core dumped)")), Cause.SIGNALED, 139, 1),
    (run(137), Cause.SIGNALED, 137, None),
    (run(143, srun(0, "n1", "Exited with exit code 1")), Cause.FAILED, 1, 0),
    (run(1), Cause.FAILED, 1, None),
    (run(5, srun(0, "n1", "Something new")), Cause.FAILED, 5, 0),  # words without a status
    # a survivor names the peer it lost (stopped): the peer is blamed, the survivor's status
    (run(143, LOST_LINE, srun(0, "node1", "Exited with exit code 1"), srun(1, "node2", "Killed")),
     Cause.FAILED, 1, 1),
    (run(143, srun(1, "node2", "Killed"), LOST_LINE, srun(0, "node1", "Exited with exit code 1")),
     Cause.SIGNALED, 137, 1),  # the peer ended first: srun's words for it
], ids=lambda v: v.name if isinstance(v, Cause) else "")
def test_classify(end: RunEnd, cause: Cause, status: int, task: Optional[int]) -> None:
    ending = classify(end, USR1)
    assert (ending.cause, ending.status) == (cause, status)
    assert (ending.task.task if ending.task else None) == task


def test_a_lost_peer_is_named_and_blamed() -> None:
    ending = classify(run(143, srun(0, "node1", "Exited with exit code 1"), LOST_LINE), USR1)
    assert (ending.what("srun"), ending.node) == (
        "task 1 on node2: lost, a peer said (worker:1)", "node2")


@pytest.mark.parametrize("ending, program, what, node", [
    (Ending(Cause.SIGNALED, 137, TaskEnd(1, "node2", "Killed", signal=9)), "srun",
     "task 1 on node2: Killed (signal 9)", "node2"),
    (Ending(Cause.FAILED, 3), "srun", "srun exited 3", None),
    (Ending(Cause.SIGNALED, 137), "mpirun", "mpirun exited 137 (128 + SIGKILL)", None),
    (Ending(Cause.FAILED, 255), "python3", "python3 exited 255", None),
    (Ending(Cause.FAILED, 200), "srun", "srun exited 200", None),  # 128 + 72: no such signal
    (Ending(Cause.NOT_STARTED, 0), "srun", "no run started", None),
    (Ending(Cause.FAILED, 1, TaskEnd(2, None, "Exited with exit code 1", code=1, word="rank")),
     "mpirun", "rank 2: Exited with exit code 1", None),
    (Ending(Cause.FAILED, 1, TaskEnd(2, "", "Exited with exit code 1", code=1)), "srun",
     "task 2: Exited with exit code 1", None),
])
def test_what_and_node(ending: Ending, program: str, what: str, node: Optional[str]) -> None:
    assert ending.what(program) == what
    assert ending.node == node


def test_every_cause_has_words() -> None:
    words: List[str] = [c.value for c in Cause]
    assert len(set(words)) == len(words) and all(words)
