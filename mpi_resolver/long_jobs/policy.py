"""``mpi-resolver supervise``'s restart policy, as one table (pure): what came to supervise, how
the run ended (causes.Cause) and whether it made progress, in; restart in this allocation,
requeue, or end, with the exit status, out. The first row that matches decides; ``ROWS`` is
both the rule and the documentation (docs/long-jobs.md prints it, tests/unit checks each row).

Three rules follow the table, each where a count or the job's settings say more than one run
can (``guard``): two runs in a row without progress stop the job (exits.STOPPED, whatever
--max-restarts says); a restart past --max-restarts ends it; a requeue the job does not
want (requeue=False, the time limit without requeue_on_time_limit, no Slurm job) ends it.
"""

from __future__ import annotations

import enum
import signal
from dataclasses import dataclass
from typing import AbstractSet, FrozenSet, List, Optional, Tuple

from mpi_resolver.long_jobs import exits
from mpi_resolver.long_jobs.causes import Cause
from mpi_resolver.long_jobs.requeue import RUNNING, TIME_LIMIT

__all__ = ["Came", "Progress", "Action", "Row", "ROWS", "row_for", "Decision", "guard",
           "progress_of", "came_of", "requeue_refusal", "Refusal", "in_words"]


class Came(enum.Enum):
    """What came to supervise itself while the run ran (or between runs)."""

    NOTHING = "nothing"
    WARNING = "the warning signal"
    TIME_LIMIT = "SIGTERM at the time limit"
    JOB_ENDS = "SIGTERM (Slurm ends the job)"
    HANGUP = "SIGHUP or SIGINT"


class Progress(enum.Enum):
    """Whether the run moved the job on: the newest checkpoint's step advanced, did not,
    cannot be seen (no checkpoint directory), or the job's training completed."""

    ADVANCED = "advanced"
    STALLED = "stalled"
    UNKNOWN = "unknown"
    COMPLETE = "complete"


class Action(enum.Enum):
    """What supervise does next."""

    RESTART = "restart"
    REQUEUE = "requeue"
    END = "end"


_ANY: Optional[FrozenSet] = None


def _set(*members: enum.Enum) -> FrozenSet:
    return frozenset(members)


@dataclass(frozen=True)
class Row:
    """One rule: the inputs it takes (None: any), the action, the exit status where it ends
    the job (None: the run's own), and why, as the line says it."""

    came: Optional[FrozenSet[Came]]
    causes: Optional[FrozenSet[Cause]]
    progress: Optional[FrozenSet[Progress]]
    action: Action
    status: Optional[int]
    why: str

    def matches(self, came: Came, cause: Cause, progress: Progress) -> bool:
        """Returns whether this row takes these inputs."""
        return all(allowed is None or value in allowed for allowed, value in
                   ((self.came, came), (self.causes, cause), (self.progress, progress)))


_FAILURES = _set(Cause.HANG, Cause.OUT_OF_MEMORY, Cause.SIGNALED, Cause.FAILED,
                 Cause.NOT_STARTED)

#: The policy: the first row that matches decides.
ROWS: Tuple[Row, ...] = (
    Row(_ANY, _set(Cause.COMPLETED), _ANY, Action.END, 0, "the step completed"),
    Row(_ANY, _ANY, _set(Progress.COMPLETE), Action.END, 0,
        "nothing is trained again"),
    Row(_ANY, _set(Cause.USAGE), _ANY, Action.END, None,
        "a usage or configuration error fails the same way again: not restarted, not "
        "requeued"),
    Row(_set(Came.HANGUP), _ANY, _ANY, Action.END, None,
        "the job is stopped"),
    Row(_set(Came.JOB_ENDS), _ANY, _ANY, Action.END, exits.TERMINATED,
        "Slurm ends the job (scancel, or its own requeue or preemption)"),
    Row(_ANY, _set(Cause.SAVE_FAILED), _set(Progress.STALLED, Progress.UNKNOWN), Action.END,
        exits.SAVE_FAILED,
        "the save failed and no checkpoint advanced in this run: not requeued (a requeue "
        "would redo the run and fail the same save)"),
    Row(_set(Came.NOTHING), _set(Cause.TERMINATED), _ANY, Action.END, exits.TERMINATED,
        "SIGTERM reached the tasks: the job is ending"),
    Row(_set(Came.WARNING, Came.TIME_LIMIT), _ANY, _ANY, Action.REQUEUE, None,
        "the job's time is ending"),
    Row(_set(Came.NOTHING), _set(Cause.SAVED_RUN_AGAIN, Cause.SAVE_FAILED, Cause.WARNED),
        _ANY, Action.REQUEUE, None, "the tasks had the warning signal"),
    Row(_set(Came.NOTHING), _FAILURES, _ANY, Action.RESTART, None,
        "a failure: run again in this allocation"),
)


