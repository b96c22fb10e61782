"""report --plot: the job's timeline drawn with matplotlib (the 'plot' extra): the step
reached against wall time, each run a band, saves as ticks, each restart and requeue marked
and labelled with its cause, the job's line as the title (the edge: matplotlib, the file)."""

from __future__ import annotations

import os
from typing import Any, List, Optional, Tuple

from mpi_resolver.long_jobs.report import end_line, lost_steps
from mpi_resolver.long_jobs.story import Run, Story, pairs, short_cause

__all__ = ["plot_problem", "draw", "SUFFIXES"]

SUFFIXES = (".png", ".svg")
_EXTRA = ("--plot needs matplotlib, which this environment lacks: install the 'plot' extra "
          "(pip install \".[plot]\" in the mpi_resolver checkout), or pip install matplotlib")


def plot_problem(path: str) -> Optional[str]:
    """Returns what is wrong with --plot ``path`` (its suffix, its directory, matplotlib
    missing), None where it can be drawn."""
    suffix = os.path.splitext(path)[1].lower()
    if suffix not in SUFFIXES:
        return (f"--plot {path}: expected a file ending in .png or .svg (the picture's "
                f"format), got {suffix or 'no suffix'}")
    parent = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(parent):
        return f"--plot {path}: directory {parent} does not exist: make it, or name another"
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return _EXTRA
    return None


def _unit(seconds: float) -> Tuple[float, str]:
    """Returns the time axis' unit for a job of ``seconds``: (its seconds, its name)."""
    if seconds < 300:
        return 1.0, "seconds"
    if seconds < 300 * 60:
        return 60.0, "minutes"
    return 3600.0, "hours"


def _points(run: Run, origin: float, unit: float) -> List[Tuple[float, int]]:
    """Returns the run's (``unit``s since ``origin``, step) points, in time order."""
    points = []
    if run.trained_from is not None and run.resumed is not None:
        points.append((run.trained_from, run.resumed))
    points += [(s.time, s.step) for s in run.saves if s.ok]
    if run.reached is not None and run.reached_at is not None:
        points.append((run.reached_at, run.reached))
    return [((t - origin) / unit, step) for t, step in sorted(points)]


def _label(run: Run) -> Optional[str]:
    ended = run.ended
    if ended is None or ended.action not in ("restart", "requeue"):
        return None
    node = f" on {ended.node}" if ended.node and ended.blamed else ""
    return f"{short_cause(ended)}{node}: {ended.action}"


def _draw_run(ax: Any, number: int, run: Run, after: Optional[Run], origin: float,
              unit: float, top: float) -> None:
    start, end = (run.start - origin) / unit, (run.until - origin) / unit
    ax.axvspan(start, end, color=("#dde8f5" if number % 2 else "#e8f0dd"), zorder=0)
    ax.text((start + end) / 2, top * 1.02, f"run {number}", ha="center", va="bottom",
            fontsize=8)
    points = _points(run, origin, unit)
    if points:
        ax.plot([p[0] for p in points], [p[1] for p in points], color="#1f4e99", zorder=3)
    for s in run.saves:
        ax.plot([(s.time - origin) / unit], [s.step], marker="|" if s.ok else "x",
                markersize=12, color="#2a7a2a" if s.ok else "#c00000", zorder=4)
    label = _label(run)
    if label and run.ended is not None:
        ax.axvline(end, color="#c00000" if run.ended.action == "restart" else "#d08000",
                   linestyle="--", zorder=2)
        ax.text(end, top * 0.5, label, rotation=90, ha="right", va="center", fontsize=8)
    if run.completed and run.reached is not None:
        ax.plot([end], [run.reached], marker="*", markersize=14, color="#d4a017", zorder=5)
        ax.annotate("completed", (end, run.reached), textcoords="offset points",
                    xytext=(-8, -14), ha="right", fontsize=8)
    lost = lost_steps(run, after)
    if lost and points:
        ax.annotate(f"{lost} steps lost", points[-1], textcoords="offset points",
                    xytext=(4, 4), fontsize=8, color="#c00000")
    if after is not None and after.start - run.until > 0.05 * (after.until - origin):
        ax.text((end + (after.start - origin) / unit) / 2, top * 0.5, "waiting\n(requeued)",
                ha="center", va="center", fontsize=8, color="#666666")


def draw(story: Story, path: str) -> None:
    """Draws ``story``'s timeline into ``path`` (PNG or SVG by its suffix)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D

    fig, ax = plt.subplots(figsize=(10, 4.8))
    origin = story.runs[0].start if story.runs else 0.0
    top = float(max([r.reached or 0 for r in story.runs] + [1]))
    unit, name = _unit(story.runs[-1].until - origin if story.runs else 0.0)
    for number, (run, after) in enumerate(pairs(story.runs), 1):
        _draw_run(ax, number, run, after, origin, unit, top)
    ax.set_ylim(0, top * 1.12)
    ax.set_xlabel(f"wall time since the first run started ({name})")
    ax.set_ylabel("training step reached")
    ax.set_title(end_line(story), fontsize=10)
    ax.legend(handles=[
        Line2D([], [], color="#1f4e99", label="step reached"),
        Line2D([], [], color="#2a7a2a", marker="|", linestyle="", markersize=10,
               label="checkpoint saved"),
        Line2D([], [], color="#c00000", marker="x", linestyle="", label="save failed"),
        Line2D([], [], color="#c00000", linestyle="--", label="restart (cause)"),
        Line2D([], [], color="#d08000", linestyle="--", label="requeue (cause)"),
    ], loc="lower right", fontsize=8)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
