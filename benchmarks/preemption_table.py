"""benchmarks/preemption.py's table: the figures of every repetition as a Markdown table, one
column per model (median [min, max]), and the notes under it (pure)."""

from __future__ import annotations

import statistics
from collections import Counter
from typing import Any, Dict, Sequence

__all__ = ["ROWS", "SLURM_ROWS", "cell", "table", "notes"]


#: (figure, label, kind) of the table: 's' seconds, 'n' a count.
ROWS = [
    ("signal_to_saved", "signal -> checkpoint on disk (the chief's `checkpoint` file)", "s"),
    ("signal_to_requeued", "signal -> requeue issued (the package's exit line)", "s"),
    ("steps_at_signal", "steps done at the signal", "n"),
    ("steps_after_signal", "steps trained between the signal and the save", "n"),
    ("steps_lost", "steps lost (goal: 0)", "n"),
    ("fresh_total", "fresh run: start -> first step", "s"),
    ("fresh_launch", "- launch (batch script -> trainer's first line)", "s"),
    ("fresh_setup", "- imports, resolver, strategy (every worker started)", "s"),
    ("fresh_model", "- model built", "s"),
    ("fresh_handler", "- handler built (nothing to restore)", "s"),
    ("fresh_first_step", "- dataset, step traced, first step", "s"),
    ("resumed_total", "resumed run: start -> first step", "s"),
    ("resumed_launch", "- launch (batch script -> trainer's first line)", "s"),
    ("resumed_setup", "- imports, resolver, strategy (every worker started)", "s"),
    ("resumed_model", "- model built", "s"),
    ("resumed_handler", "- handler built (restores the checkpoint)", "s"),
    ("resumed_first_step", "- dataset (skips the steps done), step traced, first step", "s"),
    ("resumed_minus_fresh", "resumed - fresh (start -> first step, same repetition)", "s"),
]
SLURM_ROWS = [
    ("requeue_to_pending", "requeue -> job PENDING again (its tasks ended)", "s"),
    ("begin_time", "BeginTime Slurm set (EligibleTime - SubmitTime of the requeued job)", "s"),
    ("update_to_start", "`scontrol update StartTime=now` -> next run's first line", "s"),
    ("requeue_to_start", "requeue -> next run's first line, with StartTime=now", "s"),
    ("real_wait", "requeue -> next run's first line, Slurm's own start (--real-wait)", "s"),
]


def cell(values: Sequence[float], kind: str) -> str:
    """Returns 'median [min, max]' (the value alone for one), or '-' for none."""
    if not values:
        return "-"
    fmt = (lambda v: f"{v:.0f}") if kind == "n" else (lambda v: f"{v:.2f}")
    med = fmt(statistics.median(values))
    unit = "" if kind == "n" else " s"
    if len(values) == 1:
        return med + unit
    return f"{med}{unit} [{fmt(min(values))}, {fmt(max(values))}]"


def header(cycles: Sequence[Dict[str, Any]], model: str) -> str:
    """Returns a model's column heading: its variables and checkpoint, as measured."""
    mine = [c for c in cycles if c["model"] == model]
    variables = statistics.median(c["variable_bytes"] for c in mine) / 2 ** 20
    saved = statistics.median(c["checkpoint_bytes"] for c in mine) / 2 ** 20
    return (f"{model}: {variables:.2f} MiB of variables, checkpoint {saved:.2f} MiB "
            f"(n={len(mine)})")


def share(flags: Sequence[bool]) -> str:
    """Returns 'yes (3/3)' where every flag is true, else 'NO (2/3)'."""
    return f"{'yes' if all(flags) else 'NO'} ({sum(flags)}/{len(flags)})"


def notes(cycles: Sequence[Dict[str, Any]], models: Sequence[str]) -> str:
    """Returns, under the table: how the first runs' tasks ended after the requeue (srun's
    words, counted), and what the exit lines that did not say 'requeued' said."""
    parts = []
    for m in models:
        counts = Counter(end for c in cycles if c["model"] == m for end in c["task_ends"])
        parts.append(f"{m}: " + ("; ".join(f"{end} (x{n})" for end, n in sorted(counts.items()))
                                 or "none reported"))
    text = ("The first runs' tasks after the requeue, as srun reported their ends: "
            + ", ".join(parts) + ".")
    other = sorted({c["requeue_said"] for c in cycles} - {"requeued"})
    if other:
        text += "\n\nExit lines that did not say the job was requeued (it was: Restarts=1): " + \
            " | ".join(other)
    return text


def table(cycles: Sequence[Dict[str, Any]], models: Sequence[str]) -> str:
    """Returns the figures as a Markdown table, one column per model."""
    of = {m: [c for c in cycles if c["model"] == m] for m in models}
    lines = ["| measure | " + " | ".join(header(cycles, m) for m in models) + " |",
             "|---|" + "---|" * len(models)]
    for key, label, kind in ROWS:
        lines.append(f"| {label} | " + " | ".join(
            cell([c[key] for c in of[m]], kind) for m in models) + " |")
    grace = f"{cycles[0]['grace_period']:g}"
    for label, flag in ((f"save and requeue within the grace period ({grace} s)",
                         lambda c: c["within_grace"]),
                        ("the package's exit line says the job was requeued",
                         lambda c: c["requeue_said"] == "requeued")):
        lines.append(f"| {label} | " + " | ".join(
            share([flag(c) for c in of[m]]) for m in models) + " |")
    lines.append("| **Slurm's own wait after the requeue (apart)** |" + " |" * len(models))
    for key, label, kind in SLURM_ROWS:
        values = {m: [c[key] for c in of[m] if key in c] for m in models}
        missing = "not measured (--real-wait)" if key == "real_wait" else "-"
        lines.append(f"| {label} | " + " | ".join(
            cell(values[m], kind) if values[m] else missing for m in models) + " |")
    return "\n".join(lines)
