"""Goodput at scale from measured save times (issue 41, item 5): the expected ETTR (productive
time over the allocation's time) of a job of N nodes whose checkpoints are saved at once or
in the background, each at its own Young interval, from what one save costs here.

    python benchmarks/goodput.py [--measured benchmarks/results/background_saves.json]
                                 [--mib 1024] [--state-gib G] [--node-mtbf-hours 6000]
                                 [--restart-s 120]

The model (first order, as Young's interval is): a cycle is T seconds of training and the
stall S a save costs the training (the whole save at once; the snapshot in the background).
Failures come at the job's rate, N over a node's mean time between failures (default: Meta's
Llama 3 report, 419 unexpected interruptions in 54 days on 2,048 nodes: 6,335 node-hours,
rounded down to 6,000 as interval.DEFAULT_NODE_MTBF_HOURS); each costs the restart R (the
step restarted and the checkpoint read back), half a cycle of work on average, and, in the
background, the write W too (the newest save is on disk W seconds after its snapshot):

    ETTR = T / (T + S) x (1 - (R + (T + S) / 2 + W) x N / M)

T is Young's sqrt(2 S M / N), never below the write W (a save sooner would wait for it).
S and W come from benchmarks/background_saves.py's JSON (the state of --mib MiB; --state-gib
scales them to a larger state at the same speeds); R is the restart (--restart-s: the step
restarted and the state read back). Nothing is hard-coded
but the published failure rate and the sizes asked for.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional, Sequence

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from mpi_resolver.long_jobs.interval import (DEFAULT_NODE_MTBF_HOURS,  # noqa: E402
                                              job_mtbf, young_interval)

#: The job sizes of the table, in nodes.
NODES = (16, 128, 1024, 2048, 16384)


@dataclass(frozen=True)
class Saves:
    """One way of saving: what the training pays per save (``stall``), the write's time
    after it (``write``: 0 at once), in seconds."""

    name: str
    stall: float
    write: float = 0.0


def interval(saves: Saves, mtbf_s: float) -> float:
    """Returns the seconds of training between two saves: Young's of the stall, never below
    the write."""
    return max(young_interval(saves.stall, mtbf_s), saves.write)


def ettr(saves: Saves, mtbf_s: float, restart_s: float) -> float:
    """Returns the expected ETTR of a job whose mean time between failures is ``mtbf_s``,
    saving as ``saves`` at its interval, each failure costing ``restart_s`` more (0 at the
    least)."""
    t = interval(saves, mtbf_s)
    cycle = t + saves.stall
    lost = (restart_s + cycle / 2 + saves.write) / mtbf_s
    return (t / cycle if cycle > 0 else 1.0) * max(0.0, 1.0 - lost)


def rows(ways: Sequence[Saves], nodes: Sequence[int], node_mtbf_hours: float,
         restart_s: float) -> List[Dict[str, float]]:
    """Returns one row a job size: its nodes, its MTBF, and each way's interval and ETTR."""
    out = []
    for n in nodes:
        mtbf = job_mtbf(n, node_mtbf_hours)
        row: Dict[str, float] = {"nodes": n, "mtbf_h": mtbf / 3600}
        for way in ways:
            row[f"{way.name}_interval_s"] = interval(way, mtbf)
            row[f"{way.name}_ettr"] = ettr(way, mtbf, restart_s)
        out.append(row)
    return out


def from_measured(path: Path, mib: int, scale: float = 1.0) -> List[Saves]:
    """Returns the two ways as background_saves.py measured them for the state of ``mib``
    MiB, their times times ``scale`` (a state ``scale`` times as large, at the same speeds).

    Raises:
      SystemExit: the file has no such state (the sizes it has, named).
    """
    measured = json.loads(path.read_text())
    found = [r for r in measured if r.get("MiB") == mib]
    if not found:
        raise SystemExit(f"{path}: no state of {mib} MiB measured (it has "
                         f"{sorted(r.get('MiB') for r in measured)}): run "
                         f"benchmarks/background_saves.py --mib {mib}")
    r = found[0]
    return [Saves("at_once", r["at_once_paid_s"] * scale),
            Saves("background", r["background_paid_s"] * scale, r["write_s"] * scale)]


def table(found: List[Dict[str, float]], ways: Sequence[Saves]) -> str:
    head = ["nodes", "job MTBF (h)"] + [f"{w.name}: interval (s), ETTR" for w in ways]
    out = ["| " + " | ".join(head) + " |", "|---" * len(head) + "|"]
    for r in found:
        cells = [f"{int(r['nodes']):,}", f"{r['mtbf_h']:.2f}"] + [
            f"{r[w.name + '_interval_s']:.0f}, {r[w.name + '_ettr']:.4f}" for w in ways]
        out.append("| " + " | ".join(cells) + " |")
    return "\n".join(out)


def parse_args(argv: Optional[List[str]] = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--measured", type=Path,
                   default=ROOT / "benchmarks" / "results" / "background_saves.json",
                   help="background_saves.py's JSON (default benchmarks/results/)")
    p.add_argument("--mib", type=int, default=1024, help="the state measured (default 1024)")
    p.add_argument("--node-mtbf-hours", type=float, default=DEFAULT_NODE_MTBF_HOURS)
    p.add_argument("--restart-s", type=float, default=120.0,
                   help="seconds a failure costs beyond the work lost: the restart and the "
                        "restore (default 120)")
    p.add_argument("--state-gib", type=float, default=None, metavar="G",
                   help="a node's state of G GiB, its times scaled from the measured state's "
                        "at the same speeds (default: the measured state itself)")
    p.add_argument("--json", help="also write the rows to this file")
    args = p.parse_args(argv)
    if args.state_gib is not None and not (args.state_gib > 0 and
                                           math.isfinite(args.state_gib)):
        p.error(f"--state-gib {args.state_gib}: expected GiB > 0")
    if not args.measured.exists():
        p.error(f"--measured {args.measured}: no such file; run "
                "benchmarks/background_saves.py --json FILE first")
    if not (args.restart_s >= 0 and math.isfinite(args.restart_s)):
        p.error(f"--restart-s {args.restart_s}: expected seconds >= 0")
    return args


def main(argv: Optional[List[str]] = None) -> int:
    args = parse_args(argv)
    scale = 1.0 if args.state_gib is None else args.state_gib * 1024 / args.mib
    ways = from_measured(args.measured, args.mib, scale)
    found = rows(ways, NODES, args.node_mtbf_hours, args.restart_s)
    state = (f"{args.mib} MiB state as measured" if args.state_gib is None else
             f"{args.state_gib:g} GiB state a node, scaled from {args.mib} MiB as measured")
    print(f"Expected ETTR at each way's interval ({state} in "
          f"{args.measured.name}: stall at once {ways[0].stall:.3f} s; in the background "
          f"{ways[1].stall:.3f} s, write {ways[1].write:.3f} s; a node's MTBF "
          f"{args.node_mtbf_hours:g} h; a restart {args.restart_s:g} s):")
    print(table(found, ways))
    if args.json:
        Path(args.json).write_text(json.dumps(found, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
