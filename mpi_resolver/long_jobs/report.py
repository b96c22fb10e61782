"""What a job went through, in figures (pure): each run's time split into starting, training,
saving, redone and stopping, the steps it trained and lost, and the job's totals: runs,
restarts, requeues, saves, steps done and lost, and the ETTR, the effective training time
ratio (the time spent training steps that were kept, saves excluded, over the job's wall
time from its first run's start to its last run's end, the waits between runs included), as
Meta's study of its research clusters defines it. ``report_text`` and the JSON of
``mpi-resolver report`` are built from these.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Dict, List, Optional, Tuple

from mpi_resolver.long_jobs.story import Run, Story, pairs, short_cause
from mpi_resolver.long_jobs.stragglers import Slow

__all__ = ["RunFigures", "Totals", "figures", "totals", "as_json", "end_line", "lost_steps"]


@dataclass(frozen=True)
class RunFigures:
    """One run's figures: its number, job and requeue count, start (epoch seconds) and
    length, the steps from and to, trained and lost (trained again by a later run), its
    saves, the seconds starting, training (kept steps), saving, redone (lost steps'),
    stopping (after its last step), how it ended (short: ``SIGKILL``; and in words), the
    node blamed, what followed (restart, requeue, end; None without supervise), and the
    slow ranks found."""

    run: int
    job: Optional[str]
    requeues: int
    start: float
    seconds: float
    steps_from: Optional[int]
    steps_to: Optional[int]
    trained: int
    lost: int
    saves: int
    failed_saves: int
    starting: float
    training: float
    saving: float
    redone: float
    stopping: float
    cause: str
    how: Optional[str]
    node: Optional[str]
    then: Optional[str]
    completed: bool
    slow_ranks: Tuple[Slow, ...] = ()


@dataclass(frozen=True)
class Totals:
    """The job's totals (seconds of wall time; ``ettr`` None where no time passed or no
    run's training was seen; ``slow_ranks``: the slow ranks named, all runs')."""

    runs: int
    restarts: int
    requeues: int
    saves: int
    failed_saves: int
    steps_done: Optional[int]
    steps_trained: int
    steps_lost: int
    completed: bool
    wall: float
    starting: float
    training: float
    saving: float
    redone: float
    stopping: float
    waiting: float
    ettr: Optional[float]
    slow_ranks: int = 0


def lost_steps(run: Run, after: Optional[Run]) -> int:
    """Returns the steps of ``run`` that the run ``after`` it trained again."""
    if after is None or after.resumed is None or run.reached is None:
        return 0
    return min(max(run.reached - after.resumed, 0), run.trained)


def _figures(number: int, run: Run, after: Optional[Run]) -> RunFigures:
    length = run.until - run.start  # never negative: a run's records come after its start
    starting = length if run.trained_from is None else max(run.trained_from - run.start, 0.0)
    span = 0.0
    if run.trained_from is not None and run.reached_at is not None:
        span = max(min(run.reached_at, run.until) - run.trained_from, 0.0)
    saving = sum(s.seconds for s in run.saves)
    training = max(span - saving, 0.0)
    lost = lost_steps(run, after)
    redone = training * lost / run.trained if run.trained else 0.0
    ended = run.ended
    return RunFigures(
        number, run.job, run.requeues, run.start, length, run.resumed, run.reached,
        run.trained, lost, sum(s.ok for s in run.saves), sum(not s.ok for s in run.saves),
        starting, training - redone, saving, redone,
        max(length - starting - span, 0.0), short_cause(ended),
        ended.what if ended else None, ended.node if ended and ended.blamed else None,
        None if ended is None else "requeue" if _requeued(run, after) else ended.action,
        run.completed, tuple(run.slow))


def figures(story: Story) -> List[RunFigures]:
    """Returns each run's figures, oldest first."""
    return [_figures(i + 1, run, after) for i, (run, after) in enumerate(pairs(story.runs))]


