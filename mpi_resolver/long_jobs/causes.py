"""How one run of a step ended, as one cause (pure): read from the launcher's report
(step_report: the first task that failed, an out-of-memory event, the watchdog's lines) and the
exit statuses, with the task and node it is blamed on.

A run's first reported task end is its cause; srun with ``--kill-on-bad-exit=1`` then exits
143 whatever that task did, so the command's own status counts only where no task is named.
"""

from __future__ import annotations

import enum
import signal
from dataclasses import dataclass, field
from typing import Optional

from mpi_resolver.long_jobs import exits
from mpi_resolver.long_jobs.step_report import StepReport, TaskEnd

__all__ = ["Cause", "RunEnd", "Ending", "classify"]


class Cause(enum.Enum):
    """The class of a run's end, each with the words a line says of it."""

    COMPLETED = "completed"
    NOT_STARTED = "not started"
    SAVED_RUN_AGAIN = "saved, to run again"
    TERMINATED = "ended by SIGTERM"
    SAVE_FAILED = "the save failed"
    USAGE = "a usage or configuration error"
    HANG = "a hang"
    OUT_OF_MEMORY = "out of memory"
    WARNED = "killed by the warning signal"
    SIGNALED = "killed by a signal"
    FAILED = "a non-zero exit"


@dataclass(frozen=True)
class RunEnd:
    """What one run of the step left: the command's exit status (128 + N for signal N; None
    where no run started), the launcher's report, and the run's seconds."""

    status: Optional[int]
    report: StepReport = field(default_factory=StepReport)
    seconds: float = 0.0


@dataclass(frozen=True)
class Ending:
    """A run's end read into its cause, the status it stands for, and the task it is
    blamed on (None where none is named), in the launcher's words."""

    cause: Cause
    status: int
    task: Optional[TaskEnd] = None

    @property
    def node(self) -> Optional[str]:
        """Returns the blamed task's node, None where none is known."""
        return self.task.node or None if self.task is not None else None

    def what(self, program: str) -> str:
        """Returns how the run ended, in one phrase: the task's words ('task 1 on node2:
        Killed (signal 9)'), else the command's status ('srun exited 3')."""
        if self.cause is Cause.NOT_STARTED:
            return "no run started"
        if self.task is not None:
            return self.task.text()
        number = exits.killed_by(self.status)
        named = f" (128 + {signal.Signals(number).name})" if number in _NAMED else ""
        return f"{program} exited {self.status}{named}"


_NAMED = {int(s) for s in signal.Signals}


def classify(end: RunEnd, warning: int) -> Ending:
    """Returns ``end``'s cause (``warning``: the warning signal's number, whose kill is the
    job's end coming, not a crash)."""
    if end.status is None:
        return Ending(Cause.NOT_STARTED, exits.REQUEUE)
    if end.status == 0:
        return Ending(Cause.COMPLETED, 0)
    report = end.report
    if report.hung or _status(report.first, end.status) == exits.HUNG:
        task = report.stuck()
        return Ending(Cause.HANG, _status(task, exits.HUNG), task)
    oom = report.out_of_memory
    if oom is not None or report.oom_event:
        return Ending(Cause.OUT_OF_MEMORY, _status(oom or report.first, end.status),
                      oom or report.first)
    status = _status(report.first, end.status)
    return Ending(_by_status(status, warning), status, report.culprit())


def _status(task: Optional[TaskEnd], command: int) -> int:
    """Returns the status a run stands for: its first failed task's, else the command's."""
    own = task.status if task is not None else None
    return command if own is None else own


def _by_status(status: int, warning: int) -> Cause:
    """Returns the cause a run's status says, where no report line said more."""
    if status == exits.REQUEUE:
        return Cause.SAVED_RUN_AGAIN
    if status == exits.SAVE_FAILED:
        return Cause.SAVE_FAILED
    if status == exits.TERMINATED:
        return Cause.TERMINATED
    if exits.killed_by(status) == warning:
        return Cause.WARNED
    if exits.fails_again(status):
        return Cause.USAGE
    return Cause.SIGNALED if exits.killed_by(status) else Cause.FAILED
