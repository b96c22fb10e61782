"""One run of a supervised step judged (pure): its end classified (causes), its progress,
the policy's row and the rules beyond one run (policy), the one line supervise says, and the
ledger's record of it. ``mpi-resolver supervise`` (cli/supervise) gathers the inputs and acts.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Mapping, Optional, Sequence

from mpi_resolver.long_jobs.causes import Cause, Ending, RunEnd, classify
from mpi_resolver.long_jobs.ledger import RunEnded, cut, stalled_before
from mpi_resolver.long_jobs.manifest import completed_for, ours
from mpi_resolver.long_jobs.policy import (Action, Came, Decision, Progress, guard,
                                           progress_of, requeue_refusal, row_for)

__all__ = ["Job", "Checkpoints", "Verdict", "judge", "BLAMED", "checkpoints_of", "settled"]

#: The causes that blame the task's node (a node that fails so twice is left out): not the
#: job's own errors (usage, out of memory, its saves), nor Slurm's signals.
BLAMED = frozenset({Cause.HANG, Cause.SIGNALED, Cause.FAILED})


@dataclass(frozen=True)
class Job:
    """What supervise knows of the job: its id (None outside Slurm), the step's program (for
    the lines), --max-restarts, the warning signal's number and name, the job's settings
    (requeue, requeue_on_time_limit: from its manifest as a run leaves it, ``settled``, else
    the defaults), and whether the checkpoints can be seen (a checkpoint directory is
    known)."""

    job: Optional[str]
    program: str
    max_restarts: int
    warning: int
    warning_name: str = "USR1"
    requeue: bool = True
    requeue_on_time_limit: bool = False
    checkpoints_seen: bool = True


@dataclass(frozen=True)
class Checkpoints:
    """The job's checkpoints as its manifest shows them: the newest step (None: none),
    whether its training completed, and whether they can be seen (False: the manifest is
    there but cannot be read)."""

    step: Optional[int] = None
    completed: bool = False
    seen: bool = True


def checkpoints_of(manifest: Optional[Mapping[str, Any]], job: Optional[str], *,
                   readable: bool) -> Checkpoints:
    """Returns the checkpoints of ``job`` (None outside Slurm: never completed) as
    ``manifest`` shows them (None: there is none; at step 0: the directory claimed at a run's
    start, before any save, so no checkpoint), or as not seen where it is there but not
    ``readable``."""
    if not readable:
        return Checkpoints(seen=False)
    if manifest is None:
        return Checkpoints()
    step = manifest.get("step")
    return Checkpoints(step if isinstance(step, int) and step > 0 else None,
                       completed_for(manifest, job))


def settled(job: Job, manifest: Optional[Mapping[str, Any]]) -> Job:
    """Returns ``job`` with the settings (requeue, requeue_on_time_limit) that ``manifest``
    holds now where it is this job's (its tasks write it during the run), else the
    defaults."""
    settings = manifest.get("settings") if manifest and ours(manifest, job.job) else None
    if not isinstance(settings, Mapping):
        settings = {}
    return replace(job, requeue=bool(settings.get("requeue", True)),
                   requeue_on_time_limit=bool(settings.get("requeue_on_time_limit")))


@dataclass(frozen=True)
class Verdict:
    """The decision on a run, the line said of it, and the ledger's record."""

    decision: Decision
    ending: Ending
    progress: Progress
    line: Optional[str]
    record: RunEnded


def judge(job: Job, run: int, end: RunEnd, came: Came, before: Checkpoints,
          after: Checkpoints, history: Sequence[RunEnded], restarts: int) -> Verdict:
    """Returns the verdict on run ``run`` of ``job`` that ended as ``end`` while ``came``
    came to supervise, the checkpoints ``before`` and ``after`` it, the job's earlier runs
    (``history``, oldest first) and the ``restarts`` done in this allocation so far."""
    ending = classify(end, job.warning)
    progress = progress_of(before.step, after.step,
                           seen=job.checkpoints_seen and before.seen and after.seen,
                           completed=after.completed)
    row = row_for(came, ending.cause, progress)
    refusal = requeue_refusal(came, ending.cause, in_slurm_job=job.job is not None,
                              requeue=job.requeue, on_time_limit=job.requeue_on_time_limit)
    previous = stalled_before(list(history), cut_now=cut(came.value, ending.cause.value))
    decision = guard(row, ending.status, stalled_before=previous is not None,
                     progress=progress, restarts=restarts, max_restarts=job.max_restarts,
                     refusal=refusal)
    record = RunEnded(job.job, run, ending.cause.value, ending.what(job.program),
                      ending.node, ending.cause in BLAMED, decision.status, before.step,
                      after.step, progress.value, decision.action.value, round(end.seconds, 3),
                      came=came.value, warning=job.warning_name)
    line = _line(job, run, end, came, ending, progress, decision, restarts, previous, after)
    return Verdict(decision, ending, progress, line, record)


def _line(job: Job, run: int, end: RunEnd, came: Came, ending: Ending, progress: Progress,
          decision: Decision, restarts: int, previous: Optional[RunEnded],
          after: Checkpoints) -> Optional[str]:
    """Returns the one line said of the run (None for a first run that completed)."""
    if ending.cause is Cause.COMPLETED and came is Came.NOTHING:
        return (f"the step completed after {restarts} restart{'s' * (restarts != 1)}"
                if restarts else None)
    parts = [] if came is Came.NOTHING else [f"{came.value} came to supervise"]
    if ending.cause is Cause.NOT_STARTED:
        parts.append(f"run {run} is not started")
    else:
        parts.append(f"run {run}: {ending.what(job.program)}, {end.seconds:.1f} s into the run")
    head = "; ".join(parts)
    said = _progress(progress, after)
    return f"{head}{'; ' + said if said else ''}: {_outcome(job, decision, restarts, previous)}"


def _progress(progress: Progress, after: Checkpoints) -> str:
    """Returns what the run did to the newest checkpoint, in words ('' where unknown)."""
    if progress is Progress.COMPLETE:
        return f"its training completed at step {after.step}"
    if progress is Progress.ADVANCED:
        return f"the newest checkpoint advanced to step {after.step}"
    if progress is Progress.STALLED:
        return ("no checkpoint yet" if after.step is None else
                f"the newest checkpoint is still step {after.step}")
    return ""


def _outcome(job: Job, decision: Decision, restarts: int,
             previous: Optional[RunEnded]) -> str:
    """Returns what follows, in words: the restart's number, the requeue's reason (the
    edge says scontrol's answer after it), or why the job ends and its exit status."""
    if decision.action is Action.RESTART:
        return f"restart {restarts + 1} of {job.max_restarts}"
    if decision.action is Action.REQUEUE:
        return decision.why
    why = decision.why
    if previous is not None:  # the run before this one made no progress either: name it
        why = why.replace("no progress in the last two runs",
                          f"no progress in the last two runs (run {previous.run}: "
                          f"{previous.what})")
    return f"{why}: exit {decision.status}"
