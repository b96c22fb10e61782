"""benchmarks/jax_init.py's figures, printed and judged (pure): each mode's start-ups against
JAX's own, the last rank's parts, where the difference goes, the goal's verdict, and the
training steps/s line."""

from __future__ import annotations

import os
import statistics
from typing import Any, Dict, List, Optional, Sequence

MODES = ("package", "package-slurm", "jax-own")
GOAL = 1.2
BACKOFF = 0.8  # s: a last rank's JAX start this long met gRPC's 1 s (+-20 %) reconnect backoff
#: The parts of a rank's start, in the order they happen ('-': not in that mode).
PARTS = ("package_import", "mpi_init", "resolve", "jax_start")
PART_NAMES = {"package_import": "package import", "mpi_init": "MPI_Init (mpi4py, PMIx)",
              "resolve": "exchange and the rest of the resolution",
              "jax_start": "JAX's start (jax.distributed)"}


def spread(values: List[float]) -> str:
    return f"{statistics.median(values):.2f} s [{min(values):.2f}, {max(values):.2f}]"


def median_of(found: List[Dict[str, Any]], key: str) -> Optional[float]:
    values = [r[key] for r in found if key in r]
    return statistics.median(values) if values else None


def report(found: Dict[str, List[Dict[str, Any]]], per_node: int, loads: List[float]
           ) -> Dict[str, Any]:
    """Prints the figures of the start-up steps; returns them for --json."""
    repeat = len(found["jax-own"])
    print(f"JAX initialised, {2 * per_node} processes on 2 emulated nodes (srun --mpi=pmix), "
          f"{repeat} repetitions of the 3 modes back to back (order rotated); process age of "
          "the last rank of each step, median [min, max]:")
    own = statistics.median(r["ready"] for r in found["jax-own"])
    summary: Dict[str, Any] = {"steps": found, "load_average": loads}
    for mode in MODES:
        summary[mode] = _mode_line(found, mode, own)
    _parts_lines(found, repeat)
    diff = _difference(found, own, summary)
    without = (statistics.median(r["ready"] - r.get("mpi_init", 0.0) for r in found["package"])
               / own)
    at_best = _from_parts(found, own, summary)
    summary["ratio_without_mpi_init"] = without
    print(f"  load average (1 min) {loads[0]:.1f} before, {loads[-1]:.1f} after, "
          f"{os.cpu_count()} CPUs")
    pkg, slurm = summary["package"], summary["package-slurm"]
    figures = (pkg["ratio"], statistics.median(pkg["paired"]), at_best["package"])
    print(f"goal: initialize() within {GOAL}x of JAX's own detection: {verdict(figures)} "
          f"(x{figures[0]:.2f} of medians, x{figures[1]:.2f} the median repetition "
          f"({pkg['within']} of {repeat} within), x{figures[2]:.2f} from the parts against "
          f"JAX's own without its backoff; MPI_Init under PMIx "
          f"{median_of(found['package'], 'mpi_init'):.2f} s (difference of medians "
          f"{diff:+.2f} s), "
          f"x{without:.2f} without it; Slurm alone x{slurm['ratio']:.2f}, "
          f"x{statistics.median(slurm['paired']):.2f} ({slurm['within']} of {repeat} within), "
          f"x{at_best['package-slurm']:.2f})")
    return summary


def _mode_line(found: Dict[str, List[Dict[str, Any]]], mode: str, own: float
               ) -> Dict[str, Any]:
    """Prints ``mode``'s line (its steps' ages, the ratio to JAX's own ``own`` median and
    each repetition's); returns its ratio, paired ratios and how many are within GOAL."""
    ready = [r["ready"] for r in found[mode]]
    paired = [a["ready"] / b["ready"] for a, b in zip(found[mode], found["jax-own"], strict=True)]
    ratio = statistics.median(ready) / own
    print(f"  {mode:14s} initialised {spread(ready)}   (import jax done "
          f"{spread([r['imported'] for r in found[mode]])})   x{ratio:.2f}"
          f" of JAX's own" + ("" if mode == "jax-own" else
                               f"; per repetition x{statistics.median(paired):.2f} "
                               f"[{min(paired):.2f}, {max(paired):.2f}]"))
    return {"ratio": ratio, "paired": paired, "within": sum(x <= GOAL for x in paired)}


