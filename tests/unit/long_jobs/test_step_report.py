"""srun's and mpirun's reports of a task's bad end, read line by line (lines as measured with
Slurm 22.05.8 and Open MPI 4.1.4)."""

from __future__ import annotations

from typing import List, Optional

import pytest

from mpi_resolver.long_jobs.step_report import StepReport, TaskEnd, signal_of

pytestmark = pytest.mark.unit

K = "task"


@pytest.mark.parametrize("line, end", [
    ("srun: error: node2: task 1: Killed", TaskEnd(1, "node2", "Killed", signal=9)),
    ("srun: error: node2: task 1: Segmentation fault",
     TaskEnd(1, "node2", "Segmentation fault", signal=11)),
    ("srun: error: node2: task 1: Bus error", TaskEnd(1, "node2", "Bus error", signal=7)),
    ("srun: error: node1: task 0: Terminated", TaskEnd(0, "node1", "Terminated", signal=15)),
    ("srun: error: n9: task 12: Segmentation fault (core dumped)",
     TaskEnd(12, "n9", "Segmentation fault (core dumped)", signal=11)),
    ("srun: error: node1: task 0: Exited with exit code 3",
     TaskEnd(0, "node1", "Exited with exit code 3", code=3)),
    ("srun: error: node1: task 0: Exited with exit code 75  ",
     TaskEnd(0, "node1", "Exited with exit code 75", code=75)),
    ("srun: error: node1: tasks 0-3: Killed", TaskEnd(0, "node1", "Killed", signal=9)),
    ("srun: error: node1: tasks 2,5: Exited with exit code 1",
     TaskEnd(2, "node1", "Exited with exit code 1", code=1)),
    ("srun: error: node1: task 0: Something new", TaskEnd(0, "node1", "Something new")),
    ("mpirun noticed that process rank 1 with PID 0 on node vm exited on signal 9 (Killed).",
     TaskEnd(1, "vm", "Killed", signal=9, word="rank")),
    ("mpirun noticed that process rank 3 with PID 77 on node c-1 exited on signal 11 "
     "(Segmentation fault).", TaskEnd(3, "c-1", "Segmentation fault", signal=11, word="rank")),
    ("prterun noticed that process rank 0 with PID 5 on node n1 exited on signal 7.",
     TaskEnd(0, "n1", "Signaled", signal=7, word="rank")),
], ids=lambda v: v if isinstance(v, str) else "")
def test_one_line_is_one_task_end(line: str, end: TaskEnd) -> None:
    report = StepReport()
    report.feed(line)
    assert report.ends == [end]
    assert report.first == end


@pytest.mark.parametrize("line", [
    "", "srun: error: Unable to create step for job 5: Invalid node name",
    "srun: launch/slurm: _step_signal: Terminating StepId=6.0",
    "  srun: error: node2: task 1: Killed",  # not srun's own line
    "srun: error: node2: task x: Killed", "srun: error: node2: task 1: ",
    "srun: error: node 2: task 1: Killed",
    "mpirun noticed that process rank one with PID 0 on node vm exited on signal 9 (Killed).",
    "0: rank 0: worker:0 at node1:8888", "  Exit code:    3",  # no process named before it
])
def test_other_lines_are_passed_over(line: str) -> None:
    report = StepReport()
    report.feed(line)
    assert report.ends == [] and report.first is None


MPIRUN_EXIT = """\
--------------------------------------------------------------------------
mpirun detected that one or more processes exited with non-zero status, thus causing
the job to be terminated. The first process to do so was:

  Process name: [[30822,1],1]
  Exit code:    3
--------------------------------------------------------------------------"""


@pytest.mark.parametrize("text, ends", [
    (MPIRUN_EXIT, [TaskEnd(1, None, "Exited with exit code 3", code=3, word="rank")]),
    (MPIRUN_EXIT.replace("[[30822,1],1]", "[prterun-vm-1234@1,12]"),
     [TaskEnd(12, None, "Exited with exit code 3", code=3, word="rank")]),
    (MPIRUN_EXIT + "\n  Exit code:    4",  # one exit code per process named
     [TaskEnd(1, None, "Exited with exit code 3", code=3, word="rank")]),
    ("srun: error: node2: task 1: Killed\nsrun: error: node1: task 0: Terminated",
     [TaskEnd(1, "node2", "Killed", signal=9), TaskEnd(0, "node1", "Terminated", signal=15)]),
], ids=["mpirun's exit code", "Open MPI 5's process name", "an exit code alone",
        "kill-on-bad-exit's consequence comes second"])
