"""``mpi-resolver supervise``'s restart policy (pure data and rules): which end of a step is
restarted in the same allocation, which never is, how many times, and which node is left out
of the next run; and the one line said about each.

A run ends one of five ways (``Action``): a normal end (exit 0); the checkpoint saved and the
job to run again (exit 75, REQUEUED: supervise requeues the job where ``requeue_refusal``
allows, and the next run is Slurm's, after the queue); the job's own end (SIGTERM
from Slurm at the time limit, scancel or requeue, to supervise or to a task: ENDING); a
failure that is restarted; a failure after every restart is used up (USED_UP).
"""

from __future__ import annotations

import enum
import signal
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence

from mpi_resolver.core.errors import FormatError
from mpi_resolver.core.values import whole_number
from mpi_resolver.long_jobs.requeue import ENDING, RUNNING, TIME_LIMIT
from mpi_resolver.long_jobs.step_report import TaskEnd

__all__ = ["Action", "RunEnd", "Decision", "decide", "parse_max_restarts", "left_out",
           "DEFAULT_MAX_RESTARTS", "REQUEUED_EXIT", "FAILURES_TO_LEAVE_OUT", "STOP_TIMEOUT",
           "SUPERVISED_ENV", "requeue_refusal"]

#: Set to "1" by supervise in its step's environment: the tasks then leave the requeue to
#: supervise (exit 75: run again; 143: stop) and run no scontrol themselves.
SUPERVISED_ENV = "MPI_RESOLVER_SUPERVISED"
#: Restarts in the same allocation before supervise gives up (--max-restarts).
DEFAULT_MAX_RESTARTS = 3
#: The tasks' exit status after a save where the job is to run again (termination).
REQUEUED_EXIT = 75
#: A task's exit status after Slurm's SIGTERM: 128 + 15, by the signal or by the tasks' own
#: exit after their save (termination's 143).
SIGTERM_EXIT = 128 + int(signal.SIGTERM)
#: Failures of one node after which the next run leaves it out, where the job has spares.
FAILURES_TO_LEAVE_OUT = 2
#: Seconds supervise waits for the step after passing SIGTERM on, before it kills it: Slurm
#: kills everything after KillWait (30 s by default) itself; this bounds a step without Slurm.
STOP_TIMEOUT = 120.0
_FORMS = "a whole number of restarts, 0 or more: --max-restarts 3 (the default), 0 (never)"


class Action(enum.Enum):
    """What supervise does after a run: only RESTART runs the step again."""

    DONE = "done"
    REQUEUED = "requeued"
    ENDING = "ending"
    RESTART = "restart"
    USED_UP = "used up"


@dataclass(frozen=True)
class RunEnd:
    """How one run of the step ended: the command's exit status (128 + N for signal N), the
    first task end its launcher reported (None where none), the signal that told supervise to
    stop (None where none came), and the run's seconds."""

    status: int
    failure: Optional[TaskEnd] = None
    stop_signal: Optional[int] = None
    seconds: float = 0.0

    @property
    def cause(self) -> int:
        """Returns the status the run stands for: the first failed task's (srun with
        --kill-on-bad-exit exits 143 whatever the first task did) where the launcher named
        one, else the command's own."""
        own = self.failure.status if self.failure is not None else None
        return self.status if own is None else own


@dataclass(frozen=True)
class Decision:
    """What to do, the exit status where supervise stops (the run's cause), and the number of
    this restart (0 where none)."""

    action: Action
    status: int
    restart: int = 0


def parse_max_restarts(text: str) -> int:
    """Returns ``--max-restarts``' value as an int >= 0.

    Raises:
      FormatError: not a whole number (a negative one, a fraction, a word), naming the
        accepted forms.
    """
    number = whole_number(text)
    if number is None:
        raise FormatError(f"--max-restarts {text!r}: expected {_FORMS}.")
    return number


