"""supervise's restart policy: the table, row by row (each row taken by the inputs of its
own cases, and no earlier row taking them), every input combination decided, and the rules
beyond one run (no progress twice, the restarts used up, a requeue the job does not want),
each side of its limit."""

from __future__ import annotations

import itertools
import signal
from typing import Optional, Tuple

import pytest

from mpi_resolver.long_jobs.causes import Cause
from mpi_resolver.long_jobs.policy import (ROWS, Action, Came, Decision, Progress, came_of,
                                           guard, in_words, progress_of, requeue_refusal,
                                           row_for)
from mpi_resolver.long_jobs.requeue import ENDING, RUNNING, TIME_LIMIT

pytestmark = pytest.mark.unit

N, W, T, E, H = Came.NOTHING, Came.WARNING, Came.TIME_LIMIT, Came.JOB_ENDS, Came.HANGUP
ADV, STALL, UNK, DONE = Progress.ADVANCED, Progress.STALLED, Progress.UNKNOWN, Progress.COMPLETE
RESTART, REQUEUE, END = Action.RESTART, Action.REQUEUE, Action.END
OWN = None  # the run's own status

#: (came, cause, progress) -> (the row's index, its action, its status): each row's cases.
CASES = [
    # 0: the step completed: nothing else matters
    (N, Cause.COMPLETED, STALL, 0, END, 0),
    (E, Cause.COMPLETED, ADV, 0, END, 0),
    (H, Cause.COMPLETED, UNK, 0, END, 0),
    # 1: the job's training had completed: a failure after it is not retrained
    (N, Cause.SIGNALED, DONE, 1, END, 0),
    (N, Cause.OUT_OF_MEMORY, DONE, 1, END, 0),
    (W, Cause.WARNED, DONE, 1, END, 0),
    (E, Cause.TERMINATED, DONE, 1, END, 0),
    # 2: a usage or configuration error: never restarted, never requeued, whatever came
    (N, Cause.USAGE, STALL, 2, END, OWN),
    (W, Cause.USAGE, ADV, 2, END, OWN),
    (T, Cause.USAGE, UNK, 2, END, OWN),
    # 3: SIGHUP or SIGINT to supervise
    (H, Cause.SIGNALED, ADV, 3, END, OWN),
    (H, Cause.SAVED_RUN_AGAIN, ADV, 3, END, OWN),
    # 4: Slurm ends the job
    (E, Cause.SAVED_RUN_AGAIN, ADV, 4, END, 143),
    (E, Cause.SIGNALED, STALL, 4, END, 143),
    (E, Cause.NOT_STARTED, STALL, 4, END, 143),
    # 5: a save that failed without progress: never requeued for ever
    (N, Cause.SAVE_FAILED, STALL, 5, END, 74),
    (W, Cause.SAVE_FAILED, UNK, 5, END, 74),
    (T, Cause.SAVE_FAILED, STALL, 5, END, 74),
    # 6: SIGTERM reached the tasks alone
    (N, Cause.TERMINATED, ADV, 6, END, 143),
    (N, Cause.TERMINATED, STALL, 6, END, 143),
    # 7: the job's time is ending: requeued, whatever the run did
    (W, Cause.SAVED_RUN_AGAIN, ADV, 7, REQUEUE, 75),
    (W, Cause.SIGNALED, STALL, 7, REQUEUE, 75),
    (W, Cause.NOT_STARTED, STALL, 7, REQUEUE, 75),
    (W, Cause.TERMINATED, ADV, 7, REQUEUE, 75),
    (T, Cause.TERMINATED, ADV, 7, REQUEUE, 75),
    (T, Cause.NOT_STARTED, STALL, 7, REQUEUE, 75),
    (W, Cause.SAVE_FAILED, ADV, 7, REQUEUE, 75),
    # 8: the tasks had the warning signal themselves
    (N, Cause.SAVED_RUN_AGAIN, ADV, 8, REQUEUE, 75),
    (N, Cause.SAVED_RUN_AGAIN, STALL, 8, REQUEUE, 75),
    (N, Cause.SAVE_FAILED, ADV, 8, REQUEUE, 75),
    (N, Cause.WARNED, STALL, 8, REQUEUE, 75),
    # 9: a failure: restarted in the allocation
    (N, Cause.SIGNALED, ADV, 9, RESTART, OWN),
    (N, Cause.HANG, STALL, 9, RESTART, OWN),
    (N, Cause.OUT_OF_MEMORY, ADV, 9, RESTART, OWN),
    (N, Cause.FAILED, UNK, 9, RESTART, OWN),
]


