"""Time from process start to JAX initialised: mpi_resolver.jax.initialize() against
jax.distributed.initialize() with JAX's own Slurm detection, in the same run (issue 34 item 6).

    .venv-jax/bin/python benchmarks/jax_init.py [--repeat N] [--tasks-per-node 2] [--json FILE]
                                                [--fit-repeat N] [--fit-epochs 4]

On a throw-away 2-node Slurm cluster of its own (tests/harness/slurm_cluster.py, CPU-only
nodes), each repetition launches `srun -N2 --ntasks-per-node=K --mpi=pmix` steps of this
script's rank part in three modes, in an order rotated from one repetition to the next (so that
the machine's load, other tests on it included, falls on every mode alike):
- ``package``: initialize(port_base='auto'), Slurm cross-checked with MPI (mpi4py, MPI_Init);
- ``package-slurm``: initialize(source='slurm', port_base='auto'), Slurm's variables alone;
- ``jax-own``: jax.distributed.initialize() (JAX's SlurmCluster; its port from the job id).
Every rank does ``import jax`` first, then starts JAX by its mode, and reports its process's
age (from the kernel's start time of the process) at each point: ``import jax`` done, the
package imported, initialize() (or jax.distributed.initialize()) entered and returned, and the
time of its parts: MPI_Init (the first import of mpi4py's MPI, timed around the package's
import_mpi), JAX's start (around start_jax: the wait for the coordinator and
jax.distributed.initialize) and the rest of the resolution (the plan, the exchange, ports).
A step is initialised when its last rank is; the breakdown is the last rank to arrive's (the one
that waits for no other: its MPI_Init and JAX start are their own cost).

The package is run as pip installs it: a copy with its bytecode compiled (the work tree has no
__pycache__: the suite runs with PYTHONDONTWRITEBYTECODE, which the ranks keep), so that it
does not compile its sources in every process while JAX, from site-packages, does not either.

Figures: median [min, max] over the repetitions; the ratio of medians to JAX's own and the
ratios of each repetition's steps (run back to back); the load average; one line judging the
issue's goal (within 1.2x of JAX's own) and one saying where the difference goes. Nothing is
hard-coded: all is measured here.

Then, reported and not a goal: training steps per second of examples/train_jax.py (Keras 3
``model.fit`` on JAX, DataParallel) against examples/train.py (TensorFlow's custom loop under
MultiWorkerMirroredStrategy, the same model, data and per-worker batch), one worker per node,
from their own ``epoch N/E ... (T s)`` lines: steps of epochs 2..E over the time they took (the
first epoch, with its compilation, left out). TensorFlow runs in .venv (or $MPI_RESOLVER_VENV).
"""

from __future__ import annotations

import argparse
import compileall
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Tuple

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))  # fit_rate, also when loaded by path
from fit_rate import steps_per_second  # noqa: E402 - benchmarks/ is not a package
from jax_init_report import BACKOFF, MODES, PARTS, rates_line, report  # noqa: E402