def _parts_lines(found: Dict[str, List[Dict[str, Any]]], repeat: int) -> None:
    """Prints the last rank's parts for each mode, and the steps that met gRPC's backoff."""
    print("  the last rank to arrive, its parts (median s): "
          + " | ".join(PART_NAMES[k] for k in PARTS))
    for mode in MODES:
        cells = [median_of(found[mode], k) for k in PARTS]
        print(f"    {mode:14s} " + " | ".join("-" if c is None else f"{c:.3f}" for c in cells))
    print("  steps where the last rank's JAX start met gRPC's 1 s reconnect backoff (>= "
          f"{BACKOFF} s: a task connected before task 0's coordinator listened): "
          + ", ".join(f"{m} {sum(r['backoff'] for r in found[m])}/{repeat}" for m in MODES))


def _difference(found: Dict[str, List[Dict[str, Any]]], own: float,
                summary: Dict[str, Any]) -> float:
    """Prints where the package's median start differs from JAX's own (``own``), part by
    part; puts it in ``summary``; returns the difference of the medians."""
    diff = statistics.median(r["ready"] for r in found["package"]) - own
    parts = {k: (median_of(found["package"], k) or 0.0) - (median_of(found["jax-own"], k) or 0.0)
             for k in PARTS}
    parts["arrival"] = median_of(found["package"], "arrived") - median_of(found["jax-own"],
                                                                          "arrived")
    rest = diff - sum(parts.values())
    summary["difference"] = {"total": diff, **parts, "rest": rest}
    print(f"  package - JAX's own (medians): {diff:+.2f} s of {own:.2f} s: "
          f"MPI_Init under PMIx {parts['mpi_init']:+.2f} s, the exchange and the rest of the "
          f"resolution {parts['resolve']:+.2f} s, the package's import "
          f"{parts['package_import']:+.2f} s, JAX's start {parts['jax_start']:+.2f} s, "
          f"Python's start and import jax, alike in both (the machine's load) "
          f"{parts['arrival']:+.2f} s, medians not adding up {rest:+.2f} s")
    return diff


def _from_parts(found: Dict[str, List[Dict[str, Any]]], own: float,
                summary: Dict[str, Any]) -> Dict[str, float]:
    """Prints the package's own cost, measured on the rank that waits for no other, on top
    of JAX's own (``own``): the ratio without the noise of Python's start and import jax
    under load; and against JAX's own start as in its steps that met no gRPC backoff. Puts
    both in ``summary``; returns the latter, by mode."""
    own_start = median_of(found["jax-own"], "jax_start")
    clean = [r for r in found["jax-own"] if not r["backoff"]]
    best = own - own_start + (median_of(clean, "jax_start") if clean else own_start)
    estimate: Dict[str, float] = {}
    at_best: Dict[str, float] = {}
    for m in ("package", "package-slurm"):
        alone = own - own_start + statistics.median(sum(r.get(k, 0.0) for k in PARTS)
                                                    for r in found[m])
        estimate[m], at_best[m] = alone / own, alone / best
    summary.update(ratio_from_parts=estimate,
                   ratio_from_parts_against_jax_without_backoff=at_best)
    print(f"  the package's parts in place of JAX's own start (JAX's own {own:.2f} s; "
          f"{best:.2f} s with its start as in its {len(clean)} steps without the backoff): "
          + ", ".join(f"{m} x{estimate[m]:.2f} (x{at_best[m]:.2f})" for m in estimate))
    return at_best


def verdict(figures: Sequence[float]) -> str:
    """Returns the goal's verdict on its figures (ratios to JAX's own): "met" when all are
    within GOAL, "not met" when none is, else "borderline (N of the 3 figures within)"."""
    within = sum(f <= GOAL for f in figures)
    if within == len(figures):
        return "met"
    return "not met" if within == 0 else f"borderline ({within} of the {len(figures)} " \
        "figures within)"


def rates_line(rates: Dict[str, List[float]], epochs: int, steps: int) -> str:
    """Returns the line of both scripts' steps/s: medians, ranges, their ratio."""
    jax_rate, tf_rate = (statistics.median(rates[k]) for k in ("train_jax.py", "train.py"))
    return (f"training steps/s, 2 workers on 2 nodes, epochs 2-{epochs} of "
            f"at least {steps} steps, {len(rates['train.py'])} runs each "
            f"(reported, not a goal): Keras 3 fit on JAX {jax_rate:.1f} "
            f"[{min(rates['train_jax.py']):.1f}, "
            f"{max(rates['train_jax.py']):.1f}], TensorFlow custom loop {tf_rate:.1f} "
            f"[{min(rates['train.py']):.1f}, {max(rates['train.py']):.1f}]: "
            f"x{jax_rate / tf_rate:.2f}")
