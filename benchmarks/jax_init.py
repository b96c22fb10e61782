"""Time from process start to JAX initialised: mpi_resolver.jax.initialize() against
jax.distributed.initialize() with JAX's own Slurm detection, in the same run (issue 34 item 6).

    .venv-jax/bin/python benchmarks/jax_init.py [--repeat N] [--tasks-per-node 2] [--json FILE]

On a throw-away 2-node Slurm cluster of its own (tests/harness/slurm_cluster.py, CPU-only
nodes), each repetition launches, in turn, `srun -N2 --ntasks-per-node=K --mpi=pmix` steps of
this script's rank part in three modes:
- ``package``: initialize(port_base='auto'), Slurm cross-checked with MPI (mpi4py, MPI_Init);
- ``package-slurm``: initialize(source='slurm', port_base='auto'), Slurm's variables alone;
- ``jax-own``: jax.distributed.initialize() (JAX's SlurmCluster; its port from the job id).
Every rank reports its process's age (from the kernel's start time of the process) when
``import jax`` is done and when the distributed runtime is up; a step is initialised when its
last rank is. Figures: median [min, max] over the repetitions, and the ratio of medians to
JAX's own (the issue's goal: within 1.2x). Nothing is hard-coded: all is measured here.

Then, reported and not a goal: training steps per second of examples/train_jax.py (Keras 3
``model.fit`` on JAX, DataParallel) against examples/train.py (TensorFlow's custom loop under
MultiWorkerMirroredStrategy, the same model, data and per-worker batch), one worker per node,
from their own ``epoch N/E ... (T s)`` lines: steps of epochs 2..E over the time they took (the
first epoch, with its compilation, left out). TensorFlow runs in .venv (or $MPI_RESOLVER_VENV).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import sys
import time
from pathlib import Path
from typing import Dict, List

ROOT = Path(__file__).resolve().parent.parent
MODES = ("package", "package-slurm", "jax-own")
GOAL = 1.2


def process_age() -> float:
    """Returns the seconds since this process started (the kernel's start time)."""
    with open("/proc/self/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    started = int(fields[19]) / os.sysconf("SC_CLK_TCK")  # field 22: starttime, in ticks
    return time.clock_gettime(time.CLOCK_BOOTTIME) - started


def rank_main(mode: str) -> int:
    """One rank: start JAX by ``mode``; print its ages after the import and the start."""
    import jax

    imported = process_age()
    if mode == "jax-own":
        jax.distributed.initialize()
    else:
        from mpi_resolver.jax import initialize

        initialize(port_base="auto", **({"source": "slurm"} if mode == "package-slurm" else {}))
    ready = process_age()
    sys.stdout.write(f"JAXINIT {mode} {jax.process_index()} {imported:.4f} {ready:.4f}\n")
    sys.stdout.flush()
    jax.distributed.shutdown()
    return 0


def launch(cluster, mode: str, per_node: int) -> Dict[str, float]:
    """Runs one step of ``mode``; returns the last rank's ages {'imported', 'ready'}."""
    env = {"PYTHONPATH": str(ROOT), "JAX_PLATFORMS": "cpu", "PYTHONDONTWRITEBYTECODE": "1",
           "XLA_FLAGS": "--xla_cpu_multi_thread_eigen=false", "OMP_NUM_THREADS": "1",
           "TF_CPP_MIN_LOG_LEVEL": "3"}
    p = cluster.run(["srun", "-N2", f"--ntasks-per-node={per_node}", "--mpi=pmix",
                     sys.executable, __file__, "--rank", mode], timeout=300, env=env)
    rows = [line.split()[2:] for line in p.stdout.splitlines() if line.startswith("JAXINIT ")]
    if p.returncode != 0 or len(rows) != 2 * per_node:
        raise SystemExit(f"{mode}: exit {p.returncode}, {len(rows)} ranks reported\n"
                         f"{p.stdout[-3000:]}\n{p.stderr[-3000:]}")
    return {"imported": max(float(r[1]) for r in rows), "ready": max(float(r[2]) for r in rows)}


def steps_per_second(cluster, python: str, script: str, epochs: int, steps: int) -> float:
    """Runs ``script`` on both nodes; returns its steps per second over epochs 2..E."""
    env = {"PYTHONPATH": str(ROOT), "JAX_PLATFORMS": "cpu", "TF_CPP_MIN_LOG_LEVEL": "3",
           "XLA_FLAGS": "--xla_cpu_multi_thread_eigen=false", "OMP_NUM_THREADS": "1",
           "PYTHONDONTWRITEBYTECODE": "1", "TF_NUM_INTRAOP_THREADS": "1",
           "TF_NUM_INTEROP_THREADS": "1"}
    if script == "train_jax.py":
        env["KERAS_BACKEND"] = "jax"  # train.py's Keras is TensorFlow's
    p = cluster.run(["srun", "-N2", "--ntasks-per-node=1", "--mpi=pmix", python,
                     str(ROOT / "examples" / script), "--epochs", str(epochs),
                     "--steps-per-epoch", str(steps), "--port-base", "auto"],
                    timeout=600, env=env)
    times = [float(t) for t in re.findall(r"^epoch \d+/\d+: .*\((\d+\.\d) s\)$", p.stdout,
                                          re.M)]
    if p.returncode != 0 or len(times) != epochs:
        raise SystemExit(f"{script}: exit {p.returncode}\n{p.stdout[-3000:]}\n"
                         f"{p.stderr[-3000:]}")
    return (epochs - 1) * steps / (times[-1] - times[0])


def spread(values: List[float]) -> str:
    return f"{statistics.median(values):.2f} s [{min(values):.2f}, {max(values):.2f}]"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--tasks-per-node", type=int, default=2)
    parser.add_argument("--json", metavar="FILE")
    parser.add_argument("--fit-epochs", type=int, default=4,
                        help="epochs of each training run for steps/s (0: none)")
    parser.add_argument("--fit-steps", type=int, default=100)
    parser.add_argument("--rank", choices=MODES, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.rank:
        return rank_main(args.rank)
    sys.path.insert(0, str(ROOT))
    from tests.harness.slurm_cluster import SlurmCluster

    found: Dict[str, List[Dict[str, float]]] = {m: [] for m in MODES}
    with SlurmCluster(nodes=("node1", "node2"), gpus={}, cpus_per_node=16) as cluster:
        launch(cluster, "jax-own", args.tasks_per_node)  # warm the page cache, not counted
        for _ in range(args.repeat):
            for mode in MODES:  # interleaved: the machine's load falls on all modes alike
                found[mode].append(launch(cluster, mode, args.tasks_per_node))
        rates: Dict[str, List[float]] = {"train_jax.py": [], "train.py": []}
        tf_python = str(ROOT / os.environ.get("MPI_RESOLVER_VENV", ".venv") / "bin" / "python")
        for _ in range(args.repeat if args.fit_epochs else 0):
            for script, python in (("train_jax.py", sys.executable), ("train.py", tf_python)):
                rates[script].append(steps_per_second(cluster, python, script,
                                                      args.fit_epochs, args.fit_steps))
    n = 2 * args.tasks_per_node
    print(f"JAX initialised, {n} processes on 2 emulated nodes (srun --mpi=pmix), "
          f"{args.repeat} repetitions, the last rank of each step; process age:")
    own = statistics.median(r["ready"] for r in found["jax-own"])
    summary = {}
    for mode in MODES:
        ready = [r["ready"] for r in found[mode]]
        imported = [r["imported"] for r in found[mode]]
        ratio = statistics.median(ready) / own
        summary[mode] = {"ready": ready, "imported": imported, "ratio": ratio}
        print(f"  {mode:14s} initialised {spread(ready)}   (import jax done "
              f"{spread(imported)})   x{ratio:.2f} of JAX's own")
    verdict = "met" if summary["package"]["ratio"] <= GOAL else "not met"
    print(f"goal: initialize() within {GOAL}x of JAX's own detection: {verdict} "
          f"(x{summary['package']['ratio']:.2f}; Slurm alone x"
          f"{summary['package-slurm']['ratio']:.2f})")
    if rates["train.py"]:
        jax_rate, tf_rate = (statistics.median(rates[k]) for k in ("train_jax.py", "train.py"))
        print(f"training steps/s, 2 workers on 2 nodes, epochs 2-{args.fit_epochs} of "
              f"{args.fit_steps} steps (reported, not a goal): Keras 3 fit on JAX "
              f"{jax_rate:.1f} [{min(rates['train_jax.py']):.1f}, "
              f"{max(rates['train_jax.py']):.1f}], TensorFlow custom loop {tf_rate:.1f} "
              f"[{min(rates['train.py']):.1f}, {max(rates['train.py']):.1f}]: "
              f"x{jax_rate / tf_rate:.2f}")
        summary["steps_per_second"] = rates
    if args.json:
        Path(args.json).write_text(json.dumps(summary, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