def test_the_report_keeps_every_end_in_order_the_first_is_the_cause(
        text: str, ends: List[TaskEnd]) -> None:
    report = StepReport()
    for line in text.splitlines():
        report.feed(line)
    assert report.ends == ends
    assert report.first == ends[0]


@pytest.mark.parametrize("end, status, text", [
    (TaskEnd(1, "node2", "Killed", signal=9), 137, "task 1 on node2: Killed (signal 9)"),
    (TaskEnd(0, "node1", "Exited with exit code 3", code=3), 3,
     "task 0 on node1: Exited with exit code 3"),
    (TaskEnd(0, "node1", "Exited with exit code 0", code=0), 0,
     "task 0 on node1: Exited with exit code 0"),
    (TaskEnd(2, None, "Exited with exit code 1", code=1, word="rank"), 1,
     "rank 2: Exited with exit code 1"),
    (TaskEnd(0, "n1", "Something new"), None, "task 0 on n1: Something new"),
    (TaskEnd(0, "", "Killed", signal=9), 137, "task 0: Killed (signal 9)"),
])
def test_status_and_text(end: TaskEnd, status: Optional[int], text: str) -> None:
    assert end.status == status
    assert end.text() == text


@pytest.mark.parametrize("words, number", [
    ("Killed", 9), ("Segmentation fault", 11), ("Bus error", 7), ("Terminated", 15),
    ("Aborted", 6), ("Aborted (core dumped)", 6), ("Killed (core dumped) ", None),
    ("killed", None), ("", None), ("Exited with exit code 3", None),
])
def test_signal_of_reads_strsignal_s_words(words: str, number: Optional[int]) -> None:
    assert signal_of(words) == number


#: The step watchdog's line (step_watchdog._line) of a stuck rank and of a waiting one.
STUCK_LINE = ("mpi_resolver: step watchdog: worker:1 (rank 1 on node2, pid 4242): step 3 has "
              "run 601.00 s, past its limit of 600.00 s (10 x the median step 60 s over 1 "
              "steps, at least 300 s); stuck in train.py:12 step. Python stacks above. Exit "
              "124 now.")
WAITING_LINE = ("mpi_resolver: step watchdog: worker:0 (rank 0 on node1, pid 17): step 3 has "
                "run 601.00 s, past its limit of 600.00 s (10 x the median step 60 s over 1 "
                "steps, at least 300 s); in TensorFlow's step (tensorflow/x.py:1 f): waiting "
                "for another worker, or busy in TensorFlow; its own stack cannot tell which. "
                "Python stacks above. Exit 124 in 2 s (a stuck peer writes its stacks and ends "
                "first).")
UNKNOWN_LINE = ("mpi_resolver: step watchdog: (on vm, pid 9): step 5 has run 1.00 s, past its "
                "limit of 0.50 s (2 x the median step 0.1 s over 3 steps, at least 0.5 s); "
                "cannot tell where: its main thread shows no frame outside Python's own "
                "library. Python stacks above. Exit 124 now.")


@pytest.mark.parametrize("line, rank, node, verdict", [
    (STUCK_LINE, 1, "node2", "stuck"),
    (WAITING_LINE, 0, "node1", "waiting"),
    (UNKNOWN_LINE, None, "vm", "unknown"),
    ("3: " + STUCK_LINE.replace("rank 1 on", "on"), 3, "node2", "stuck"),  # srun --label
], ids=["stuck", "waiting", "no rank", "srun's label gives the rank"])
def test_the_watchdog_s_line_is_read(line: str, rank: Optional[int], node: str,
                                     verdict: str) -> None:
    report = StepReport()
    report.feed(line)
    [w] = report.watchdogs
    assert (w.rank, w.node, w.verdict) == (rank, node, verdict)
    assert report.hung and report.ends == []


