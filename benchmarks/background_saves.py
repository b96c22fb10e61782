"""Periodic saves written in the background against saves written at once (issue 41): what the
training pays per save, the background write against `dd` of the same bytes to the same
directory.

    python benchmarks/background_saves.py [--mib 100 1024] [--steps 60] [--every 20] [--quick]
                                          [--workers 1] [--json FILE]

In a process of its own per run (--workers 1: one worker, TensorFlow's CPU build on one core,
the other left to the write as a GPU node's host cores are; --workers 2: two workers of
MultiWorkerMirroredStrategy under `mpirun -n 2` on this machine, in a network namespace of
their own as root, each step ending in an all-reduce of one value, so that each waits for the
other, and worker 0 writing beside both; no Slurm), a state of --mib MiB (one variable of each
worker's) trained by steps that write every byte of it (as an optimizer's update does: after
a background save's snapshot, the first such write copies the buffer, and that copy is part
of what the step pays), through SlurmTerminationConfig's handler: without saves, with a save
every 'every' steps at once (checkpoint_async=False), and in the background; each --repeat
times, medians. 'every' is --every, or more where the first run's save at once took longer
than a third of that many steps ('auto' never saves sooner than a write takes). What the
training paid per save (`*_paid_s`) is the save's step and the next one beyond the median
step (the slower worker's); beside it the run's time over the run without saves' steps of the
same count, per save (`*_run_s`: also what the write took
from the training's core, if anything); the package's own measures (Saver.seconds: the save
at once, or the snapshot; the ledger's `write`). `dd bs=1M conv=fsync` copies the
checkpoint's data file to the same directory. Goals: the background stall <= 0.1 x the save
at once, the write >= 0.5 of dd.
Every figure is measured in this run.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

ROOT = Path(__file__).resolve().parent.parent
#: Each worker's figures of a run, as JSON, in the run's directory.
FIGURES = ".figures-{rank}.json"
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")


def parse_args(argv: Optional[List[str]] = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--mib", type=int, nargs="+", default=[100, 1024],
                   help="the states' sizes in MiB (default 100 1024)")
    p.add_argument("--steps", type=int, default=60, help="steps of each timed run")
    p.add_argument("--every", type=int, default=20,
                   help="steps between two saves (default 20: longer than a write, as "
                        "'auto' makes it; a save sooner waits for the write before it)")
    p.add_argument("--workers", type=int, choices=(1, 2), default=1,
                   help="workers of the training (2: MultiWorkerMirroredStrategy under mpirun)")
    p.add_argument("--json", help="also write the figures to this file")
    p.add_argument("--repeat", type=int, default=3, help="each run this many times "
                   "(default 3; medians)")
    p.add_argument("--quick", action="store_true", help="10 and 100 MiB, once each")
    p.add_argument("--one", help=argparse.SUPPRESS)  # a run, in its own process (run())
    args = p.parse_args(argv)
    if args.quick:
        args.mib, args.repeat = [10, 100], 1
    return args


def build(tf: Any, mib: int, strategy: Any = None) -> tuple:
    """Returns (checkpoint, step variable, train step) of a state of ``mib`` MiB that each
    step writes whole; with a ``strategy``, each step ends in an all-reduce of one value over
    its workers (as a step's gradients are: each waits for the slowest)."""
    state = tf.Variable(tf.zeros([mib * 2 ** 20 // 4]), name="state")
    step = tf.Variable(0, dtype=tf.int64, trainable=False)

    @tf.function
    def update() -> Any:
        state.assign_add(tf.ones_like(state))
        return state[0]

    @tf.function
    def together() -> Any:
        return strategy.run(lambda: tf.distribute.get_replica_context().all_reduce(
            "sum", tf.constant(1.0)))

    def train_step() -> Any:
        first = update()
        if strategy is not None:
            together()
        return first

    return tf.train.Checkpoint(state=state, step=step), step, train_step


def run(mib: int, directory: str, steps: int, every: Optional[int], background: bool,
        workers: int = 1) -> Dict[str, Any]:
    """Returns one run's seconds and the package's own measures of its saves, from a process
    of its own (each run's state, a GiB, freed with it), or ``workers`` of `mpirun`: the
    slower worker's seconds and stalls, worker 0's saves."""
    argv = [sys.executable, __file__, "--one", json.dumps(
        [mib, directory, steps, every, background, workers])]
    if workers > 1:
        argv = mpirun(workers, argv)
    out = subprocess.run(argv, capture_output=True, text=True,
                         env=mpirun_env() if workers > 1 else None)
    if out.returncode != 0:
        raise SystemExit(f"a run failed ({out.returncode}): {' '.join(argv)}\n"
                         f"{out.stdout[-2000:]}\n{out.stderr[-3000:]}")
    figures = sorted(Path(directory).glob(FIGURES.format(rank="*")))
    each = [json.loads(path.read_text()) for path in figures]
    for path in figures:
        path.unlink()
    return slower(each)


def slower(each: List[Dict[str, Any]]) -> Dict[str, Any]:
    """Returns the workers' figures of one run as one: worker 0's saves, the slower worker's
    seconds and, save by save, stall (the one every worker waits for)."""
    first = dict(min(each, key=lambda r: r["rank"]))
    first["seconds"] = max(r["seconds"] for r in each)
    first["stalls"] = [max(s) for s in zip(*(r["stalls"] for r in each), strict=True)]
    return first


def mpirun(workers: int, argv: List[str]) -> List[str]:
    """Returns ``argv`` run as ``workers`` processes by Open MPI's mpirun, in a network
    namespace of their own with its loopback up where this is root (the workers' gRPC then
    meets no other listener, and no address but loopback)."""
    argv = ["mpirun", "-n", str(workers), *argv]
    if os.geteuid() == 0 and shutil.which("unshare") and shutil.which("ip"):
        return ["unshare", "--net", "sh", "-c", 'ip link set lo up && exec "$0" "$@"', *argv]
    return argv


def mpirun_env() -> Dict[str, str]:
    """Returns the environment of the workers: no Slurm or MPI variables of a caller's, as
    root, the cores shared (each worker's TensorFlow on one thread)."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("SLURM_", "SLURMD_", "PMI_", "PMIX_", "OMPI_COMM"))}
    env.update({"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
                "OMPI_MCA_rmaps_base_oversubscribe": "1",
                "OMPI_MCA_hwloc_base_binding_policy": "none", "PYTHONPATH": str(ROOT)})
    return env


def timed_steps(handler: Any, train_step: Any, step: Any, saver: Any, steps: int
                ) -> Tuple[float, List[float], List[float], List[int]]:
    """Returns the seconds of ``steps`` steps through ``handler`` (the write in flight at the
    end, if any, not counted), each step's, the saver's own measure of each save, and the
    steps (from 0) that saved."""
    measured: List[float] = []
    times: List[float] = []
    at: List[int] = []
    start = time.perf_counter()
    for i in range(steps):
        before, began = saver.seconds, time.perf_counter()
        handler.run(train_step)  # the save, where one is due, then the step
        step.assign_add(1)
        times.append(time.perf_counter() - began)
        if saver.seconds is not before:
            measured.append(saver.seconds)
            at.append(i)
    return time.perf_counter() - start, times, measured, at


def one(mib: int, directory: str, steps: int, every: Optional[int], background: bool,
        workers: int = 1, local: str = "", shared_every: Optional[int] = None) -> Dict[str, Any]:
    """Returns one run's figures, in this process (``run``'s; one worker of ``workers``;
    ``local``, ``shared_every``: the node-local tier's, benchmarks/tf_tiers.py's)."""
    import tensorflow as tf

    from mpi_resolver import MPIClusterResolver, SlurmTerminationConfig
    from mpi_resolver.long_jobs import ledger

    # The training on one core, the other left to the write: as on a GPU node, whose host
    # cores are not what the training waits for.
    tf.config.threading.set_intra_op_parallelism_threads(1)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    resolver = strategy = None
    if workers > 1:
        resolver = MPIClusterResolver(port_base="auto", gpus_per_node=0)  # tensorflow-cpu
        strategy = tf.distribute.MultiWorkerMirroredStrategy(cluster_resolver=resolver)
    checkpoint, step, train_step = build(tf, mib, strategy)
    config = SlurmTerminationConfig(requeue=False, checkpoint_every=every,
                                    checkpoint_async=background, local_dir=local or None,
                                    shared_every=shared_every)
    handler = config.handler(resolver, checkpoint, directory)
    handler.run(train_step)  # traced outside the timing
    step.assign_add(1)
    saver = config.saver
    seconds, times, measured, at = timed_steps(handler, train_step, step, saver, steps)
    saver.settle()
    config.disarm()
    saves = [r for r in ledger.read(directory) if r.get("event") == "save"]
    usual = statistics.median(times)
    # what the step paid: the save's step and the one after it (a buffer copied at its first
    # write after a snapshot) beyond the usual step's time
    stalls = [sum(t - usual for t in times[i:i + 2]) for i in at]
    rank = int(resolver.task_id) if resolver is not None else 0
    return {"rank": rank, "seconds": seconds, "steps": steps, "step_s": usual,
            "peak_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            "saves": len(measured), "measured": measured,
            "stalls": stalls, "writes": [r["write"] for r in saves if "write" in r]}


def dd_seconds(directory: str) -> float:
    """Returns the seconds `dd bs=1M conv=fsync` takes to copy the newest checkpoint's data
    files in ``directory``/chief into ``directory``."""
    chief = Path(directory) / "chief"
    newest = max(chief.glob("ckpt-*.index"), key=lambda p: int(p.name[5:-6]))
    took = 0.0
    for data in chief.glob(newest.name[:-6] + ".data-*"):
        out = os.path.join(directory, "dd.bin")
        start = time.perf_counter()
        subprocess.run(["dd", f"if={data}", f"of={out}", "bs=1M", "conv=fsync"], check=True,
                       capture_output=True)
        took += time.perf_counter() - start
        os.remove(out)
    return took


def interval(first: Dict[str, Any], least: int) -> int:
    """Returns the steps between two saves: ``least``, or more where a save at once
    (``first``: a run's figures at once) took longer than a third of that many steps ('auto'
    never saves sooner than the write takes: a save sooner would wait for it, and measure the
    write, not the stall)."""
    return max(least, math.ceil(3 * max(first["measured"] or [0.0]) /
                                max(first["step_s"], 1e-6)))


def measure(mib: int, args: argparse.Namespace) -> Dict[str, float]:
    """Returns one state's figures: each run --repeat times, medians. The first run at once
    (a save every --every steps) sets the interval of the others."""
    every, steps = args.every, max(args.steps, 3 * args.every)
    runs: Dict[str, List[Dict[str, Any]]] = {"plain": [], "at_once": [], "background": []}
    dd: List[float] = []
    for _ in range(args.repeat):
        for name, each, background in (("at_once", True, False), ("plain", False, False),
                                       ("background", True, True)):
            with tempfile.TemporaryDirectory(dir=ROOT) as base:
                runs[name].append(run(mib, base, steps, every if each else None, background,
                                      args.workers))
                if name == "at_once":
                    dd.append(dd_seconds(base))
            if name == "at_once" and len(runs[name]) == 1:
                every = interval(runs[name][0], args.every)
                steps = max(args.steps, 3 * every)  # two saves at least, a write after each
    plain = statistics.median(r["seconds"] / r["steps"] for r in runs["plain"])

    def paid(name: str) -> float:
        return statistics.median((r["seconds"] - plain * r["steps"]) / max(r["saves"], 1)
                                 for r in runs[name])

    def median_of(name: str, key: str) -> float:
        return statistics.median(v for r in runs[name] for v in r[key])

    at_once, stall = median_of("at_once", "stalls"), median_of("background", "stalls")
    write = median_of("background", "writes")
    return {"MiB": mib, "workers": args.workers, "every": every, "steps": steps,
            "step_s": plain,
            "at_once_paid_s": at_once, "at_once_run_s": paid("at_once"),
            "at_once_save_s": median_of("at_once", "measured"),
            "background_paid_s": stall, "background_run_s": paid("background"),
            "snapshot_s": median_of("background", "measured"),
            "write_s": write, "dd_s": statistics.median(dd),
            "stall_vs_at_once": stall / at_once if at_once > 0 else float("nan"),
            "write_vs_dd": statistics.median(dd) / write if write > 0 else float("nan")}


def table(rows: List[Dict[str, float]]) -> str:
    keys = ["every", "steps", "step_s", "at_once_paid_s", "at_once_run_s", "at_once_save_s",
            "background_paid_s", "background_run_s", "snapshot_s", "write_s", "dd_s",
            "stall_vs_at_once", "write_vs_dd"]
    out = ["| figure | " + " | ".join(f"{r['MiB']:g} MiB" for r in rows) + " |",
           "|---|" + "---|" * len(rows)]
    out += [f"| {k} | " + " | ".join(f"{r[k]:.4g}" for r in rows) + " |" for k in keys]
    return "\n".join(out)


def goal_line(r: Dict[str, float]) -> str:
    """Returns whether ``r`` meets the goals: the background stall <= 0.1 x the save at
    once, the write >= 0.5 of dd's speed."""
    ok = r["stall_vs_at_once"] <= 0.1 and r["write_vs_dd"] >= 0.5
    return (f"{r['MiB']:g} MiB: the training paid {r['background_paid_s']:.3f} s per save in "
            f"the background against {r['at_once_paid_s']:.3f} s at once "
            f"({r['stall_vs_at_once']:.3f}, goal <= 0.1); the write at {r['write_vs_dd']:.2f} "
            f"of dd's speed (goal >= 0.5): {'met' if ok else 'NOT met'}")


def main(argv: Optional[List[str]] = None) -> int:
    args = parse_args(argv)
    if args.one:
        given = json.loads(args.one)
        figures = one(*given)
        # a file each: two workers' lines on mpirun's output may come interleaved
        Path(given[1], FIGURES.format(rank=figures["rank"])).write_text(json.dumps(figures))
        return 0
    rows = [measure(mib, args) for mib in args.mib]
    who = "one worker" if args.workers == 1 else f"{args.workers} workers under mpirun"
    print(f"Saves in the background against saves at once ({who}; a save every 'every' "
          f"steps, at least {args.every}; load average {os.getloadavg()[0]:.2f}):")
    print(table(rows))
    for r in rows:
        print(goal_line(r))
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
