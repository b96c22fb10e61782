"""TensorFlow's checkpoint tiers side by side in one run (issue 41, item 4): the periodic saves
of SlurmTerminationConfig to the checkpoint directory against the node-local tier (each
worker's part the whole state, under MultiWorkerMirroredStrategy: a partner node's own part is
a node's copy); what the training pays per save, the writes
against `dd`, the restore from each tier, the steps lost after a real kill with and without
the tier.

    python benchmarks/tf_tiers.py [--mib 100 1024] [--repeat 3] [--every 20] [--kill-at 150]
                                  [--node-mtbf-hours 0.002] [--shared-mbit 1000] [--quick]
                                  [--json FILE]

On a throw-away Slurm cluster of two emulated nodes (srun --mpi=pmix, one worker a node,
TensorFlow's CPU build; each node's /dev/shm its own, the local directory /dev/shm/...-%N; the
checkpoint directory on a file server behind one link of --shared-mbit Mbit/s for both nodes,
tests/harness/network_share.py, or this machine's disk at 0), a
state of --mib MiB that every worker holds whole, as MultiWorkerMirroredStrategy's replicas do,
and that each step writes whole, each step ending in an all-reduce (background_saves.build), is:
  * trained with a save every 'every' steps, at once and in the background, to the
    checkpoint directory alone and with the tier (local_dir; its saves not sent to the
    directory in the run: shared_every past the run's saves); what the training paid per save,
    the save's step and the next beyond the median step, the slower worker's
    (background_saves.one); the background write (worker 0's, the ledger's; the tier's:
    every worker's part written on its node); `dd bs=1M conv=fsync` of the
    state's bytes to each directory (to the checkpoint directory worker 0's alone, the one
    that writes there); a worker's peak memory (its largest resident set). At
    once a save every --every steps; in the background every --every, or more where a save
    at once took longer than a third of that many steps in the first round (a save sooner
    waits for the write before it);
  * saved with every save to both tiers, then restored by the next run's handler, its making
    timed (the slower worker's): from each node's own copy, from the checkpoint directory
    (no local directory given), and with node2's part of the step removed (worker 1's state
    from its partner's part on node1, over MPI);
  * killed: a training with checkpoint_every='auto' at a node MTBF short enough
    (--node-mtbf-hours) that Young's intervals are seconds; worker 1 SIGKILLs itself at step
    --kill-at; the next run says where it starts: the steps lost, without the tier and with it;
    from worker 0's time at each step and the ledger's saves, the steps and seconds of
    training a failure at any step would have lost on the mean (tier_common.mean_lost).
Each figure is the median of --repeat rounds, every one measured in this run. Goals: the
restore from the local tier faster than from the checkpoint directory; less training lost
per failure with the tier, in seconds (a run whose steps the saves slow loses fewer, slower
steps; the ratio of the two intervals, as 'auto' chose them, printed beside it).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import statistics
import sys
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))
from jax_saves import dd  # noqa: E402 - imports no JAX
from tier_common import (STEP_MARK, cluster_and_share, kill_figures,  # noqa: E402
                         kill_lines, lost_goals, restore_goal, shared_where, tier_arguments)

#: Each worker's line: its figures as JSON after this.
MARK = "TFTIERS "
#: A run's kinds of saves: (name, in the background, with the tier).
KINDS = (("shared_at_once", False, False), ("local_at_once", False, True),
         ("shared_background", True, False), ("local_background", True, True))
#: The restores, in the order run: (name, the local directory given, node2's copy removed).
RESTORES = (("restore_local_s", True, False), ("restore_shared_s", False, False),
            ("restore_partner_s", True, True))


def parse_args(argv: Optional[List[str]] = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    tier_arguments(p, 150, 0.002, "10 MiB, one round; the kill at 10 MiB", "worker 1")
    p.add_argument("--every", type=int, default=20, help="least steps between two saves")
    p.add_argument("--rank", help=argparse.SUPPRESS)  # one worker of a step, its task (JSON)
    args = p.parse_args(argv)
    if args.quick:
        args.mib, args.repeat = [10], 1
    if args.repeat < 1 or any(m < 1 for m in args.mib) or args.kill_at < 20 \
            or args.every < 2:
        p.error("--repeat and each --mib must be at least 1, --every at least 2, and "
                "--kill-at at least 20 (10 steps' warm-up before 'auto' plans)")
    return args


def here(local: str) -> str:
    """Returns this node's directory of the pattern ``local`` (a rank's, under srun)."""
    return local.replace("%N", os.environ["SLURMD_NODENAME"])


def rank_main(task: Dict[str, Any]) -> int:
    """One worker of a step: runs ``task`` (its 'do': saves, restore or kill), prints its
    figures (MARK + JSON)."""
    from background_saves import one

    if task["do"] == "saves":
        found = one(task["mib"], task["dir"], task["steps"], task["every"],
                    task["background"], 2, task["local"], task["shared_every"])
        if task["dd"]:
            if found["rank"] == 0:  # the chief's alone: the other worker's saves stay in memory
                found["dd_shared_s"] = dd(os.path.join(task["dir"], "dd"),
                                          task["mib"] * 2 ** 20)
            found["dd_local_s"] = dd(os.path.join(here(task["local"]), "dd"),
                                     task["mib"] * 2 ** 20)
        if task["local"]:  # the node's memory given back (a run disarms; it does not complete)
            shutil.rmtree(here(task["local"]), ignore_errors=True)
    else:
        found = trained(task)
    print(MARK + json.dumps(found), flush=True)
    return 0


def trained(task: Dict[str, Any]) -> Dict[str, Any]:
    """Returns a restore's or a kill's figures: the handler's making (which restores) timed,
    the step it starts at; a kill's training (worker 1 SIGKILLs itself at task['kill'])."""
    import signal
    import time

    import tensorflow as tf

    from background_saves import build
    from mpi_resolver import MPIClusterResolver, SlurmTerminationConfig

    resolver = MPIClusterResolver(port_base="auto", gpus_per_node=0)  # tensorflow-cpu
    strategy = tf.distribute.MultiWorkerMirroredStrategy(cluster_resolver=resolver)
    checkpoint, _, train_step = build(tf, task["mib"], strategy)
    rank = int(resolver.task_id)
    if task.get("drop") and rank == 1:  # node2 loses its copies of the newest step
        steps = [int(s) for s in os.listdir(here(task["local"])) if s.isdigit()]
        shutil.rmtree(os.path.join(here(task["local"]), str(max(steps))))
    config = SlurmTerminationConfig(requeue=False, checkpoint_every=task["every"],
                                    node_mtbf_hours=task.get("mtbf"),
                                    local_dir=task["local"] or None,
                                    shared_every=task["shared_every"] if task["local"] else None)
    began = time.monotonic()
    handler = config.handler(resolver, checkpoint, task["dir"])
    took, start = time.monotonic() - began, int(handler.total_run_calls)
    while handler.total_run_calls < task["steps"]:
        handler.run(train_step)
        if task.get("kill") and rank == 0:
            print(f"{STEP_MARK}{handler.total_run_calls} {time.time()}", flush=True)
        if handler.total_run_calls == task.get("kill") and rank == 1:
            os.kill(os.getpid(), signal.SIGKILL)
    config.saver.settle()
    config.disarm()
    return {"rank": rank, "restore_s": took, "start": start}


