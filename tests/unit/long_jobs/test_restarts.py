"""supervise's restart policy as tables: which end of a step is restarted, which never is, the
count on both sides of every limit, the node left out, and the line said about each."""

from __future__ import annotations

import signal
from typing import List, Optional, Sequence

import pytest

from mpi_resolver.core.errors import FormatError
from mpi_resolver.long_jobs.restarts import (DEFAULT_MAX_RESTARTS, Action, Decision, RunEnd,
                                              requeue_refusal,
                                              decide, left_out, parse_max_restarts, say)
from mpi_resolver.long_jobs.step_report import TaskEnd

pytestmark = pytest.mark.unit

KILLED = TaskEnd(1, "node2", "Killed", signal=9)
SEGV = TaskEnd(1, "node2", "Segmentation fault", signal=11)
BUS = TaskEnd(0, "node1", "Bus error", signal=7)
EXIT3 = TaskEnd(0, "node1", "Exited with exit code 3", code=3)
EXIT75 = TaskEnd(1, "node2", "Exited with exit code 75", code=75)
EXIT143 = TaskEnd(0, "node1", "Exited with exit code 143", code=143)
TERMINATED = TaskEnd(0, "node1", "Terminated", signal=15)
UNKNOWN = TaskEnd(0, "node1", "Something new")
TERM = int(signal.SIGTERM)


@pytest.mark.parametrize("text, number", [
    ("0", 0), ("1", 1), ("3", 3), (" 12 ", 12), ("999999999999999999", 999999999999999999),
])
def test_max_restarts_accepted(text: str, number: int) -> None:
    assert parse_max_restarts(text) == number


@pytest.mark.parametrize("text", ["-1", "1.5", "three", "", " ", "+2", "0x3", "1e3",
                                  "9999999999999999999"])
def test_max_restarts_refused_naming_the_accepted_forms(text: str) -> None:
    with pytest.raises(FormatError, match=r"--max-restarts .*a whole number of restarts, 0 or "
                                          r"more: --max-restarts 3 \(the default\), 0 \(never\)"):
        parse_max_restarts(text)


def test_the_default_is_three() -> None:
    assert DEFAULT_MAX_RESTARTS == 3


@pytest.mark.parametrize("end, restarts, max_restarts, decision", [
    # a normal end: never restarted (a failure reported meanwhile does not matter)
    (RunEnd(0), 0, 3, Decision(Action.DONE, 0)),
    (RunEnd(0, KILLED), 0, 3, Decision(Action.DONE, 0)),
    (RunEnd(0, stop_signal=TERM), 0, 3, Decision(Action.DONE, 0)),
    # worker 0 requeued the job: 75, from srun or the first task (srun says 143 then)
    (RunEnd(75), 0, 3, Decision(Action.REQUEUED, 75)),
    (RunEnd(143, EXIT75), 0, 3, Decision(Action.REQUEUED, 75)),
    (RunEnd(75, EXIT75, stop_signal=TERM), 0, 3, Decision(Action.REQUEUED, 75)),
    # the job's end: SIGTERM to supervise, a task ended by SIGTERM or after its save (143)
    (RunEnd(137, KILLED, stop_signal=TERM), 0, 3, Decision(Action.ENDING, 137)),
    (RunEnd(143, stop_signal=int(signal.SIGHUP)), 0, 3, Decision(Action.ENDING, 143)),
    (RunEnd(143, TERMINATED), 0, 3, Decision(Action.ENDING, 143)),
    (RunEnd(143, EXIT143), 0, 3, Decision(Action.ENDING, 143)),
    (RunEnd(143), 0, 3, Decision(Action.ENDING, 143)),
    # failures: restarted, numbered from 1, the status the first task's
    (RunEnd(143, KILLED), 0, 3, Decision(Action.RESTART, 137, 1)),
    (RunEnd(139, SEGV), 0, 3, Decision(Action.RESTART, 139, 1)),
    (RunEnd(135, BUS), 1, 3, Decision(Action.RESTART, 135, 2)),
    (RunEnd(143, EXIT3), 2, 3, Decision(Action.RESTART, 3, 3)),
    (RunEnd(1), 0, 3, Decision(Action.RESTART, 1, 1)),
    (RunEnd(137), 0, 3, Decision(Action.RESTART, 137, 1)),
    (RunEnd(74), 0, 3, Decision(Action.RESTART, 74, 1)),
    (RunEnd(76), 0, 3, Decision(Action.RESTART, 76, 1)),
    (RunEnd(142), 0, 3, Decision(Action.RESTART, 142, 1)),
    (RunEnd(144), 0, 3, Decision(Action.RESTART, 144, 1)),
    (RunEnd(5, UNKNOWN), 0, 3, Decision(Action.RESTART, 5, 1)),  # words without a status
    # the limits: exactly max_restarts restarts, then used up
    (RunEnd(143, EXIT3), 3, 3, Decision(Action.USED_UP, 3)),
    (RunEnd(143, KILLED), 0, 0, Decision(Action.USED_UP, 137)),
    (RunEnd(143, KILLED), 0, 1, Decision(Action.RESTART, 137, 1)),
    (RunEnd(143, KILLED), 1, 1, Decision(Action.USED_UP, 137)),
    (RunEnd(3), 4, 3, Decision(Action.USED_UP, 3)),
])
def test_decide(end: RunEnd, restarts: int, max_restarts: int, decision: Decision) -> None:
    assert decide(end, restarts, max_restarts) == decision


