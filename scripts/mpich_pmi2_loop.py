"""MPICH under srun --mpi=pmi2, launched N times on throw-away clusters: alone, and with two
clusters at once on this machine. Counts the launches that fail and prints measured figures.

Each launch is the one tests/cluster/test_mpich.py::test_mpich_srun_pmi2_cross_checked makes:
``srun -N2 -n4 --mpi=pmi2`` of the TF-free probe, resolving twice (verify='auto' and True); it
passes when srun exits 0 and all 4 ranks report both resolutions cross-checked. Run as root
from the checkout, after scripts/setup.sh::

    .venv/bin/python scripts/mpich_pmi2_loop.py -n 50            # both modes, as the tests run
    .venv/bin/python scripts/mpich_pmi2_loop.py -n 20 --netmod ucx --mode alone
    .venv/bin/python scripts/mpich_pmi2_loop.py -n 20 --shared-dev-shm --mode together

``--netmod ucx`` uses MPICH's default netmod instead of the tests' OFI (Slurm's 1,024-byte
PMI-1 limit then cuts some address cards); ``--shared-dev-shm`` lets the emulated nodes share
this machine's /dev/shm, as the harness did before (two clusters' jobs then share MPICH's
shared memory). Exit status 0 when every launch passed, 1 otherwise.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.cluster.conftest import RANK_ENV  # noqa: E402
from tests.cluster.test_mpich import MPI_PROBE, MPICH_PY, PMI2_ENV  # noqa: E402
from tests.harness.slurm_cluster import PmiGarbled, SlurmCluster  # noqa: E402

TIMEOUT = 60.0  # seconds a launch may take (each takes about 1 s alone)


@dataclass
class Tally:
    """What one series of launches gave."""

    name: str
    seconds: List[float] = field(default_factory=list)
    failures: Dict[str, int] = field(default_factory=dict)

    def add(self, seconds: float, failure: str) -> None:
        self.seconds.append(seconds)
        if failure:
            self.failures[failure] = self.failures.get(failure, 0) + 1

    def line(self) -> str:
        n, bad = len(self.seconds), sum(self.failures.values())
        why = "; ".join(f"{k}: {v}" for k, v in sorted(self.failures.items()))
        timing = (f"median {statistics.median(self.seconds):.2f} s, "
                  f"max {max(self.seconds):.2f} s a launch") if self.seconds else "no launch"
        return f"{self.name}: {n - bad} of {n} passed ({timing}){'; ' + why if why else ''}"


def judge(stdout: str) -> str:
    """Returns '' when every rank reported both resolutions cross-checked, else why not (the
    probe writes each rank's JSON line as '@<id> <k>/<n> <piece>' chunks)."""
    pieces: Dict[str, Dict[int, str]] = {}
    for text in stdout.splitlines():
        if text.startswith("@") and text.count(" ") >= 1:
            ident, kn, piece = (text[1:].split(" ", 2) + [""])[:3]
            pieces.setdefault(ident, {})[int(kn.split("/")[0])] = piece
    lines = []
    for parts in pieces.values():
        try:
            lines.append(json.loads("".join(parts[k] for k in sorted(parts))))
        except ValueError:
            return "a rank's line was garbled"
    verified = [x for x in lines if x.get("verified") is True and "error" not in x]
    return "" if len(lines) == 8 and len(verified) == 8 else \
        f"{len(verified)} of 8 resolutions cross-checked"


def launch(cluster: SlurmCluster, env: Dict[str, str]) -> str:
    """Runs one launch; returns '' when it passed, else a short reason."""
    argv = ["srun", "-N2", "-n4", "--mpi=pmi2", MPICH_PY, MPI_PROBE,
            json.dumps([{}, {"verify": True}])]
    try:
        run = cluster.run(argv, timeout=TIMEOUT, env=env, cwd=cluster.workdir)
    except PmiGarbled:
        return "Slurm's 'not properly terminated' (stopped at once)"
    except subprocess.TimeoutExpired:
        return f"hung ({TIMEOUT:g} s)"
    if run.returncode != 0:
        return f"exit status {run.returncode}"
    return judge(run.stdout)


def series(cluster: SlurmCluster, tally: Tally, n: int, env: Dict[str, str]) -> None:
    for _ in range(n):
        t = time.monotonic()
        failure = launch(cluster, env)
        tally.add(time.monotonic() - t, failure)


def run_mode(mode: str, n: int, env: Dict[str, str], private_shm: bool) -> List[Tally]:
    """Runs ``n`` launches on one cluster ('alone') or on each of two at once ('together')."""
    count = 1 if mode == "alone" else 2
    clusters = [SlurmCluster(("node1", "node2"), gpus={"node1": 4, "node2": 4},
                             private_shm=private_shm) for _ in range(count)]
    try:
        for c in clusters:  # both fresh: their job ids run in step, 1, 2, 3, ...
            c.start()
        tallies = [Tally(mode if count == 1 else f"{mode}, cluster {i + 1}")
                   for i in range(count)]
        threads = [threading.Thread(target=series, args=(c, t, n, env))
                   for c, t in zip(clusters, tallies, strict=True)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        return tallies
    finally:
        for c in clusters:
            c.stop()


def main(argv: List[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-n", type=int, default=50, help="launches per cluster and mode (50)")
    ap.add_argument("--mode", choices=("alone", "together", "both"), default="both")
    ap.add_argument("--netmod", choices=("ofi", "ucx"), default="ofi",
                    help="MPICH's netmod: ofi as the tests (default), or its default ucx")
    ap.add_argument("--shared-dev-shm", action="store_true",
                    help="emulated nodes share this machine's /dev/shm (the old harness)")
    args = ap.parse_args(argv)
    if os.geteuid() != 0:
        print("needs root (the throw-away clusters)", file=sys.stderr)
        return 2
    env = dict(RANK_ENV, **(PMI2_ENV if args.netmod == "ofi" else {}))
    print(f"MPICH under srun -N2 -n4 --mpi=pmi2, netmod {args.netmod}, "
          f"{'shared' if args.shared_dev_shm else 'private'} /dev/shm per node, "
          f"{args.n} launches per cluster and mode", flush=True)
    failed = 0
    for mode in (("alone", "together") if args.mode == "both" else (args.mode,)):
        t = time.monotonic()
        for tally in run_mode(mode, args.n, env, not args.shared_dev_shm):
            print(tally.line(), flush=True)
            failed += sum(tally.failures.values())
        print(f"  ({mode}: {time.monotonic() - t:.0f} s in all)", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