def srun(cluster: Any, task: Dict[str, Any], timeout: float) -> List[Dict[str, Any]]:
    """Runs ``task`` on both nodes, one worker each; returns each worker's figures.

    Raises:
      SystemExit: the step did not end 0 with both workers' figures, its output named.
    """
    argv = ["srun", "-N2", "--ntasks-per-node=1", "--mpi=pmix", "--kill-on-bad-exit=1",
            sys.executable, __file__, "--rank", json.dumps(task)]
    p = cluster.run(argv, timeout=timeout, env=env())
    said = [json.loads(x[len(MARK):]) for x in p.stdout.splitlines() if x.startswith(MARK)]
    if p.returncode != 0 or len(said) != 2:
        raise SystemExit(f"{task['do']} {task['mib']} MiB: exit {p.returncode}, {len(said)} "
                         f"workers said\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}")
    return sorted(said, key=lambda s: s["rank"])


def env() -> Dict[str, str]:
    """Returns the workers' environment: this checkout, this Python, TensorFlow quiet."""
    return {"TF_CPP_MIN_LOG_LEVEL": "3", "PYTHONPATH": str(ROOT),
            "PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin"}


def save_run(cluster: Any, mib: int, where: str, every: int, round_: int,
             kind: Tuple[str, bool, bool]) -> Dict[str, float]:
    """Returns one run's figures of a kind of save (KINDS): what the training paid per save,
    the save as the saver measured it, the median step; in the background the write; with
    the tier at once dd to each directory."""
    from background_saves import slower

    name, background, tiered = kind
    steps = (3 if background else 2) * every + 2  # 2 saves at least, a write after each
    task = {"do": "saves", "mib": mib, "dir": os.path.join(where, f"{name}-{round_}"),
            "steps": steps, "every": every,
            "background": background, "shared_every": 10 ** 6 if tiered else None,
            "local": f"/dev/shm/{os.path.basename(where)}-{name}-{round_}-%N"
            if tiered else "", "dd": name == "local_at_once"}
    said = srun(cluster, task, timeout=300 + 2 * steps * max(mib // 100, 1))
    both = slower(said)
    figures = {f"{name}_paid_s": statistics.median(both["stalls"]),
               f"{name}_save_s": statistics.median(both["measured"]),
               f"{name}_step_s": max(s["step_s"] for s in said),
               f"{name}_peak_mib": max(s["peak_mib"] for s in said)}
    if background:
        figures[f"{name}_write_s"] = statistics.median(both["writes"])
    for key in ("dd_shared_s", "dd_local_s") if task["dd"] else ():
        figures[key] = max(s[key] for s in said if key in s)
    return figures


def interval(first: Dict[str, float], least: int) -> int:
    """Returns the steps between two saves in the background: ``least``, or more where a
    save at once (``first``: the first round's figures) took longer than a third of that many
    steps ('auto' never saves sooner than a write takes: a save sooner would wait for it)."""
    save = max(first["shared_at_once_save_s"], first["local_at_once_save_s"])
    return max(least, math.ceil(3 * save / max(first["shared_at_once_step_s"], 1e-6)))


def restores(cluster: Any, mib: int, where: str) -> Dict[str, float]:
    """Returns the restores' seconds (RESTORES), the slower worker's, after a training that
    saved every save to both tiers; checks where each started."""
    local = f"/dev/shm/{os.path.basename(where)}-restore-%N"
    task = {"do": "train", "mib": mib, "dir": os.path.join(where, "restore"), "steps": 7,
            "every": 3, "local": local, "shared_every": 1}
    srun(cluster, task, timeout=300 + 20 * max(mib // 100, 1))
    figures: Dict[str, float] = {}
    for name, tiered, drop in RESTORES:
        said = srun(cluster, {**task, "local": local if tiered else "", "drop": drop,
                              "steps": 0}, timeout=300 + 10 * max(mib // 100, 1))
        if [s["start"] for s in said] != [6, 6]:
            raise SystemExit(f"{name}: the workers started at {said}, not step 6")
        figures[name] = max(s["restore_s"] for s in said)
    return figures


def killed(cluster: Any, mib: int, where: str, tiered: bool, kill_at: int,
           mtbf_hours: float) -> Dict[str, Any]:
    """Runs the kill's training without the tier or with it, then the run after it; returns
    {'tiered', 'killed_at', 'restored', 'lost', and tier_common.kill_figures'}."""
    name = f"kill-{mib}MiB-{'tiered' if tiered else 'shared'}"
    task = {"do": "train", "mib": mib, "dir": os.path.join(where, name), "every": "auto",
            "mtbf": mtbf_hours, "steps": kill_at + 1, "kill": kill_at,
            "local": f"/dev/shm/{os.path.basename(where)}-{name}-%N" if tiered else "",
            "shared_every": None}
    timeout = 300 + 2 * kill_at * max(mib // 100, 1)
    first = cluster.run(["srun", "-N2", "--ntasks-per-node=1", "--mpi=pmix",
                         "--kill-on-bad-exit=1", sys.executable, __file__, "--rank",
                         json.dumps(task)], timeout=timeout, env=env())
    if first.returncode == 0:
        raise SystemExit(f"{name}: worker 1 was not killed\n{first.stdout[-3000:]}")
    said = srun(cluster, {**task, "steps": 0, "kill": None}, timeout=timeout)
    starts = {s["start"] for s in said}
    if len(starts) != 1:
        raise SystemExit(f"{name}: the workers started at {said}")
    start = starts.pop()
    return {"mib": mib, "tiered": tiered, "killed_at": kill_at, "restored": start,
            "lost": kill_at - start,
            **kill_figures(first.stdout + first.stderr, task["dir"], kill_at, start)}


def measure(cluster: Any, mib: int, args: argparse.Namespace, where: str) -> Dict[str, Any]:
    """Returns one size's figures: each the median of --repeat rounds."""
    every = args.every  # at once: a save's stall does not depend on the interval
    rounds: List[Dict[str, float]] = [{} for _ in range(args.repeat)]
    for round_, figures in enumerate(rounds):
        for kind in KINDS:
            if kind[1] and round_ == 0:
                every = interval(figures, args.every)
            figures.update(save_run(cluster, mib, where, every if kind[1] else args.every,
                                    round_, kind))
    out: Dict[str, Any] = {"mib": mib, "rounds": args.repeat, "every": every}
    for key in rounds[0]:
        out[key] = statistics.median(r[key] for r in rounds)
    out.update(restores(cluster, mib, where))
    for name in ("shared", "local"):
        out[f"{name}_stall_ratio"] = out[f"{name}_background_paid_s"] / \
            out[f"{name}_at_once_paid_s"]
        out[f"{name}_of_dd"] = out[f"dd_{name}_s"] / out[f"{name}_background_write_s"]
    return out


def report(found: List[Dict[str, Any]], kills: List[Dict[str, Any]], mbit: int) -> None:
    """Prints the figures and the goals' verdicts (``mbit``: the shared directory's link)."""
    print("TensorFlow's checkpoint tiers, 2 workers of MultiWorkerMirroredStrategy on 2 emulated "
          "nodes (srun --mpi=pmix, CPU), each holding the whole state; the slower worker, "
          "medians:")
    for f in found:
        for name, where in (("shared", f"checkpoint directory ({shared_where(mbit)})"),
                            ("local", "node-local tier (/dev/shm, a partner's part over MPI)")):
            print(f"  {f['mib']:5d} MiB, {where}: at once the training paid "
                  f"{f[f'{name}_at_once_paid_s']:.3f} s a save; in the background "
                  f"{f[f'{name}_background_paid_s']:.3f} s ({f[f'{name}_stall_ratio']:.2f} of "
                  f"at once), the write {f[f'{name}_background_write_s']:.3f} s "
                  f"({f[f'{name}_of_dd']:.2f} of dd's speed there); a worker's memory at "
                  f"most {f[f'{name}_background_peak_mib']:.0f} MiB")
        print(f"  {f['mib']:5d} MiB, restore: {f['restore_local_s']:.3f} s from each node's own "
              f"copy, {f['restore_partner_s']:.3f} s with worker 1's from its partner's part, "
              f"{f['restore_shared_s']:.3f} s from the checkpoint directory")
    for line in kill_lines(kills, "checkpoint directory only", "last"):
        print(line)
    for f in found:
        for name in ("shared", "local"):
            ratio = f[f"{name}_stall_ratio"]
            print(f"goal at {f['mib']} MiB ({name}): the stall <= 0.1 x at once: "
                  f"{'met' if ratio <= 0.1 else 'not met'} ({ratio:.3f})")
        print(f"goal at {f['mib']} MiB (shared): the write >= 0.5 of dd: "
              f"{'met' if f['shared_of_dd'] >= 0.5 else 'not met'} ({f['shared_of_dd']:.2f})")
        print(restore_goal(f["mib"], f["restore_local_s"], f["restore_shared_s"],
                           "checkpoint directory"))
    for line in lost_goals(kills):
        print(line)


def main(argv: Optional[List[str]] = None) -> int:
    args = parse_args(argv)
    if args.rank:
        return rank_main(json.loads(args.rank))
    sys.path.insert(0, str(ROOT))
    with cluster_and_share(args.shared_mbit, "tftiers-") as (cluster, tmp):
        found = [measure(cluster, mib, args, tmp) for mib in args.mib]
        kills = [killed(cluster, mib, tmp, tiered, args.kill_at, args.node_mtbf_hours)
                 for mib in args.mib for tiered in (False, True)]
    report(found, kills, args.shared_mbit)
    if args.json:
        Path(args.json).write_text(json.dumps(
            {"shared_mbit": args.shared_mbit, "sizes": found, "kills": kills}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