@pytest.mark.parametrize("max_restarts", [0, 1, 2, 3])
def test_exactly_max_restarts_then_stop(max_restarts: int) -> None:
    actions = []
    restarts = 0
    while True:
        decision = decide(RunEnd(3, EXIT3), restarts, max_restarts)
        actions.append(decision.action)
        if decision.action is not Action.RESTART:
            break
        assert decision.restart == restarts + 1
        restarts = decision.restart
    assert actions == [Action.RESTART] * max_restarts + [Action.USED_UP]


@pytest.mark.parametrize("failed, spare, out", [
    ([], 1, []),
    (["node2"], 1, []),  # once: kept
    (["node2", "node2"], 1, ["node2"]),  # twice: left out
    (["node2", "node1", "node2"], 1, ["node2"]),
    (["node2", "node2", "node2"], 1, ["node2"]),  # once left out, it stays one entry
    (["node2", "node2"], 0, []),  # no spare node
    (["node2", "node2"], -1, []),
    (["node2", "node2", "node1", "node1"], 1, ["node2"]),  # the first to fail twice
    (["node1", "node2", "node2", "node1"], 2, ["node2", "node1"]),
    (["node1", "node2", "node2", "node1"], 5, ["node2", "node1"]),
    ([None, None], 1, []),  # no node named
    ([None, "node1", None, "node1"], 1, ["node1"]),
])
def test_left_out(failed: Sequence[Optional[str]], spare: int, out: List[str]) -> None:
    assert left_out(failed, spare) == out


@pytest.mark.parametrize("end, decision, max_restarts, restarts, line", [
    (RunEnd(0), Decision(Action.DONE, 0), 3, 0, None),
    (RunEnd(0), Decision(Action.DONE, 0), 3, 1, "the step completed after 1 restart"),
    (RunEnd(0), Decision(Action.DONE, 0), 3, 2, "the step completed after 2 restarts"),
    (RunEnd(143, KILLED, seconds=12.34), Decision(Action.RESTART, 137, 1), 3, 0,
     "task 1 on node2: Killed (signal 9), 12.3 s into the run; restart 1 of 3"),
    (RunEnd(143, KILLED), Decision(Action.USED_UP, 137), 0, 0,
     "task 1 on node2: Killed (signal 9), 0.0 s into the run; its 0 restarts are used up "
     "(--max-restarts 0): exit 137"),
    (RunEnd(3, seconds=0.04), Decision(Action.RESTART, 3, 2), 2, 1,
     "srun exited 3, 0.0 s into the run; restart 2 of 2"),
    (RunEnd(143, EXIT3, seconds=1.0), Decision(Action.USED_UP, 3), 2, 2,
     "task 0 on node1: Exited with exit code 3, 1.0 s into the run; its 2 restarts are "
     "used up (--max-restarts 2): exit 3"),
    (RunEnd(137, KILLED, seconds=1.0), Decision(Action.USED_UP, 137), 1, 1,
     "task 1 on node2: Killed (signal 9), 1.0 s into the run; its 1 restart is used up "
     "(--max-restarts 1): exit 137"),
    (RunEnd(143, EXIT75), Decision(Action.REQUEUED, 75), 3, 0,
     "task 1 on node2: Exited with exit code 75: the checkpoint is saved and the job is to "
     "run again (not restarted here)"),
    (RunEnd(75), Decision(Action.REQUEUED, 75), 3, 0,
     "srun exited 75: the checkpoint is saved and the job is to run again (not restarted "
     "here)"),
    (RunEnd(143, KILLED, stop_signal=TERM), Decision(Action.ENDING, 137), 3, 0,
     "the job is ending (SIGTERM came to supervise): not restarted: exit 137"),
    (RunEnd(143, EXIT143), Decision(Action.ENDING, 143), 3, 0,
     "the job is ending (task 0 on node1: Exited with exit code 143): not restarted: exit 143"),
    (RunEnd(143), Decision(Action.ENDING, 143), 3, 0,
     "the job is ending (srun exited 143): not restarted: exit 143"),
])
def test_say(end: RunEnd, decision: Decision, max_restarts: int, restarts: int,
             line: Optional[str]) -> None:
    assert say(decision, end, max_restarts, "srun", restarts) == line


@pytest.mark.parametrize("stop_signal, ending, refusal", [
    (None, None, None),  # the warning signal's save: the job runs on
    (None, "ending", None),  # not asked without SIGTERM
    (TERM, "time limit", None),
    (TERM, "running", None),  # SIGTERM as a signal alone (scancel --batch --signal=TERM)
    (TERM, "ending", "Slurm ends the job (scancel, or Slurm's requeue or preemption, which "
                     "requeues it itself)"),
    (TERM, None, "scontrol could not say why SIGTERM came"),
    (signal.SIGHUP, "time limit", "SIGHUP came to supervise"),
    (signal.SIGINT, None, "SIGINT came to supervise"),
])
def test_requeue_refusal(stop_signal, ending, refusal):
    assert requeue_refusal(stop_signal, ending) == refusal