@pytest.mark.parametrize("came, cause, progress, index, action, status", CASES,
                         ids=[f"row{c[3]}-{c[0].name}-{c[1].name}-{c[2].name}" for c in CASES])
def test_each_row(came: Came, cause: Cause, progress: Progress, index: int, action: Action,
                  status: Optional[int]) -> None:
    row = row_for(came, cause, progress)
    assert ROWS.index(row) == index
    assert (row.action, row.status) == (action, status if action is not REQUEUE else None)
    decided = guard(row, 137, stalled_before=False, progress=progress, restarts=0,
                    max_restarts=3, refusal=None)
    assert decided.action is action
    assert decided.status == (137 if status is OWN else status)


def test_every_row_has_its_cases() -> None:
    assert sorted({c[3] for c in CASES}) == list(range(len(ROWS)))


def test_every_combination_is_decided() -> None:
    """The table is total: whatever came, however the run ended, whatever its progress."""
    for came, cause, progress in itertools.product(Came, Cause, Progress):
        assert row_for(came, cause, progress) in ROWS


def test_the_table_never_restarts_when_something_came() -> None:
    for came, cause, progress in itertools.product(Came, Cause, Progress):
        if came is not N:
            assert row_for(came, cause, progress).action is not RESTART


def test_the_table_never_restarts_or_requeues_what_fails_again() -> None:
    for came, progress in itertools.product(Came, Progress):
        assert row_for(came, Cause.USAGE, progress).action is END


def test_in_words() -> None:
    assert in_words(ROWS[0]) == ("any", "completed", "any", "end, exit 0", "the step completed")
    assert in_words(ROWS[7])[:4] == ("the warning signal or SIGTERM at the time limit", "any",
                                     "any", "requeue, exit 75")
    assert in_words(ROWS[2])[3] == "end, exit the run's own"
    assert in_words(ROWS[9])[3] == "restart" and in_words(ROWS[8])[3] == "requeue, exit 75"
    assert in_words(ROWS[5])[2] == "stalled or unknown"


RESTART_ROW, REQUEUE_ROW, END_ROW = ROWS[9], ROWS[8], ROWS[2]


@pytest.mark.parametrize("row, stalled_before, progress, restarts, max_restarts, refusal, "
                         "decision", [
    # the table's own action where no rule beyond the run says more
    (RESTART_ROW, False, STALL, 0, 3, None, Decision(RESTART, 137, RESTART_ROW.why)),
    (REQUEUE_ROW, False, ADV, 0, 3, None, Decision(REQUEUE, 75, REQUEUE_ROW.why)),
    (END_ROW, True, STALL, 9, 0, (1, "x"), Decision(END, 137, END_ROW.why)),  # END stays END
    # no progress in two runs in a row: stopped, whatever --max-restarts says
    (RESTART_ROW, True, STALL, 0, 99, None,
     Decision(END, 79, "no progress in the last two runs: the job stops, not requeued")),
    (REQUEUE_ROW, True, STALL, 0, 3, None,
     Decision(END, 79, "no progress in the last two runs: the job stops, not requeued")),
    (RESTART_ROW, True, ADV, 0, 3, None, Decision(RESTART, 137, RESTART_ROW.why)),  # it moved
    (RESTART_ROW, True, UNK, 0, 3, None, Decision(RESTART, 137, RESTART_ROW.why)),  # unseen
    (RESTART_ROW, False, STALL, 0, 3, None, Decision(RESTART, 137, RESTART_ROW.why)),  # once
    # the restarts: exactly max_restarts of them
    (RESTART_ROW, False, ADV, 2, 3, None, Decision(RESTART, 137, RESTART_ROW.why)),
    (RESTART_ROW, False, ADV, 3, 3, None,
     Decision(END, 137, "the restarts are used up (--max-restarts 3)")),
    (RESTART_ROW, False, ADV, 0, 0, None,
     Decision(END, 137, "the restarts are used up (--max-restarts 0)")),
    # a requeue the job does not want
    (REQUEUE_ROW, False, ADV, 0, 3, (143, "why"),
     Decision(END, 143, f"{REQUEUE_ROW.why}; not requeued: why")),
    (REQUEUE_ROW, False, ADV, 0, 3, (None, "why"),
     Decision(END, 137, f"{REQUEUE_ROW.why}; not requeued: why")),
    (REQUEUE_ROW, False, ADV, 5, 3, None, Decision(REQUEUE, 75, REQUEUE_ROW.why)),  # not counted
])
def test_guard(row, stalled_before: bool, progress: Progress, restarts: int,
               max_restarts: int, refusal, decision: Decision) -> None:
    assert guard(row, 137, stalled_before=stalled_before, progress=progress,
                 restarts=restarts, max_restarts=max_restarts, refusal=refusal) == decision


