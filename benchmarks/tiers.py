"""JAX's checkpoint tiers side by side in one run (issue 41, item 4): the shared directory
through Orbax (at once, in the background) against the node-local tier with a partner's copy;
what the training pays per save, the writes against `dd`, the restore from each tier, and the
steps lost after a real kill with and without the tier.

    .venv-jax/bin/python benchmarks/tiers.py [--mib 100 1024] [--repeat 3] [--quick]
                                             [--shared-mbit 1000] [--json FILE]

On a throw-away Slurm cluster of two emulated nodes (srun --mpi=pmix, one process a node,
JAX on CPU, gloo; the local directory /dev/shm/...-%N, one per node, as the emulated nodes
share one file system; the shared directory on a file server behind one link of
--shared-mbit Mbit/s for both nodes, tests/harness/network_share.py, or this machine's disk
at 0), a state of --mib MiB sharded across the two processes (each owns
half; benchmarks/jax_saves.py) is, each round:
  * saved to the shared directory by Orbax at once and in the background, restored, and
    each process's half copied there by `dd bs=1M conv=fsync` (jax_saves.shared_round);
  * saved to the node-local tier as LongJob's periodic saves are (long_jobs/local_saves.LocalSaves:
    each process's part written to its node's directory and sent to its partner on the other
    node over MPI; what the step pays is all of it), `dd` of the same bytes to that
    directory; restored from each node's own copy; then node2's copy of that step is
    removed and it is restored again, process 1's part from its partner's copy.
Then the kill: a LongJob training (each step writes the whole state) with
checkpoint_every='auto' at a node MTBF short enough (--node-mtbf-hours) that Young's
intervals are seconds; process 1 SIGKILLs itself at step --kill-at; the next run restores and
says from which step: the steps lost, without the tier and with it; and, from process 0's
time at each step and the ledger's saves, the steps and seconds of training a failure at any
step would have lost on the mean (tier_common.mean_lost).
Each figure is the slower process's, the median of --repeat rounds. Goals: the stall in the
background <= 0.1 x a save at once, in each place; the write to the shared directory >= 0.5
of dd's speed there; the restore from the local tier faster than from the shared directory;
less training lost per failure with the
tier, in seconds (a run whose steps the saves slow loses fewer, slower steps), the ratio of
the two intervals beside it. Every figure is measured in this run.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Dict, List, Optional

from jax_saves import SHARED_FIGURES, dd, shared_round, sharded_state
from tier_common import (STEP_MARK, cluster_and_share, kill_figures, kill_lines, lost_goals,
                         restore_goal, shared_where, tier_arguments)

ROOT = Path(__file__).resolve().parent.parent
#: Each process's line: its figures as JSON after this.
MARK = "TIERS "
#: The goals (issue 41): the background stall against the save at once; the write against dd.
STALL_GOAL, WRITE_GOAL = 0.1, 0.5
#: A round's figures of the local tier: its save at once, in the background (the step's stall,
#: the write), dd of the same bytes to its directory, the restore from each node's own copy
#: and with process 1's from its partner.
TIER_FIGURES = ("local_at_once_s", "local_stall_s", "local_write_s", "dd_local_s",
                "restore_local_s", "restore_partner_s")
#: The kill's training: a LongJob over the sharded state, process 1 killed at argv[4].
KILLED = """import json, os, signal, sys, time
sys.path.insert(0, {benchmarks!r})
from mpi_resolver.jax import initialize
initialize(port_base="auto", gpus_per_node=0)
import jax
from jax_saves import sharded_state
from mpi_resolver.jax import LongJob
mib, directory, local, kill_at = int(sys.argv[1]), sys.argv[2], sys.argv[3], int(sys.argv[4])
job = LongJob(directory, checkpoint_every="auto", node_mtbf_hours=float(sys.argv[5]),
              local_dir=local or None)
