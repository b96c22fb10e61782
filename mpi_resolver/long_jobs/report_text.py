"""The report as a user reads it, one screen (pure but for the local clock's time zone): a
table of the runs (start, length, steps from -> to, how each ended and on which node, what
followed) and the slow ranks named in each, then the totals, the time's split and the ETTR,
then the job's line."""

from __future__ import annotations

import time
from typing import List, Optional

from mpi_resolver.long_jobs.report import RunFigures, Totals, end_line, figures, totals
from mpi_resolver.long_jobs.story import Story

__all__ = ["report_text", "duration"]

_HEADER = f"{'run':>4}  {'start':<14}  {'length':>8}  {'steps':<13}  {'ended by':<40}  then"


def duration(seconds: float) -> str:
    """Returns ``seconds`` in a few characters: '0.21 s', '41 s', '12.5 min', '5.2 h'."""
    if seconds < 10:
        return f"{seconds:.2f} s"
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.1f} h"


def _steps(f: RunFigures) -> str:
    start = "?" if f.steps_from is None else str(f.steps_from)
    end = "?" if f.steps_to is None else str(f.steps_to)
    return f"{start} -> {end}"


def _ended(f: RunFigures) -> str:
    if f.then is None:
        return "? (no supervise)" if not f.completed else "completed"
    if f.how is None or f.cause == "completed":
        return f.cause
    who = f.how.split(":")[0] if f.how.startswith(("task ", "rank ")) else f.how
    return f"{f.cause} ({who})"


def _row(f: RunFigures) -> str:
    start = time.strftime("%m-%d %H:%M:%S", time.localtime(f.start))
    then = f.then or "-"
    if f.lost:
        then += f", {f.lost} step{'s' * (f.lost != 1)} lost"
    return (f"{f.run:>4}  {start:<14}  {duration(f.seconds):>8}  {_steps(f):<13}  "
            f"{_ended(f)[:40]:<40}  {then}")


def _state(story: Story, t: Totals) -> str:
    where = f"job {story.job}" if story.job else "the job (no Slurm job id)"
    if t.completed:
        return f"{where}: training completed at step {t.steps_done}"
    if t.steps_done is None:
        return f"{where}: no step reached yet"
    return f"{where}: at step {t.steps_done}, not completed (yet)"


def _time(t: Totals) -> str:
    parts = [(t.training, "training"), (t.starting, "starting"), (t.saving, "saving"),
             (t.redone, "redone"), (t.stopping, "stopping"), (t.waiting, "between runs")]
    split = ", ".join(f"{name} {duration(s)}" for s, name in parts)
    return f"wall time {duration(t.wall)}: {split}"


def report_text(story: Story, directory: str, ledger_name: Optional[str] = None) -> List[str]:
    """Returns the report's lines for ``story`` read from ``directory``."""
    t, each = totals(story), figures(story)
    lines = [_state(story, t), _HEADER, *(_row(f) for f in each)]
    lines += [f"run {f.run}: {s.line()}" for f in each for s in f.slow_ranks]
    failed = f" ({t.failed_saves} failed)" if t.failed_saves else ""
    lines += [
        f"runs {t.runs}: {t.restarts} restarted in the allocation, {t.requeues} requeued; "
        f"saves {t.saves} in {duration(t.saving)}{failed}",
        f"steps: {'?' if t.steps_done is None else t.steps_done} done, {t.steps_trained} "
        f"trained, {t.steps_lost} lost (trained again)",
        _time(t),
        ("ETTR ?" if t.ettr is None else f"ETTR {t.ettr:.2f}") + ": the time training steps "
        "that were kept over the wall time (docs/long-jobs.md, 'What a job went through')",
    ]
    if story.other_jobs:
        lines.append(f"the ledger also holds {len(story.other_jobs)} earlier job(s) in "
                     f"{directory}: " + ", ".join(str(j) for j in story.other_jobs)
                     + " (--job ID)")
    if story.passed_over:
        lines.append(f"{story.passed_over} record(s) of {ledger_name or 'the ledger'} not "
                     "understood were passed over (another release of mpi_resolver?)")
    lines.append(end_line(story))
    return lines
