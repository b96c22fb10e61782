"""JAX's saves through Orbax on two processes (issue 41): what the training pays per save at
once and in the background, the write against `dd` of the same bytes, and the restore.

    .venv-jax/bin/python benchmarks/orbax_saves.py [--mib 100 1024] [--repeat 3] [--quick]
                                                   [--json FILE]

On a throw-away Slurm cluster of two emulated nodes (srun --mpi=pmix, one process a node,
JAX on CPU, gloo), a state of --mib MiB (one float32 array sharded across the two processes:
each owns and writes half of it; random values, which no compression shrinks) is saved as
LongJob saves it (mpi_resolver/jax/orbax_checkpoints): at once (checkpoint_async=False: the
whole save is what the step pays) and in the background (the step pays the copy to host
memory and Orbax's start; the write goes on in a thread until Orbax committed the checkpoint,
fsynced by TensorStore); then the newest is restored (each process reads its half), and each
process copies its half with `dd bs=1M conv=fsync` to the same directory, both at once.
Each figure is the slower process's, the median of --repeat rounds. Goals: the background
stall <= 0.1 x the save at once, the write >= 0.5 of dd's speed. Every figure is measured
in this run.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Dict, List, Optional

ROOT = Path(__file__).resolve().parent.parent
#: Each process's line: its figures as JSON after this.
MARK = "ORBAX "
#: The goals (issue 41): the background stall against the save at once; the write against dd.
STALL_GOAL, WRITE_GOAL = 0.1, 0.5


def parse_args(argv: Optional[List[str]] = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--mib", type=int, nargs="+", default=[100, 1024],
                   help="the states' sizes in MiB (default 100 1024)")
    p.add_argument("--repeat", type=int, default=3, help="rounds of each size (medians)")
    p.add_argument("--quick", action="store_true", help="10 and 100 MiB, one round")
    p.add_argument("--json", help="also write the figures to this file")
    p.add_argument("--rank", nargs=3, metavar=("MIB", "REPEAT", "DIR"),
                   help=argparse.SUPPRESS)  # one process of the step
    args = p.parse_args(argv)
    if args.quick:
        args.mib, args.repeat = [10, 100], 1
    if args.repeat < 1 or any(m < 2 for m in args.mib):
        p.error("--repeat must be at least 1 and each --mib at least 2 (each process "
                "writes half)")
    return args


def rank_main(mib: int, repeat: int, directory: str) -> int:
    """One process: the rounds; prints its figures (MARK + JSON)."""
    from mpi_resolver.jax import initialize

    initialize(port_base="auto", gpus_per_node=0)
    import jax
    import numpy as np
    from jax.experimental import multihost_utils
    from jax.sharding import Mesh, NamedSharding, PartitionSpec

    from mpi_resolver.jax.orbax_checkpoints import OrbaxCheckpoints

    rank = jax.process_index()
    rows = mib * 2 ** 20 // 4 // 1024  # float32 rows of 1,024 values: mib MiB
    rows -= rows % jax.process_count()
    sharding = NamedSharding(Mesh(np.array(jax.devices()), ("data",)), PartitionSpec("data"))
    random = np.random.default_rng(rank)  # bytes no compression shrinks, as a model's are

    def part(index: Any) -> Any:
        shape = [len(range(*s.indices(n))) for s, n in zip(index, (rows, 1024), strict=True)]
        return random.random(shape, dtype=np.float32)

    state = {"w": jax.make_array_from_callback((rows, 1024), sharding, part)}
    own = rows * 1024 * 4 // jax.process_count()
    figures: Dict[str, List[float]] = {k: [] for k in (
        "at_once_s", "stall_s", "write_s", "restore_s", "dd_s")}
    for round_ in range(repeat):
        for background, key in ((False, "at_once_s"), (True, "stall_s")):
            files = OrbaxCheckpoints(os.path.join(directory, f"{key}-{round_}"), keep=1,
                                     background=background)
            files.open()  # as LongJob.restore does, on every process
            multihost_utils.sync_global_devices(f"save {key} {round_}")
            stall = files.start(1, state)
            written = files.wait()
            assert written is not None and written.error is None, written
            figures[key].append(stall if background else stall + written.seconds)
            if background:
                figures["write_s"].append(stall + written.seconds)
                multihost_utils.sync_global_devices(f"restore {round_}")
                began = time.monotonic()
                files.restore(1, state)
                figures["restore_s"].append(time.monotonic() - began)
        multihost_utils.sync_global_devices(f"dd {round_}")
        figures["dd_s"].append(dd(os.path.join(directory, f"dd-{rank}-{round_}"), own))
    print(MARK + json.dumps({"rank": rank, "bytes": own, **figures}), flush=True)
    return 0


def dd(path: str, size: int) -> float:
    """Returns the seconds `dd bs=1M conv=fsync` takes to write ``size`` bytes to ``path``."""
    began = time.monotonic()
    subprocess.run(["dd", "if=/dev/zero", f"of={path}", "bs=1M", f"count={size // 2 ** 20}",
                    "conv=fsync"], check=True, capture_output=True)
    took = time.monotonic() - began
    os.remove(path)
    return took


def run_size(cluster: Any, mib: int, repeat: int, directory: str) -> Dict[str, Any]:
    """Runs the step for one size; returns its figures: each the slower process's, the
    median of the rounds."""
    env = {"JAX_PLATFORMS": "cpu", "TF_CPP_MIN_LOG_LEVEL": "3", "PYTHONPATH": str(ROOT),
           "PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin"}
    p = cluster.run(["srun", "-N2", "--ntasks-per-node=1", "--mpi=pmix", sys.executable,
                     __file__, "--rank", str(mib), str(repeat), directory],
                    timeout=120 + 30 * repeat * max(mib // 100, 1), env=env)
    ranks = [json.loads(line[len(MARK):]) for line in p.stdout.splitlines()
             if line.startswith(MARK)]
    if p.returncode != 0 or len(ranks) != 2:
        raise SystemExit(f"{mib} MiB: exit {p.returncode}, {len(ranks)} processes said\n"
                         f"{p.stdout[-3000:]}\n{p.stderr[-3000:]}")
    out: Dict[str, Any] = {"mib": mib, "rounds": repeat}
    for key in ("at_once_s", "stall_s", "write_s", "restore_s", "dd_s"):
        out[key] = statistics.median(max(r[key][i] for r in ranks) for i in range(repeat))
    out["stall_ratio"] = out["stall_s"] / out["at_once_s"]
    out["write_of_dd"] = out["dd_s"] / out["write_s"]
    return out


def report(found: List[Dict[str, Any]]) -> None:
    """Prints the figures and the goals' verdicts."""
    print("Orbax saves of a state sharded across 2 processes on 2 emulated nodes "
          "(srun --mpi=pmix, JAX on CPU), the slower process, medians:")
    for f in found:
        print(f"  {f['mib']:5d} MiB: at once {f['at_once_s']:.3f} s; in the background the "
              f"step pays {f['stall_s']:.3f} s ({f['stall_ratio']:.2f} of at once), the write "
              f"{f['write_s']:.3f} s ({f['write_of_dd']:.2f} of dd's speed, dd "
              f"{f['dd_s']:.3f} s); restore {f['restore_s']:.3f} s")
    for f in found:
        stall = "met" if f["stall_ratio"] <= STALL_GOAL else "not met"
        write = "met" if f["write_of_dd"] >= WRITE_GOAL else "not met"
        print(f"goal at {f['mib']} MiB: the stall <= {STALL_GOAL} x at once: {stall} "
              f"({f['stall_ratio']:.2f}); the write >= {WRITE_GOAL} of dd: {write} "
              f"({f['write_of_dd']:.2f})")


def main(argv: Optional[List[str]] = None) -> int:
    args = parse_args(argv)
    if args.rank:
        return rank_main(int(args.rank[0]), int(args.rank[1]), args.rank[2])
    sys.path.insert(0, str(ROOT))
    from tests.harness.slurm_cluster import SlurmCluster

    with SlurmCluster(nodes=("node1", "node2"), gpus={}, cpus_per_node=16) as cluster:
        with tempfile.TemporaryDirectory(prefix="orbax-saves-", dir=cluster.workdir) as tmp:
            found = [run_size(cluster, mib, args.repeat, os.path.join(tmp, f"{mib}MiB"))
                     for mib in args.mib]
    report(found)
    if args.json:
        Path(args.json).write_text(json.dumps(found, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