state, _ = sharded_state(mib)
step, state = job.restore(state)
print("KILL " + json.dumps({{"rank": jax.process_index(), "start": step}}), flush=True)
add = jax.jit(lambda s: {{"w": s["w"] + 1}})
while kill_at and step < kill_at:
    step += 1
    state = add(state)
    state["w"].block_until_ready()
    job.step_done(step, state)
    if jax.process_index() == 0:
        print({step_mark!r} + f"{{step}} {{time.time()}}", flush=True)
    if step == kill_at and jax.process_index() == 1:
        os.kill(os.getpid(), signal.SIGKILL)
"""


def parse_args(argv: Optional[List[str]] = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    tier_arguments(p, 80, 0.01, "10 and 100 MiB, one round; the kill at 100 MiB alone",
                   "process 1")
    p.add_argument("--rank", nargs=4, metavar=("MIB", "REPEAT", "DIR", "LOCAL"),
                   help=argparse.SUPPRESS)  # one process of the step
    args = p.parse_args(argv)
    if args.quick:
        args.mib, args.repeat = [10, 100], 1
    if args.repeat < 1 or any(m < 2 for m in args.mib) or args.kill_at < 20:
        p.error("--repeat must be at least 1, each --mib at least 2 (each process writes "
                "half) and --kill-at at least 20 (10 steps' warm-up before 'auto' plans)")
    return args


def rank_main(mib: int, repeat: int, directory: str, local_pattern: str) -> int:
    """One process: the rounds of both tiers; prints its figures (MARK + JSON)."""
    from mpi_resolver.jax import initialize

    initialize(port_base="auto", gpus_per_node=0)
    import jax

    from mpi_resolver.exchange.part_link import World
    from mpi_resolver.jax.coordinator import JaxCoordinator
    from mpi_resolver.long_jobs.local_saves import LocalSaves

    state, own = sharded_state(mib)
    local = LocalSaves(local_pattern, JaxCoordinator(), "tiers", "--local-dir", World())
    local.open()
    figures: Dict[str, List[float]] = {k: [] for k in (*SHARED_FIGURES, *TIER_FIGURES)}
    for round_ in range(repeat):
        found = {**shared_round(state, own, directory, round_),
                 **tier_round(local, state, own, round_)}
        for key, value in found.items():
            figures[key].append(value)
    print(MARK + json.dumps({"rank": jax.process_index(), "bytes": own, **figures}),
          flush=True)
    return 0


def tier_round(local: Any, state: Any, own: int, round_: int) -> Dict[str, float]:
    """Returns one round's TIER_FIGURES: ``state`` saved to the local tier ``local`` at once
    and in the background (as LongJob's periodic saves are: jax/tier_saves), dd of this
    process's ``own`` bytes there, the restore from each node's copy, and again once node2
    lost its copy of the step; every process calls it."""
    from jax.experimental import multihost_utils

    from mpi_resolver.jax.local_parts import from_part, part_bytes
    from mpi_resolver.jax.tier_saves import TierSaves

    figures: Dict[str, float] = {}
    step, rank = 10 * (round_ + 1), local.coord.rank

    def timed(key: str, act: Any) -> Any:
        multihost_utils.sync_global_devices(f"{key} {round_}")
        began = time.monotonic()
        out = act()
        figures[key] = time.monotonic() - began
        return out

    assert timed("local_at_once_s", lambda: local.write(step, lambda: part_bytes(state))) is None
    saves = TierSaves(local, 2 ** 30, True, "(none)", lambda *whole: None)
    multihost_utils.sync_global_devices(f"local_stall_s {round_}")
    figures["local_stall_s"], _ = saves.save(step + 1, state)
    saves.settle()
    assert saves.writes is not None and saves.last_write is not None  # whole, in a thread
    figures["local_write_s"] = saves.last_write
    where = local.tier.directory
    figures["dd_local_s"] = dd(os.path.join(where, f"dd-{rank}-{round_}"), own)
    got = timed("restore_local_s", lambda: local.restore([], lambda blob: from_part(blob, state)))
    assert got is not None and got[0] == step + 1 and got[2] == "own", got
    if rank == 1:  # node2 loses its copy of the step: its own part and its partner's
        shutil.rmtree(os.path.join(where, str(step + 1)))
    got = timed("restore_partner_s", lambda: local.restore([], lambda blob: from_part(blob, state)))
    assert got is not None and got[0] == step + 1 and "partner" in got[2], got
    return figures


def env() -> Dict[str, str]:
    """Returns the processes' environment: JAX on CPU, this checkout and this Python."""
    return {"JAX_PLATFORMS": "cpu", "TF_CPP_MIN_LOG_LEVEL": "3", "PYTHONPATH": str(ROOT),
            "PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin"}


def run_size(cluster: Any, mib: int, repeat: int, where: str) -> Dict[str, Any]:
    """Runs the rounds for one size; returns its figures: each the slower process's, the
    median of the rounds."""
    local = os.path.join("/dev/shm", f"{os.path.basename(where)}-{mib}MiB-%N")
    argv = ["srun", "-N2", "--ntasks-per-node=1", "--mpi=pmix", sys.executable, __file__,
            "--rank", str(mib), str(repeat), os.path.join(where, f"{mib}MiB"), local]
    try:
        p = cluster.run(argv, timeout=180 + 40 * repeat * max(mib // 100, 1), env=env())
    finally:
        for node in ("node1", "node2"):
            shutil.rmtree(local.replace("%N", node), ignore_errors=True)
    ranks = [json.loads(line[len(MARK):]) for line in p.stdout.splitlines()
             if line.startswith(MARK)]
    if p.returncode != 0 or len(ranks) != 2:
        raise SystemExit(f"{mib} MiB: exit {p.returncode}, {len(ranks)} processes said\n"
                         f"{p.stdout[-3000:]}\n{p.stderr[-3000:]}")
    out: Dict[str, Any] = {"mib": mib, "rounds": repeat}
    for key in (*SHARED_FIGURES, *TIER_FIGURES):
        out[key] = statistics.median(max(r[key][i] for r in ranks) for i in range(repeat))
    out["stall_ratio"] = out["stall_s"] / out["at_once_s"]
    out["write_of_dd"] = out["dd_s"] / out["write_s"]
    out["local_stall_ratio"] = out["local_stall_s"] / out["local_at_once_s"]
    out["local_of_dd"] = out["dd_local_s"] / out["local_write_s"]
    return out


def killed(cluster: Any, mib: int, where: str, tiered: bool, kill_at: int,
           mtbf_hours: float) -> Dict[str, Any]:
    """Runs the kill's training without the tier or with it, then the run after it; returns
    {'tiered', 'killed_at', 'restored', 'lost', and tier_common.kill_figures'}."""
    name = f"kill-{mib}MiB-{'tiered' if tiered else 'shared'}"
    script = Path(where) / "killed.py"
    script.write_text(KILLED.format(benchmarks=str(ROOT / "benchmarks"), step_mark=STEP_MARK))
    local = os.path.join("/dev/shm", f"{os.path.basename(where)}-{name}-%N") if tiered else ""
    said: List[str] = []
    try:
        for kill in (kill_at, 0):
            p = cluster.run(["srun", "-N2", "--ntasks-per-node=1", "--mpi=pmix",
                             "--kill-on-bad-exit=1", sys.executable, str(script), str(mib),
                             os.path.join(where, name), local, str(kill), str(mtbf_hours)],
                            timeout=300 + 2 * kill_at * max(mib // 100, 1), env=env())
            said.append(p.stdout + p.stderr)
            if (p.returncode == 0) != (kill == 0):
                raise SystemExit(f"{name}: exit {p.returncode}\n{said[-1][-3000:]}")
    finally:
        for node in ("node1", "node2") if local else ():
            shutil.rmtree(local.replace("%N", node), ignore_errors=True)
    starts = [json.loads(line[len("KILL "):])["start"] for line in said[1].splitlines()
              if line.startswith("KILL ")]
    if len(set(starts)) != 1 or len(starts) != 2:
        raise SystemExit(f"{name}: the processes restored {starts}\n{said[1][-3000:]}")
    return {"tiered": tiered, "killed_at": kill_at, "restored": starts[0],
            "lost": kill_at - starts[0],
            **kill_figures(said[0], os.path.join(where, name), kill_at, starts[0])}


def report(found: List[Dict[str, Any]], kills: List[Dict[str, Any]], mbit: int) -> None:
    """Prints the figures and the goals' verdicts (``mbit``: the shared directory's link)."""
    print("Checkpoint tiers of a state sharded across 2 processes on 2 emulated nodes "
          "(srun --mpi=pmix, JAX on CPU), the slower process, medians:")
    for f in found:
        print(f"  {f['mib']:5d} MiB, shared directory ({shared_where(mbit)}; "
              f"Orbax): at once {f['at_once_s']:.3f} s; "
              f"in the background the step pays {f['stall_s']:.3f} s ({f['stall_ratio']:.2f} of at "
              f"once), the write "
              f"{f['write_s']:.3f} s ({f['write_of_dd']:.2f} of dd's speed); restore "
              f"{f['restore_s']:.3f} s")
        print(f"  {f['mib']:5d} MiB, node-local tier (/dev/shm, partner's copy over MPI): at "
              f"once {f['local_at_once_s']:.3f} s; in the background the step pays "
              f"{f['local_stall_s']:.3f} s ({f['local_stall_ratio']:.2f} of at once), the write "
              f"{f['local_write_s']:.3f} s ({f['local_of_dd']:.2f} of dd's speed); restore "
              f"{f['restore_local_s']:.3f} s from each node's own copy, "
              f"{f['restore_partner_s']:.3f} s with process 1's from its partner")
    for line in kill_lines(kills, "shared only", "last"):
        print(line)
    for f in found:
        stall = "met" if f["stall_ratio"] <= STALL_GOAL else "not met"
        write = "met" if f["write_of_dd"] >= WRITE_GOAL else "not met"
        print(f"goal at {f['mib']} MiB: the stall <= {STALL_GOAL} x at once: {stall} "
              f"({f['stall_ratio']:.2f}); the write >= {WRITE_GOAL} of dd: {write} "
              f"({f['write_of_dd']:.2f})")
        tier = "met" if f["local_stall_ratio"] <= STALL_GOAL else "not met"
        print(f"goal at {f['mib']} MiB (tier): the stall <= {STALL_GOAL} x at once: {tier} "
              f"({f['local_stall_ratio']:.2f})")
        print(restore_goal(f["mib"], f["restore_local_s"], f["restore_s"], "shared directory",
                           f"; with a part from the partner's copy "
                           f"{f['restore_partner_s']:.3f} s"))
    for line in lost_goals(kills):
        print(line)


def main(argv: Optional[List[str]] = None) -> int:
    args = parse_args(argv)
    if args.rank:
        return rank_main(int(args.rank[0]), int(args.rank[1]), args.rank[2], args.rank[3])
    sys.path.insert(0, str(ROOT))
    with cluster_and_share(args.shared_mbit, "tiers-") as (cluster, tmp):
        found = [run_size(cluster, mib, args.repeat, tmp) for mib in args.mib]
        kills = [{"mib": mib, **killed(cluster, mib, tmp, tiered, args.kill_at,
                                       args.node_mtbf_hours)}
                 for mib in (args.mib[-1:] if args.quick else args.mib)
                 for tiered in (False, True)]
    report(found, kills, args.shared_mbit)
    if args.json:
        Path(args.json).write_text(json.dumps(
            {"shared_mbit": args.shared_mbit, "sizes": found, "kills": kills}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