def process_age() -> float:
    """Returns the seconds since this process started (the kernel's start time)."""
    with open("/proc/self/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    started = int(fields[19]) / os.sysconf("SC_CLK_TCK")  # field 22: starttime, in ticks
    return time.clock_gettime(time.CLOCK_BOOTTIME) - started


def _timed(module: Any, name: str, into: Dict[str, float], key: str) -> None:
    """Wraps ``module.name`` so that its first call's duration goes into ``into[key]``."""
    inner: Callable[..., Any] = getattr(module, name)

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if key in into:
            return inner(*args, **kwargs)
        t = time.monotonic()
        try:
            return inner(*args, **kwargs)
        finally:
            into[key] = time.monotonic() - t

    setattr(module, name, wrapper)


def rank_main(mode: str) -> int:
    """One rank: ``import jax``, then start JAX by ``mode``; print its ages and parts."""
    import jax

    imported = process_age()
    parts: Dict[str, float] = {}
    if mode == "jax-own":
        entered = process_age()
        jax.distributed.initialize()
        ready = process_age()
        parts["jax_start"] = ready - entered
    else:
        from mpi_resolver.exchange import transport
        from mpi_resolver.jax import initialize, start

        entered = process_age()
        parts["package_import"] = entered - imported
        _timed(transport, "import_mpi", parts, "mpi_init")  # the first call starts MPI
        _timed(start, "start_jax", parts, "jax_start")
        initialize(port_base="auto", **({"source": "slurm"} if mode == "package-slurm" else {}))
        ready = process_age()
        parts["resolve"] = (ready - entered) - parts.get("mpi_init", 0.0) - parts["jax_start"]
    row = {"rank": jax.process_index(), "imported": imported, "entered": entered,
           "ready": ready, **parts}
    sys.stdout.write("JAXINIT " + json.dumps(row) + "\n")
    sys.stdout.flush()
    jax.distributed.shutdown()
    return 0


def installed_copy(into: str) -> str:
    """Returns a directory for PYTHONPATH holding a copy of the package with its bytecode
    compiled (as pip installs it)."""
    shutil.copytree(ROOT / "mpi_resolver", Path(into) / "mpi_resolver",
                    ignore=shutil.ignore_patterns("__pycache__"))
    if not compileall.compile_dir(str(Path(into) / "mpi_resolver"), quiet=1):
        raise SystemExit("could not compile the package's copy")
    return into


def launch(cluster, mode: str, per_node: int, path: str) -> Dict[str, Any]:
    """Runs one step of ``mode``; returns its last rank's ages and the parts of the rank that
    arrived last, and whether that rank's JAX start met gRPC's reconnect backoff."""
    env = {"PYTHONPATH": path, "JAX_PLATFORMS": "cpu", "PYTHONDONTWRITEBYTECODE": "1",
           "XLA_FLAGS": "--xla_cpu_multi_thread_eigen=false", "OMP_NUM_THREADS": "1",
           "TF_CPP_MIN_LOG_LEVEL": "3"}
    p = cluster.run(["srun", "-N2", f"--ntasks-per-node={per_node}", "--mpi=pmix",
                     sys.executable, __file__, "--rank", mode], timeout=300, env=env)
    rows = [json.loads(line[len("JAXINIT "):]) for line in p.stdout.splitlines()
            if line.startswith("JAXINIT ")]
    if p.returncode != 0 or len(rows) != 2 * per_node:
        raise SystemExit(f"{mode}: exit {p.returncode}, {len(rows)} ranks reported\n"
                         f"{p.stdout[-3000:]}\n{p.stderr[-3000:]}")
    last = max(rows, key=lambda r: r["entered"])
    return {"imported": max(r["imported"] for r in rows),
            "ready": max(r["ready"] for r in rows),
            "arrived": last["entered"] - last.get("package_import", 0.0),
            "backoff": last["jax_start"] >= BACKOFF,
            **{k: last[k] for k in PARTS if k in last}}


def check_arguments(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Ends with argparse's usage error where a figure could not be measured."""
    for name, least in (("repeat", 1), ("tasks_per_node", 1), ("fit_repeat", 1),
                        ("fit_steps", 1)):
        if getattr(args, name) < least:
            parser.error(f"--{name.replace('_', '-')} must be at least {least}")
    if args.fit_epochs == 1 or args.fit_epochs < 0:
        parser.error("--fit-epochs must be 0 (no training runs) or at least 2: the rate is "
                     "timed from the first epoch's end to the last's")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeat", type=int, default=7,
                        help="repetitions of the three start-up steps")
    parser.add_argument("--tasks-per-node", type=int, default=2)
    parser.add_argument("--json", metavar="FILE")
    parser.add_argument("--fit-repeat", type=int, default=3,
                        help="repetitions of each training run for steps/s")
    parser.add_argument("--fit-epochs", type=int, default=4,
                        help="epochs of each training run for steps/s (0: none)")
    parser.add_argument("--fit-steps", type=int, default=100)
    parser.add_argument("--rank", choices=MODES, help=argparse.SUPPRESS)
    return parser


def measure(args: argparse.Namespace) -> Tuple[Dict[str, List[Dict[str, Any]]],
                                                Dict[str, List[float]], List[float]]:
    """Returns each mode's start-ups, each script's steps/s and the load before and after,
    measured on a throw-away 2-node cluster."""
    sys.path.insert(0, str(ROOT))
    from tests.harness.slurm_cluster import SlurmCluster

    found: Dict[str, List[Dict[str, Any]]] = {m: [] for m in MODES}
    rates: Dict[str, List[float]] = {"train_jax.py": [], "train.py": []}
    loads = [os.getloadavg()[0]]
    with tempfile.TemporaryDirectory(prefix="mpir-jax-init-") as tmp, \
            SlurmCluster(nodes=("node1", "node2"), gpus={}, cpus_per_node=16) as cluster:
        path = installed_copy(tmp)
        for mode in MODES:  # warm the page cache and the bytecode's, not counted
            launch(cluster, mode, args.tasks_per_node, path)
        for i in range(args.repeat):
            for mode in MODES[i % 3:] + MODES[:i % 3]:  # interleaved, the order rotated
                found[mode].append(launch(cluster, mode, args.tasks_per_node, path))
        loads.append(os.getloadavg()[0])
        tf_python = str(ROOT / os.environ.get("MPI_RESOLVER_VENV", ".venv") / "bin" / "python")
        for i in range(args.fit_repeat if args.fit_epochs else 0):
            pairs = (("train_jax.py", sys.executable), ("train.py", tf_python))
            for script, python in pairs[i % 2:] + pairs[:i % 2]:
                rates[script].append(steps_per_second(cluster, python, script,
                                                      args.fit_epochs, args.fit_steps))
    return found, rates, loads


def main(argv=None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if args.rank:
        return rank_main(args.rank)
    check_arguments(parser, args)
    found, rates, loads = measure(args)
    summary = report(found, args.tasks_per_node, loads)
    if rates["train.py"]:
        print(rates_line(rates, args.fit_epochs, args.fit_steps))
        summary["steps_per_second"] = rates
    if args.json:
        Path(args.json).write_text(json.dumps(summary, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
