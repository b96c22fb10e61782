"""``mpi-resolver status``'s lines while a job runs (pure): the newest checkpoint (its step and
age), the last event, the current run's step and rate, and, given the plan, the expected end;
from the job's story (its ledger), its manifest and worker 0's progress file, at ``now``."""

from __future__ import annotations

import time
from typing import Any, Dict, List, Mapping, Optional, Tuple

from mpi_resolver.long_jobs.report_text import duration
from mpi_resolver.long_jobs.story import Run, Story, short_cause

__all__ = ["status_lines", "rate", "latest", "plan_of"]


def _ago(now: float, then: float) -> str:
    return f"{duration(max(now - then, 0.0))} ago"


def latest(run: Run, progress: Optional[Mapping[str, Any]]) -> Tuple[
        Optional[int], Optional[float], bool]:
    """Returns (the step the run reached, when, whether the progress file said it): the
    progress file's step and time where they are this run's (written since its restore),
    else the run's own (its last save)."""
    if progress and run.trained_from is not None and \
            isinstance(progress.get("time"), (int, float)) and \
            progress["time"] >= run.trained_from and isinstance(progress.get("step"), int):
        return progress["step"], float(progress["time"]), True
    return run.reached, run.reached_at, False


def rate(run: Run, progress: Optional[Mapping[str, Any]]) -> Optional[float]:
    """Returns the run's steps a second since its training started, None where unknown."""
    step, at, _ = latest(run, progress)
    if step is None or at is None or run.trained_from is None or run.resumed is None:
        return None
    took = at - run.trained_from
    return (step - run.resumed) / took if took > 0 and step > run.resumed else None


def plan_of(story: Story, given: Optional[int]) -> Optional[int]:
    """Returns the steps planned: ``given`` (--steps), else the newest restore's plan."""
    if given is not None:
        return given
    plans = [r.plan for r in story.runs if r.plan is not None]
    return plans[-1] if plans else None


def _newest(story: Story, manifest: Optional[Mapping[str, Any]], now: float) -> str:
    saves = [s for r in story.runs for s in r.saves if s.ok]
    if saves:
        s = saves[-1]
        return (f"newest checkpoint: step {s.step} ({s.kind}, {duration(s.seconds)} to save), "
                f"{_ago(now, s.time)}")
    if manifest and isinstance(manifest.get("step"), int):
        return (f"newest checkpoint: step {manifest['step']} (the manifest, written "
                f"{manifest.get('written', '?')})")
    return "newest checkpoint: none yet"


def _last_event(run: Run, now: float) -> str:
    if run.ended is not None:
        node = f" on {run.ended.node}" if run.ended.node and run.ended.blamed else ""
        return (f"last event: run ended ({short_cause(run.ended)}{node}), then "
                f"{run.ended.action}, {_ago(now, run.until)}")
    if run.completed:
        return f"last event: training completed at step {run.reached}, {_ago(now, run.last)}"
    events: List[Tuple[float, str]] = [(run.start, "run started")]
    if run.trained_from is not None:
        events.append((run.trained_from, f"resumed from step {run.resumed}"))
    events += [(s.time, f"{s.kind} save at step {s.step}{'' if s.ok else ' failed'}")
               for s in run.saves]
    at, what = max(reversed(events), key=lambda e: e[0])  # at the same time, the later
    return f"last event: {what}, {_ago(now, at)}"


def _progress(run: Run, progress: Optional[Mapping[str, Any]], now: float,
              plan: Optional[int]) -> List[str]:
    speed = rate(run, progress)
    step, at, fresh = latest(run, progress)
    if step is None:
        return ["progress: no step reached yet in this run"]
    seen = f", {_ago(now, at)}" if fresh and at is not None else ""
    lines = [f"progress: step {step}{seen}; "
             + (f"{speed:.3g} steps/s in this run" if speed else "rate not known yet")]
    if plan is not None and speed:
        left = max(plan - step, 0) / speed  # a plan already passed: the end is now
        end = time.strftime("%H:%M:%S", time.localtime(now + left))
        lines.append(f"expected end: step {plan} in about {duration(left)} (at {end}), "
                     "at this run's rate and without interruptions")
    elif plan is None:
        lines.append("expected end: the plan is not known (give --steps N)")
    return lines


def status_lines(story: Story, manifest: Optional[Dict[str, Any]],
                 progress: Optional[Dict[str, Any]], now: float, directory: str,
                 plan: Optional[int] = None) -> List[str]:
    """Returns ``status``'s lines for the job of ``story`` in ``directory`` at ``now``."""
    if not story.runs:
        return [f"{directory}: the ledger holds no run yet"]
    run = story.runs[-1]
    head = f"job {story.job or '(no Slurm job id)'}, run {len(story.runs)}"
    state = "completed" if run.completed else (
        f"ended, {run.ended.action}" if run.ended else "running")
    lines = [f"{head} ({state}), started {_ago(now, run.start)}", _newest(story, manifest, now),
             _last_event(run, now)]
    if run.ended is None and not run.completed:
        lines += _progress(run, progress, now, plan_of(story, plan))
    return lines