def decide(end: RunEnd, restarts: int, max_restarts: int) -> Decision:
    """Returns what follows ``end`` after ``restarts`` restarts (of at most ``max_restarts``):
    exit 0, 75, a stop signal or SIGTERM's 143 are never restarted; any other failure is,
    until ``max_restarts`` are used up. The status is 0 for DONE, else the run's cause."""
    cause = end.cause
    if end.status == 0:
        return Decision(Action.DONE, 0)
    if cause == REQUEUED_EXIT:
        return Decision(Action.REQUEUED, cause)
    if end.stop_signal is not None or cause == SIGTERM_EXIT:
        return Decision(Action.ENDING, cause)
    if restarts >= max_restarts:
        return Decision(Action.USED_UP, cause)
    return Decision(Action.RESTART, cause, restarts + 1)


def requeue_refusal(stop_signal: Optional[int], ending: Optional[str]) -> Optional[str]:
    """Returns None where supervise requeues the job after the step's exit 75, else why not.
    ``stop_signal``: the signal that came to supervise (None: the warning signal's save, the
    job runs on); ``ending``: scontrol's word after SIGTERM (requeue.job_ending): the time
    limit, or a job that runs on, is requeued; an end by scancel, Slurm's requeue or
    preemption is not, nor one scontrol cannot explain."""
    if stop_signal is None or (stop_signal == signal.SIGTERM and ending in (TIME_LIMIT,
                                                                             RUNNING)):
        return None
    if stop_signal != signal.SIGTERM:
        return f"{signal.Signals(stop_signal).name} came to supervise"
    if ending == ENDING:
        return ("Slurm ends the job (scancel, or Slurm's requeue or preemption, which requeues "
                "it itself)")
    return "scontrol could not say why SIGTERM came"


def left_out(failed: Sequence[Optional[str]], spare: int) -> List[str]:
    """Returns the nodes to leave out of the next run: those among ``failed`` (each failed
    run's node, oldest first; None where no node was named) that failed
    FAILURES_TO_LEAVE_OUT times or more, first to get there first, at most ``spare`` of them
    (the job's nodes the step does not need)."""
    counts: Dict[str, int] = {}
    out: List[str] = []
    for node in failed:
        if node is None:
            continue
        counts[node] = counts.get(node, 0) + 1
        if counts[node] == FAILURES_TO_LEAVE_OUT:
            out.append(node)
    return out[:max(spare, 0)]


def _what(end: RunEnd, program: str) -> str:
    """Returns how the run ended: the first failed task's words, or the command's status."""
    if end.failure is not None:
        return end.failure.text()
    return f"{program} exited {end.status}"


def _restarts(count: int) -> str:
    return f"{count} restart{'' if count == 1 else 's'}"


def _ending(end: RunEnd, program: str) -> str:
    if end.stop_signal is not None:
        return f"{signal.Signals(end.stop_signal).name} came to supervise"
    return _what(end, program)


def say(decision: Decision, end: RunEnd, max_restarts: int, program: str,
        restarts: int) -> Optional[str]:
    """Returns supervise's one line about ``decision`` (None for a first run's normal end):
    the task, its node, how it ended, the run's seconds, and which restart follows or why
    none does. ``restarts``: those done before this run."""
    action, status = decision.action, decision.status
    after = f", {end.seconds:.1f} s into the run"
    if action is Action.DONE:
        return f"the step completed after {_restarts(restarts)}" if restarts else None
    if action is Action.REQUEUED:
        return (f"{_what(end, program)}: the checkpoint is saved and the job is to run again "
                "(not restarted here)")
    if action is Action.ENDING:
        return f"the job is ending ({_ending(end, program)}): not restarted: exit {status}"
    if action is Action.USED_UP:
        verb = "is" if max_restarts == 1 else "are"
        return (f"{_what(end, program)}{after}; its {_restarts(max_restarts)} {verb} used up "
                f"(--max-restarts {max_restarts}): exit {status}")
    return f"{_what(end, program)}{after}; restart {decision.restart} of {max_restarts}"