def in_words(row: Row) -> Tuple[str, str, str, str, str]:
    """Returns ``row`` as the documentation's table says it: what came, the cause, the
    progress, the action with its exit status, and why."""
    def words(allowed: Optional[FrozenSet[enum.Enum]]) -> str:
        if allowed is None:
            return "any"
        members: List[enum.Enum] = [m for m in type(next(iter(allowed))) if m in allowed]
        return " or ".join(str(m.value) for m in members)
    status = {Action.RESTART: "restart", Action.REQUEUE: f"requeue, exit {exits.REQUEUE}",
              Action.END: "end, exit " + ("the run's own" if row.status is None
                                          else str(row.status))}[row.action]
    return words(row.came), words(row.causes), words(row.progress), status, row.why


def row_for(came: Came, cause: Cause, progress: Progress) -> Row:
    """Returns the first row of ROWS that takes these inputs (every combination has one:
    the unit tests check it)."""
    return next(row for row in ROWS if row.matches(came, cause, progress))


@dataclass(frozen=True)
class Decision:
    """What supervise does, the exit status where it stops (or after a requeue: 75), and
    why, in words."""

    action: Action
    status: int
    why: str


#: Why a requeue the table asks for does not happen: the exit status (None: the run's own)
#: and the words.
Refusal = Tuple[Optional[int], str]


def guard(row: Row, status: int, *, stalled_before: bool, progress: Progress, restarts: int,
          max_restarts: int, refusal: Optional[Refusal]) -> Decision:
    """Returns the decision: ``row``'s (the run's own ``status`` where it names none), unless
    one of the rules beyond one run says more: ``progress`` STALLED after a run that also
    made none (``stalled_before``) stops a restart or a requeue (exits.STOPPED); a restart
    after ``max_restarts`` restarts ends the job with the run's status; a requeue the job
    does not want ends it as ``refusal`` says (requeue_refusal; None: wanted)."""
    own = status if row.status is None else row.status
    if row.action is Action.END:
        return Decision(Action.END, own, row.why)
    if progress is Progress.STALLED and stalled_before:
        return Decision(Action.END, exits.STOPPED,
                        "no progress in the last two runs: the job stops, not requeued")
    if row.action is Action.RESTART:
        if restarts >= max_restarts:
            return Decision(Action.END, status, f"the restarts are used up (--max-restarts "
                                                f"{max_restarts})")
        return Decision(Action.RESTART, status, row.why)
    if refusal is not None:
        return Decision(Action.END, status if refusal[0] is None else refusal[0],
                        f"{row.why}; not requeued: {refusal[1]}")
    return Decision(Action.REQUEUE, exits.REQUEUE, row.why)


def requeue_refusal(came: Came, cause: Cause, *, in_slurm_job: bool, requeue: bool,
                    on_time_limit: bool) -> Optional[Refusal]:
    """Returns why a requeue is not wanted (its status, None for the run's own, and the
    words), None where it is: outside a Slurm job there is none to requeue; after the time
    limit the job must ask for it (``on_time_limit``: requeue_on_time_limit=True, or its
    tasks' own exit 75 after the save); otherwise ``requeue`` (requeue=False: not)."""
    saved = cause is Cause.SAVED_RUN_AGAIN
    if not in_slurm_job:
        return (exits.REQUEUE if saved else None,
                "not in a Slurm job (SLURM_JOB_ID unset): there is no job to requeue")
    if came is Came.TIME_LIMIT:
        if on_time_limit or saved:
            return None
        return (exits.TERMINATED, "the time limit ends the job (requeue_on_time_limit=False)")
    if not requeue:
        return (exits.REQUEUE if saved else None, "the job's settings say requeue=False")
    return None


def came_of(signals: AbstractSet[int], warning: int, ending: Optional[str]) -> Came:
    """Returns what came to supervise from the signals it got (``signals``), the warning
    signal's number, and, where SIGTERM came, why as scontrol shows the job then
    (requeue.job_ending: TIME_LIMIT, RUNNING, ENDING; None where it cannot tell). A hang-up
    or interrupt stops the job whatever else came; SIGTERM says more than the warning."""
    if signals & {int(signal.SIGHUP), int(signal.SIGINT)}:
        return Came.HANGUP
    if int(signal.SIGTERM) in signals:
        if ending == TIME_LIMIT:
            return Came.TIME_LIMIT
        return Came.WARNING if ending == RUNNING else Came.JOB_ENDS
    return Came.WARNING if warning in signals else Came.NOTHING


def progress_of(before: Optional[int], after: Optional[int], *, seen: bool,
                completed: bool) -> Progress:
    """Returns a run's progress from the newest checkpoint's step before and after it
    (None: no checkpoint), where the checkpoints can be ``seen``; ``completed``: the job's
    training has completed (its manifest says so)."""
    if not seen:
        return Progress.UNKNOWN
    if completed:
        return Progress.COMPLETE
    if after is not None and (before is None or after > before):
        return Progress.ADVANCED
    return Progress.STALLED
