"""The dial pattern of ``check --connect`` at scale: connections per rank, measured.

    python benchmarks/connect_pattern.py [--quick] [--json FILE]
    python benchmarks/connect_pattern.py --mpirun [--quick]   # real mpirun -n 2..64 here

For jobs of 2, 4, ..., 64, 65, 128, ... 65,536 and 100,000 nodes, 1 and 4 ranks a node:
the pattern (_connect_pairs.pattern_of), the most dials a rank makes, takes and both, the
bound 2*log2(nodes)+2 that beyond 64 nodes (ALL_PAIRS_NODES) a rank must stay within, whether
every node reaches every other over the nodes' dials (breadth-first search, both ways),
whether every rank is dialled, and the time connections_per_rank took. Up to 256 nodes the
counts are also checked against the dials peers_of lists one by one.

--mpirun: the real thing, `mpirun -n N mpi-resolver check --connect --json` on this machine
(N = 2..64, oversubscribed; one node, so its ranks dial each other in a ring): every rank
listens on its ClusterSpec address and dials its peers; rank 0's report gives the dials made
and the connect phase's seconds, beside the command's wall time (MPI start and the
resolution included). Run it in a network namespace of its own (benchmarks/run.sh does).

Figures are measured in this run; nothing is hard-coded. The bound is printed with "met" or
"NO" (or "-" up to 64 nodes, where every pair is tested), never asserted.
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
import time
from collections import deque
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench_mpi import mpirun_env  # noqa: E402 - benchmarks/ is this script's directory
from mpi_resolver.rehearsal.connect_pairs import (ALL_PAIRS_NODES, connections_per_rank,  # noqa: E402
                                                  node_offsets, pattern_of, peers_of)


def job(nodes: int, per_node: int) -> List[List[int]]:
    """The ranks of each node of a block job."""
    return [list(range(i * per_node, (i + 1) * per_node)) for i in range(nodes)]


def reaches_every_node(n: int) -> bool:
    """True when a breadth-first search from node 0 over the nodes' dials, and over them
    reversed, each reach all ``n`` nodes."""
    offsets = node_offsets(n)
    for sign in (1, -1):
        seen = bytearray(n)
        seen[0] = 1
        todo, count = deque([0]), 1
        while todo:
            a = todo.popleft()
            for d in offsets:
                b = (a + sign * d) % n
                if not seen[b]:
                    seen[b] = 1
                    count += 1
                    todo.append(b)
        if count != n:
            return False
    return True


def listed_counts(nodes: Sequence[Sequence[int]]) -> List[tuple]:
    """(made, taken) per rank counted from peers_of's lists."""
    total = sum(len(r) for r in nodes)
    made, taken = [0] * total, [0] * total
    for ranks in nodes:
        for rank in ranks:
            peers = peers_of(rank, nodes)
            made[rank] = len(peers)
            for peer in peers:
                taken[peer] += 1
    return list(zip(made, taken, strict=True))


def measure(n: int, per_node: int) -> Dict[str, Any]:
    nodes = job(n, per_node)
    start = time.perf_counter()
    counts = connections_per_rank(nodes)
    seconds = time.perf_counter() - start
    bound = 2 * math.log2(n) + 2
    most = max(out + into for out, into in counts)
    return {"nodes": n, "ranks_per_node": per_node, "pattern": pattern_of(n),
            "max_out": max(out for out, _ in counts), "max_in": max(i for _, i in counts),
            "max_total": most, "bound": bound,
            "met": None if n <= ALL_PAIRS_NODES else most <= bound,
            "all_dialled": min(i for _, i in counts) >= 1,
            "reaches_every_node": reaches_every_node(n),
            "checked_by_listing": listed_counts(nodes) == counts if n <= 256 else None,
            "seconds": seconds}


def sizes(quick: bool) -> List[int]:
    top = 4096 if quick else 65536
    powers = [2 ** k for k in range(1, top.bit_length())]
    return sorted(set(powers + [ALL_PAIRS_NODES + 1] + ([] if quick else [100_000])))


def _yes(value: Optional[bool]) -> str:
    return "-" if value is None else "yes" if value else "NO"


def real_run(n: int) -> Dict[str, Any]:
    """Returns rank 0's --connect report of `mpirun -n n`, and the command's wall time."""
    env = mpirun_env()  # bench_mpi's: no Slurm or MPI variables, as root, oversubscribed
    argv = ["mpirun", "-n", str(n), sys.executable, "-m", "mpi_resolver", "check", "--connect",
            "--json", "--timeout", "30", "--port-base", "auto", "--gpus-per-node", "0"]
    start = time.perf_counter()
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=600, env=env,
                          cwd=ROOT)
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"mpirun -n {n} failed ({proc.returncode}):\n{proc.stdout[-2000:]}\n"
                         f"{proc.stderr[-3000:]}")
    report = json.loads(proc.stdout)["connect"]
    return {"ranks": n, "pattern": report["pattern"], "connections": report["connections"],
            "failures": len(report["failures"]), "connect_seconds": report["seconds"],
            "wall_seconds": wall}


def real_runs(quick: bool) -> List[Dict[str, Any]]:
    print("| ranks (mpirun, one node) | pattern | dials | per rank | failures | connect phase "
          "| command |")
    print("|---|---|---|---|---|---|---|")
    rows = []
    for n in (2, 4, 8) if quick else (2, 4, 8, 16, 32, 64):
        r = real_run(n)
        rows.append(r)
        print(f"| {n} | {r['pattern']} | {r['connections']} | "
              f"{r['connections'] / n:.1f} | {r['failures']} | {r['connect_seconds']:.2f} s | "
              f"{r['wall_seconds']:.1f} s |", flush=True)
    return rows


def main(argv: Optional[Sequence[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="up to 4,096 nodes (8 ranks real)")
    ap.add_argument("--json", metavar="FILE", help="also write the figures as JSON")
    ap.add_argument("--mpirun", action="store_true",
                    help="real runs: mpirun -n 2..64 check --connect on this machine")
    args = ap.parse_args(argv)
    if args.mpirun:
        real = real_runs(args.quick)
        if args.json:
            Path(args.json).write_text(json.dumps({"mpirun": real}, indent=1) + "\n")
        return 0
    rows = []
    print("| nodes | ranks/node | pattern | max out | max in | max out+in | 2*log2(n)+2 | met "
          "| every rank dialled | every node reached | checked by listing | compute |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for n in sizes(args.quick):
        for per_node in (1, 4):
            r = measure(n, per_node)
            rows.append(r)
            print(f"| {n:,} | {per_node} | {r['pattern'].split(' (')[0]} | {r['max_out']} | "
                  f"{r['max_in']} | {r['max_total']} | {r['bound']:.1f} | {_yes(r['met'])} | "
                  f"{_yes(r['all_dialled'])} | {_yes(r['reaches_every_node'])} | "
                  f"{_yes(r['checked_by_listing'])} | {1000 * r['seconds']:.1f} ms |",
                  flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps({"rows": rows}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