@pytest.mark.parametrize("came, cause, in_slurm, requeue, on_time_limit, refusal", [
    (N, Cause.SAVED_RUN_AGAIN, True, True, False, None),
    (W, Cause.SIGNALED, True, True, False, None),
    (N, Cause.SAVED_RUN_AGAIN, False, True, False,
     (75, "not in a Slurm job (SLURM_JOB_ID unset): there is no job to requeue")),
    (W, Cause.WARNED, False, True, True,
     (None, "not in a Slurm job (SLURM_JOB_ID unset): there is no job to requeue")),
    (N, Cause.SAVED_RUN_AGAIN, True, False, True, (75, "the job's settings say requeue=False")),
    (W, Cause.SIGNALED, True, False, False, (None, "the job's settings say requeue=False")),
    # the time limit: the job must ask for it, or its tasks' own 75 after their save
    (T, Cause.TERMINATED, True, True, False,
     (143, "the time limit ends the job (requeue_on_time_limit=False)")),
    (T, Cause.NOT_STARTED, True, True, True, None),
    (T, Cause.SAVED_RUN_AGAIN, True, True, False, None),
    (T, Cause.SAVED_RUN_AGAIN, True, False, False, None),  # requeue=False is the warning's
])
def test_requeue_refusal(came: Came, cause: Cause, in_slurm: bool, requeue: bool,
                         on_time_limit: bool, refusal: Optional[Tuple]) -> None:
    assert requeue_refusal(came, cause, in_slurm_job=in_slurm, requeue=requeue,
                           on_time_limit=on_time_limit) == refusal


TERM, HUP, INT, USR1, USR2 = (int(s) for s in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT,
                                               signal.SIGUSR1, signal.SIGUSR2))


@pytest.mark.parametrize("signals, warning, ending, came", [
    (set(), USR1, None, N),
    ({USR2}, USR1, None, N),  # not the warning signal
    ({USR1}, USR1, None, W),
    ({USR2}, USR2, None, W),
    ({TERM}, USR1, TIME_LIMIT, T),
    ({TERM, USR1}, USR1, TIME_LIMIT, T),  # the time limit after the warning
    ({TERM}, USR1, ENDING, E),
    ({TERM, USR1}, USR1, ENDING, E),  # scancel after the warning
    ({TERM}, USR1, None, E),  # scontrol cannot say: the job's end
    ({TERM}, TERM, RUNNING, W),  # SIGTERM is the warning signal, and the job runs on
    ({TERM}, USR1, RUNNING, W),  # a signal alone: the job runs on
    ({HUP}, USR1, None, H),
    ({INT, TERM, USR1}, USR1, TIME_LIMIT, H),  # a hang-up wins
])
def test_came_of(signals, warning: int, ending: Optional[str], came: Came) -> None:
    assert came_of(signals, warning, ending) is came


@pytest.mark.parametrize("before, after, seen, completed, progress", [
    (None, None, True, False, STALL),
    (None, 0, True, False, ADV),  # a first checkpoint, even of step 0
    (40, 40, True, False, STALL),
    (40, 41, True, False, ADV),
    (40, 39, True, False, STALL),  # an older one (another directory's?) is no progress
    (40, None, True, False, STALL),
    (40, 80, False, False, UNK),
    (40, 80, True, True, DONE),
    (None, None, False, True, UNK),
])
def test_progress_of(before, after, seen: bool, completed: bool, progress: Progress) -> None:
    assert progress_of(before, after, seen=seen, completed=completed) is progress