@pytest.mark.parametrize("line, oom, backstop", [
    ("slurmstepd: error: Detected 1 oom-kill event(s) in StepId=10238881.0. Some of your "
     "processes may have been killed by the cgroup out-of-memory handler.", True, False),
    ("slurmstepd: error: Detected 2 oom_kill event in step 12.batch cgroup.", True, False),
    ("slurmstepd-node2: error: Detected 1 oom-kill event(s) in StepId=1.0. Some of your "
     "processes may have been killed by the cgroup out-of-memory handler.", True, False),
    ("slurmstepd-gpu-a01.hpc: error: Detected 1 oom_kill event in StepId=3.0", True, False),
    ("slurmstepd-: error: Detected 1 oom-kill event(s) in StepId=1.0.", False, False),
    ("slurmstepd node2: error: Detected 1 oom-kill event(s) in StepId=1.0.", False, False),
    ("slurmstepd: error: Detected oom-kill", False, False),
    ("Timeout (0:05:00)!", False, True),
    ("2: Timeout (1:00:00)!", False, True),
    ("Timeout (0:05:00)! and more", False, False),
    ("Timeout (5 minutes)!", False, False),
])
def test_out_of_memory_and_the_backstop_are_noted(line: str, oom: bool, backstop: bool) -> None:
    report = StepReport()
    report.feed(line)
    assert (report.oom_event, report.backstop, report.hung) == (oom, backstop, backstop)


def test_srun_s_out_of_memory_is_a_task_end_without_a_status() -> None:
    report = StepReport()
    for line in ("srun: error: node2: task 1: Out Of Memory",
                 "srun: error: node1: task 0: Terminated"):
        report.feed(line)
    assert report.out_of_memory == TaskEnd(1, "node2", "Out Of Memory")
    assert report.first.status is None


def _report(*lines: str) -> StepReport:
    report = StepReport()
    for line in lines:
        report.feed(line)
    return report


@pytest.mark.parametrize("lines, blamed", [
    # a stuck rank's own watchdog names it, whoever exited first
    ([WAITING_LINE, STUCK_LINE, "srun: error: node1: task 0: Exited with exit code 124"],
     TaskEnd(1, "node2", "hung (step 3 has run 601.00 s)", code=124)),
    # only waiting peers fired: the rank that did not say it waited (stopped, holding the
    # interpreter lock, killed by srun) is the one, never a waiting peer
    ([WAITING_LINE, "srun: error: node1: task 0: Exited with exit code 124",
      "srun: error: node2: task 1: Killed"], TaskEnd(1, "node2", "Killed", signal=9)),
    # the backstop's exit of the stuck rank
    ([WAITING_LINE, "Timeout (0:11:00)!", "srun: error: node2: task 1: Exited with exit code 1"],
     TaskEnd(1, "node2", "Exited with exit code 1", code=1)),
    # waiting peers only, and no other end reported: nobody is blamed
    ([WAITING_LINE, "srun: error: node1: task 0: Exited with exit code 124"], None),
    # no watchdog line: the first end
    (["srun: error: node1: task 0: Exited with exit code 124"],
     TaskEnd(0, "node1", "Exited with exit code 124", code=124)),
], ids=["stuck named", "the one that did not wait", "the backstop's exit", "nobody",
        "the first end"])
def test_a_hang_is_blamed_on_the_rank_that_did_not_arrive(lines: List[str],
                                                          blamed: Optional[TaskEnd]) -> None:
    assert _report(*lines).stuck() == blamed


@pytest.mark.parametrize("lines, culprit", [
    ([], None),
    (["srun: error: node1: task 0: Exited with exit code 1"], (0, "node1")),
    (["1: train.py: lost worker:0 (rank 0 on node1, node1:8888). TensorFlow: ...",
      "srun: error: node2: task 1: Exited with exit code 1"], (0, "node1")),
    (["srun: error: node1: task 0: Killed",
      "train.py: lost worker:0 (rank 0 on node1, node1:8888). ..."], (0, "node1")),
    (["train.py: lost chief:0 (rank 0 on gpu-a01.hpc, 10.0.0.1:8888). ..."], (0, "gpu-a01.hpc")),
    (["train.py: lost worker:1 (rank 1 on n2, n2:1). ...", "train.py: lost worker:2 (rank 2 on "
      "n3, n3:1). ..."], (1, "n2")),
    (["train.py: lost a worker (named by nobody). ..."], None),  # no rank: nobody blamed
    (["lost worker:1 (rank one on n2)"], None),
])
def test_the_culprit_is_a_lost_peer_before_its_survivor(lines: List[str], culprit) -> None:
    report = StepReport()
    for line in lines:
        report.feed(line)
    found = report.culprit()
    assert (None if found is None else (found.task, found.node)) == culprit
