"""Goodput at scale from measured save times (issue 41, item 5): the expected ETTR (productive
time over the allocation's time) of a job of N nodes whose checkpoints are saved at once, in
the background, or to a node-local tier with a partner's copy, each at its own Young
interval, from what one save and one restore cost here.

    python benchmarks/goodput.py [--measured benchmarks/results/tiers.json] [--mib 1024]
                                 [--state-gib G] [--node-mtbf-hours 6000] [--restart-s 120]
                                 [--shared-every 10]

The model (first order, as Young's interval is): a cycle is T seconds of training and the
stall S a save costs the training (the whole save at once; the snapshot in the background;
in the tier, the snapshot of the local save, whose write and partner's copy run in the
background, plus a 1/K share of the background save to the shared directory that every K-th
local save also makes, --shared-every).
Failures come at the job's rate, N over a node's mean time between failures (default: Meta's
Llama 3 report, 419 unexpected interruptions in 54 days on 2,048 nodes: 6,335 node-hours,
rounded down to 6,000 as interval.DEFAULT_NODE_MTBF_HOURS); each costs the restart R (the
step restarted), the restore L (the state read back: from the shared directory, or in the
tier from the partner's copy, a lost node's case), half a cycle of work on average, and, in
the background and in the tier, the write W too (the newest save is whole W seconds after
its snapshot):

    ETTR = T / (T + S) x (1 - (R + L + (T + S) / 2 + W) x N / M)

T is Young's sqrt(2 S M / N), never below the write W (a save sooner would wait for it).
At scale, every node writes its state to the shared file system at once: a save there (at
once, or the background's write) and a restore from it take at least N x the state over the
file system's aggregate bandwidth (--shared-tb-per-s, default Llama 3's 2 TB/s sustained);
the node-local tier's writes and restores are each node's own.
S, W and L come from benchmarks/tiers.py's JSON (JAX: all three ways), or from
benchmarks/background_saves.py's (TensorFlow: at once and in the background, no restore
measured: L = 0), for the state of --mib MiB; --state-gib scales them to a larger state at
the same speeds. The tier's failure is a node's: a job that loses a node and its partner at
once restores from the shared directory, which the model leaves out. Nothing is hard-coded
but the published failure rate and the sizes asked for.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Dict, List, Optional, Sequence

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from mpi_resolver.long_jobs.interval import (DEFAULT_NODE_MTBF_HOURS,  # noqa: E402
                                              job_mtbf, young_interval)
from mpi_resolver.long_jobs.tier_settings import DEFAULT_SHARED_EVERY  # noqa: E402

#: The shared file system's aggregate bandwidth, TB/s: Llama 3's (Meta's Tectonic, "a
#: sustainable throughput of 2 TB/s and a peak throughput of 7 TB/s").
SHARED_TB_PER_S = 2.0
#: The job sizes of the table, in nodes.
NODES = (16, 128, 1024, 2048, 16384)


@dataclass(frozen=True)
class Saves:
    """One way of saving: what the training pays per save (``stall``), the write's time
    after it (``write``: 0 at once), the restore after a failure (``restore``), in
    seconds."""

    name: str
    stall: float
    write: float = 0.0
    restore: float = 0.0
    shared: str = ""  # which of its times the shared file system bounds: "stall", "write"


def at_scale(way: Saves, floor: float) -> Saves:
    """Returns ``way`` in a job whose nodes all write (and read back) their state through the
    shared file system at once, each such save or restore taking ``floor`` seconds at least
    (the nodes' bytes over its aggregate bandwidth): the save at once, the background's
    write, and both their restores; the tier's own times are its nodes' (its shared saves
    are in the background, every K-th)."""
    if not way.shared:
        return way
    return replace(way, stall=max(way.stall, floor) if way.shared == "stall" else way.stall,
                   write=max(way.write, floor) if way.shared == "write" else way.write,
                   restore=max(way.restore, floor))


def interval(saves: Saves, mtbf_s: float) -> float:
    """Returns the seconds of training between two saves: Young's of the stall, never below
    the write."""
    return max(young_interval(saves.stall, mtbf_s), saves.write)


def ettr(saves: Saves, mtbf_s: float, restart_s: float) -> float:
    """Returns the expected ETTR of a job whose mean time between failures is ``mtbf_s``,
    saving as ``saves`` at its interval, each failure costing ``restart_s`` and the restore
    more (0 at the least)."""
    t = interval(saves, mtbf_s)
    cycle = t + saves.stall
    lost = (restart_s + saves.restore + cycle / 2 + saves.write) / mtbf_s
    return (t / cycle if cycle > 0 else 1.0) * max(0.0, 1.0 - lost)


def rows(ways: Sequence[Saves], nodes: Sequence[int], node_mtbf_hours: float,
         restart_s: float, state_bytes: float = 0.0,
         shared_bytes_s: float = math.inf) -> List[Dict[str, float]]:
    """Returns one row a job size: its nodes, its MTBF, the shared file system's least time
    for one save of every node's ``state_bytes`` at ``shared_bytes_s``, and each way's
    interval and ETTR."""
    out = []
    for n in nodes:
        mtbf = job_mtbf(n, node_mtbf_hours)
        floor = n * state_bytes / shared_bytes_s
        row: Dict[str, float] = {"nodes": n, "mtbf_h": mtbf / 3600, "shared_s": floor}
        for way in (at_scale(w, floor) for w in ways):
            row[f"{way.name}_interval_s"] = interval(way, mtbf)
            row[f"{way.name}_ettr"] = ettr(way, mtbf, restart_s)
        out.append(row)
    return out


def from_measured(path: Path, mib: int, scale: float = 1.0,
                  shared_every: int = DEFAULT_SHARED_EVERY) -> List[Saves]:
    """Returns the ways measured for the state of ``mib`` MiB, their times times ``scale`` (a
    state ``scale`` times as large, at the same speeds): at once, in the background and
    tiered from tiers.py's JSON ({"sizes": [...]}), the first two from background_saves.py's
    (a list).

    Raises:
      SystemExit: the file has no such state (the sizes it has, named).
    """
    measured = json.loads(path.read_text())
    tiers = isinstance(measured, dict)
    sizes = measured.get("sizes", []) if tiers else measured
    key, bench = ("mib", "tiers.py") if tiers else ("MiB", "background_saves.py")
    found = [r for r in sizes if r.get(key) == mib]
    if not found:
        raise SystemExit(f"{path}: no state of {mib} MiB measured (it has "
                         f"{sorted(r.get(key) for r in sizes)}): run "
                         f"benchmarks/{bench} --mib {mib}")
    r = found[0]
    if not tiers:
        return [Saves("at_once", r["at_once_paid_s"] * scale, shared="stall"),
                Saves("background", r["background_paid_s"] * scale, r["write_s"] * scale,
                      shared="write")]
    tiered = r["local_stall_s"] + r["stall_s"] / shared_every
    return [Saves("at_once", r["at_once_s"] * scale, 0.0, r["restore_s"] * scale, "stall"),
            Saves("background", r["stall_s"] * scale, r["write_s"] * scale,
                  r["restore_s"] * scale, "write"),
            Saves("tiered", tiered * scale, r["local_write_s"] * scale,
                  r["restore_partner_s"] * scale)]


def table(found: List[Dict[str, float]], ways: Sequence[Saves]) -> str:
    head = ["nodes", "job MTBF (h)", "shared FS: a save at least (s)"] + [
        f"{w.name}: interval (s), ETTR" for w in ways]
    out = ["| " + " | ".join(head) + " |", "|---" * len(head) + "|"]
    for r in found:
        cells = [f"{int(r['nodes']):,}", f"{r['mtbf_h']:.2f}", f"{r['shared_s']:.0f}"] + [
            f"{r[w.name + '_interval_s']:.0f}, {r[w.name + '_ettr']:.4f}" for w in ways]
        out.append("| " + " | ".join(cells) + " |")
    return "\n".join(out)


def parse_args(argv: Optional[List[str]] = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--measured", type=Path,
                   default=ROOT / "benchmarks" / "results" / "tiers.json",
                   help="tiers.py's or background_saves.py's JSON (default "
                        "benchmarks/results/tiers.json)")
    p.add_argument("--mib", type=int, default=1024, help="the state measured (default 1024)")
    p.add_argument("--node-mtbf-hours", type=float, default=DEFAULT_NODE_MTBF_HOURS)
    p.add_argument("--restart-s", type=float, default=120.0,
                   help="seconds a failure costs beyond the work lost and the restore: the "
                        "step restarted (default 120)")
    p.add_argument("--shared-every", type=int, default=DEFAULT_SHARED_EVERY, metavar="K",
                   help="the tier's every K-th save also to the shared directory (default "
                        f"{DEFAULT_SHARED_EVERY}, as LongJob's)")
    p.add_argument("--state-gib", type=float, default=None, metavar="G",
                   help="a node's state of G GiB, its times scaled from the measured state's "
                        "at the same speeds (default: the measured state itself)")
    p.add_argument("--shared-tb-per-s", type=float, default=SHARED_TB_PER_S, metavar="B",
                   help="the shared file system's aggregate bandwidth in TB/s, what all nodes "
                        f"share (default {SHARED_TB_PER_S:g}: Llama 3's, sustained)")
    p.add_argument("--json", help="also write the rows to this file")
    args = p.parse_args(argv)
    if args.state_gib is not None and not (args.state_gib > 0 and
                                           math.isfinite(args.state_gib)):
        p.error(f"--state-gib {args.state_gib}: expected GiB > 0")
    if not args.measured.exists():
        p.error(f"--measured {args.measured}: no such file; run "
                "benchmarks/tiers.py --json FILE first")
    if not (args.shared_tb_per_s > 0):
        p.error(f"--shared-tb-per-s {args.shared_tb_per_s}: expected TB/s > 0")
    if args.shared_every < 1:
        p.error(f"--shared-every {args.shared_every}: expected a whole number >= 1")
    if not (args.restart_s >= 0 and math.isfinite(args.restart_s)):
        p.error(f"--restart-s {args.restart_s}: expected seconds >= 0")
    return args


def main(argv: Optional[List[str]] = None) -> int:
    args = parse_args(argv)
    scale = 1.0 if args.state_gib is None else args.state_gib * 1024 / args.mib
    ways = from_measured(args.measured, args.mib, scale, args.shared_every)
    state_bytes = (args.mib / 1024 if args.state_gib is None else args.state_gib) * 2 ** 30
    found = rows(ways, NODES, args.node_mtbf_hours, args.restart_s, state_bytes,
                 args.shared_tb_per_s * 1e12)
    state = (f"{args.mib} MiB state as measured" if args.state_gib is None else
             f"{args.state_gib:g} GiB state a node, scaled from {args.mib} MiB as measured")
    costs = "; ".join(f"{w.name}: stall {w.stall:.3f} s, write {w.write:.3f} s, restore "
                      f"{w.restore:.3f} s" for w in ways)
    print(f"Expected ETTR at each way's interval ({state} in {args.measured.name}: {costs}; "
          f"a node's MTBF {args.node_mtbf_hours:g} h; a restart {args.restart_s:g} s; the "
          f"shared file system {args.shared_tb_per_s:g} TB/s for all nodes):")
    print(table(found, ways))
    if args.json:
        Path(args.json).write_text(json.dumps(found, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
