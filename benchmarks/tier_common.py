"""What benchmarks/tiers.py (JAX) and benchmarks/tf_tiers.py (TensorFlow) share: their
arguments, and the lines of the kill with and without the tier. Imports no framework."""

from __future__ import annotations

import argparse
from typing import Any, Dict, List


def tier_arguments(p: argparse.ArgumentParser, kill_at: int, mtbf_hours: float,
                   quick: str, who: str) -> None:
    """Adds --mib, --repeat, --kill-at (default ``kill_at``; ``who`` is killed),
    --node-mtbf-hours (default ``mtbf_hours``), --quick (``quick``: what it runs) and --json
    to ``p``."""
    p.add_argument("--mib", type=int, nargs="+", default=[100, 1024],
                   help="the states' sizes in MiB (default 100 1024)")
    p.add_argument("--repeat", type=int, default=3, help="rounds of each size (medians)")
    p.add_argument("--kill-at", type=int, default=kill_at,
                   help=f"the step after which {who} is killed (default {kill_at})")
    p.add_argument("--node-mtbf-hours", type=float, default=mtbf_hours,
                   help=f"a node's MTBF for the kill's 'auto' intervals (default {mtbf_hours}: "
                        f"{mtbf_hours * 3600:g} s)")
    p.add_argument("--quick", action="store_true", help=quick)
    p.add_argument("--json", help="also write the figures to this file")


def kill_lines(kills: List[Dict[str, Any]], shared_only: str, plan: str) -> List[str]:
    """Returns a line for each kill: its step, where it restored, the steps lost and the
    'auto' plan (``plan``: 'first' or 'last' of its run); a kill without the tier named
    ``shared_only``."""
    lines = []
    for k in kills:
        way = "with the tier" if k["tiered"] else shared_only
        chosen = k["plans"][:1] if plan == "first" else k["plans"][-1:]
        lines.append(f"  kill at step {k['killed_at']} ({k['mib']} MiB, {way}): restored step "
                     f"{k['restored']}, {k['lost']} steps lost; 'auto' chose"
                     f"{' last' if plan == 'last' else ''}: " + "; ".join(chosen))
    return lines


def lost_goals(kills: List[Dict[str, Any]]) -> List[str]:
    """Returns the goal's line for each size killed both ways: fewer steps lost with the
    tier."""
    lines = []
    for mib in sorted({k["mib"] for k in kills}):
        lost = {k["tiered"]: k["lost"] for k in kills if k["mib"] == mib}
        if True in lost and False in lost:
            lines.append(f"goal at {mib} MiB: fewer steps lost with the tier: "
                         f"{'met' if lost[True] < lost[False] else 'not met'} ({lost[True]} "
                         f"against {lost[False]})")
    return lines


def restore_goal(mib: int, local_s: float, shared_s: float, shared: str,
                 more: str = "") -> str:
    """Returns the goal's line at ``mib`` MiB: the restore from the local tier (``local_s``)
    faster than from ``shared`` (``shared_s``); ``more``: figures said after them."""
    return (f"goal at {mib} MiB: the restore from the local tier faster than from the "
            f"{shared}: {'met' if local_s < shared_s else 'not met'} ({local_s:.3f} s "
            f"against {shared_s:.3f} s{more})")