def _requeued(run: Run, after: Optional[Run]) -> bool:
    """Returns whether the job was requeued after ``run``: supervise said so, or the next
    run's requeue count is higher (Slurm requeued it: `scontrol requeue`, a preemption, a
    lost node, where supervise could only see the job end)."""
    if run.ended is not None and run.ended.action == "requeue":
        return True
    return after is not None and after.requeues > run.requeues


def totals(story: Story) -> Totals:
    """Returns the job's totals."""
    each = figures(story)
    runs = story.runs
    wall = max(runs[-1].until - runs[0].start, 0.0) if runs else 0.0
    spent = {k: sum(getattr(f, k) for f in each)
             for k in ("starting", "training", "saving", "redone", "stopping", "seconds")}
    done = next((r.reached for r in reversed(runs) if r.reached is not None), None)
    return Totals(
        len(runs), sum(f.then == "restart" for f in each),
        sum(_requeued(run, after) for run, after in pairs(runs)),
        sum(f.saves for f in each), sum(f.failed_saves for f in each), done,
        sum(f.trained for f in each), sum(f.lost for f in each),
        bool(runs) and runs[-1].completed, wall, spent["starting"], spent["training"],
        spent["saving"], spent["redone"], spent["stopping"],
        max(wall - spent["seconds"], 0.0),
        spent["training"] / wall if wall > 0 and _trained_seen(runs) else None,
        sum(len(f.slow_ranks) for f in each))


def _trained_seen(runs: List[Run]) -> bool:
    """Returns whether worker 0 told when any run's training started (else the training's
    time, and the ETTR, are not known: a step without this package's long-job code)."""
    return any(r.trained_from is not None for r in runs)


def as_json(story: Story, directory: str) -> Dict[str, Any]:
    """Returns the report as one JSON object: ``runs`` (one object a run), ``restarts``,
    ``requeues``, ``steps_done``, ``steps_lost``, ``ettr`` and the rest of Totals, the
    seconds under ``seconds``."""
    t = totals(story)
    top = asdict(t)
    del top["runs"]  # the list below says how many
    seconds = {k: round(top.pop(k), 3) for k in
               ("wall", "starting", "training", "saving", "redone", "stopping", "waiting")}
    return {"job": story.job, "directory": directory,
            "runs": [_rounded(asdict(f)) for f in figures(story)], **top, "seconds": seconds,
            "ettr": None if t.ettr is None else round(t.ettr, 4),
            "other_jobs": story.other_jobs, "records_passed_over": story.passed_over}


def _rounded(run: Dict[str, Any]) -> Dict[str, Any]:
    """Returns ``run`` with its seconds (its slow ranks' too) to the millisecond."""
    return {k: round(v, 3) if isinstance(v, float) else
            [_rounded(s) for s in v] if k == "slow_ranks" else v for k, v in run.items()}


def _causes(each: List[RunFigures], then: str) -> str:
    named = [f"{f.cause}{f' on {f.node}' if f.node else ''}" for f in each if f.then == then]
    return f" ({', '.join(named)})" if named else ""


def end_line(story: Story) -> str:
    """Returns the job's line at its end: ``job 123: 3 runs, 1 restart (SIGKILL on node2), 1
    requeue (USR1), 37 steps lost, ETTR 0.93``."""
    t, each = totals(story), figures(story)
    requeued = [f for f, (run, after) in zip(each, pairs(story.runs), strict=True)
                if _requeued(run, after)]
    requeue_causes = f" ({', '.join(f.cause for f in requeued)})" if requeued else ""
    ettr = "?" if t.ettr is None else f"{t.ettr:.2f}"
    return (f"job {story.job or '(no Slurm job)'}: {_count(t.runs, 'run')}, "
            f"{_count(t.restarts, 'restart')}{_causes(each, 'restart')}, "
            f"{_count(t.requeues, 'requeue')}{requeue_causes}, "
            f"{_count(t.steps_lost, 'step')} lost, ETTR {ettr}")


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'s' * (n != 1)}"
