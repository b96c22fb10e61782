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
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))  # fit_rate, also when loaded by path
from fit_rate import steps_per_second  # noqa: E402 - benchmarks/ is not a package
MODES = ("package", "package-slurm", "jax-own")
GOAL = 1.2
BACKOFF = 0.8  # s: a last rank's JAX start this long met gRPC's 1 s (+-20 %) reconnect backoff
#: The parts of a rank's start, in the order they happen ('-': not in that mode).
PARTS = ("package_import", "mpi_init", "resolve", "jax_start")
PART_NAMES = {"package_import": "package import", "mpi_init": "MPI_Init (mpi4py, PMIx)",
              "resolve": "exchange and the rest of the resolution",
              "jax_start": "JAX's start (jax.distributed)"}


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


def spread(values: List[float]) -> str:
    return f"{statistics.median(values):.2f} s [{min(values):.2f}, {max(values):.2f}]"


def median_of(found: List[Dict[str, Any]], key: str) -> Optional[float]:
    values = [r[key] for r in found if key in r]
    return statistics.median(values) if values else None


def report(found: Dict[str, List[Dict[str, Any]]], per_node: int, loads: List[float]
           ) -> Dict[str, Any]:
    """Prints the figures of the start-up steps; returns them for --json."""
    repeat = len(found["jax-own"])
    print(f"JAX initialised, {2 * per_node} processes on 2 emulated nodes (srun --mpi=pmix), "
          f"{repeat} repetitions of the 3 modes back to back (order rotated); process age of "
          "the last rank of each step, median [min, max]:")
    own = statistics.median(r["ready"] for r in found["jax-own"])
    summary: Dict[str, Any] = {"steps": found, "load_average": loads}
    for mode in MODES:
        summary[mode] = _mode_line(found, mode, own)
    _parts_lines(found, repeat)
    diff = _difference(found, own, summary)
    without = (statistics.median(r["ready"] - r.get("mpi_init", 0.0) for r in found["package"])
               / own)
    at_best = _from_parts(found, own, summary)
    summary["ratio_without_mpi_init"] = without
    print(f"  load average (1 min) {loads[0]:.1f} before, {loads[-1]:.1f} after, "
          f"{os.cpu_count()} CPUs")
    pkg, slurm = summary["package"], summary["package-slurm"]
    figures = (pkg["ratio"], statistics.median(pkg["paired"]), at_best["package"])
    print(f"goal: initialize() within {GOAL}x of JAX's own detection: {verdict(figures)} "
          f"(x{figures[0]:.2f} of medians, x{figures[1]:.2f} the median repetition "
          f"({pkg['within']} of {repeat} within), x{figures[2]:.2f} from the parts against "
          f"JAX's own without its backoff; MPI_Init under PMIx "
          f"{median_of(found['package'], 'mpi_init'):.2f} s (difference of medians "
          f"{diff:+.2f} s), "
          f"x{without:.2f} without it; Slurm alone x{slurm['ratio']:.2f}, "
          f"x{statistics.median(slurm['paired']):.2f} ({slurm['within']} of {repeat} within), "
          f"x{at_best['package-slurm']:.2f})")
    return summary


def _mode_line(found: Dict[str, List[Dict[str, Any]]], mode: str, own: float
               ) -> Dict[str, Any]:
    """Prints ``mode``'s line (its steps' ages, the ratio to JAX's own ``own`` median and
    each repetition's); returns its ratio, paired ratios and how many are within GOAL."""
    ready = [r["ready"] for r in found[mode]]
    paired = [a["ready"] / b["ready"] for a, b in zip(found[mode], found["jax-own"], strict=True)]
    ratio = statistics.median(ready) / own
    print(f"  {mode:14s} initialised {spread(ready)}   (import jax done "
          f"{spread([r['imported'] for r in found[mode]])})   x{ratio:.2f}"
          f" of JAX's own" + ("" if mode == "jax-own" else
                               f"; per repetition x{statistics.median(paired):.2f} "
                               f"[{min(paired):.2f}, {max(paired):.2f}]"))
    return {"ratio": ratio, "paired": paired, "within": sum(x <= GOAL for x in paired)}


def _parts_lines(found: Dict[str, List[Dict[str, Any]]], repeat: int) -> None:
    """Prints the last rank's parts for each mode, and the steps that met gRPC's backoff."""
    print("  the last rank to arrive, its parts (median s): "
          + " | ".join(PART_NAMES[k] for k in PARTS))
    for mode in MODES:
        cells = [median_of(found[mode], k) for k in PARTS]
        print(f"    {mode:14s} " + " | ".join("-" if c is None else f"{c:.3f}" for c in cells))
    print("  steps where the last rank's JAX start met gRPC's 1 s reconnect backoff (>= "
          f"{BACKOFF} s: a task connected before task 0's coordinator listened): "
          + ", ".join(f"{m} {sum(r['backoff'] for r in found[m])}/{repeat}" for m in MODES))


def _difference(found: Dict[str, List[Dict[str, Any]]], own: float,
                summary: Dict[str, Any]) -> float:
    """Prints where the package's median start differs from JAX's own (``own``), part by
    part; puts it in ``summary``; returns the difference of the medians."""
    diff = statistics.median(r["ready"] for r in found["package"]) - own
    parts = {k: (median_of(found["package"], k) or 0.0) - (median_of(found["jax-own"], k) or 0.0)
             for k in PARTS}
    parts["arrival"] = median_of(found["package"], "arrived") - median_of(found["jax-own"],
                                                                          "arrived")
    rest = diff - sum(parts.values())
    summary["difference"] = {"total": diff, **parts, "rest": rest}
    print(f"  package - JAX's own (medians): {diff:+.2f} s of {own:.2f} s: "
          f"MPI_Init under PMIx {parts['mpi_init']:+.2f} s, the exchange and the rest of the "
          f"resolution {parts['resolve']:+.2f} s, the package's import "
          f"{parts['package_import']:+.2f} s, JAX's start {parts['jax_start']:+.2f} s, "
          f"Python's start and import jax, alike in both (the machine's load) "
          f"{parts['arrival']:+.2f} s, medians not adding up {rest:+.2f} s")
    return diff


def _from_parts(found: Dict[str, List[Dict[str, Any]]], own: float,
                summary: Dict[str, Any]) -> Dict[str, float]:
    """Prints the package's own cost, measured on the rank that waits for no other, on top
    of JAX's own (``own``): the ratio without the noise of Python's start and import jax
    under load; and against JAX's own start as in its steps that met no gRPC backoff. Puts
    both in ``summary``; returns the latter, by mode."""
    own_start = median_of(found["jax-own"], "jax_start")
    clean = [r for r in found["jax-own"] if not r["backoff"]]
    best = own - own_start + (median_of(clean, "jax_start") if clean else own_start)
    estimate: Dict[str, float] = {}
    at_best: Dict[str, float] = {}
    for m in ("package", "package-slurm"):
        alone = own - own_start + statistics.median(sum(r.get(k, 0.0) for k in PARTS)
                                                    for r in found[m])
        estimate[m], at_best[m] = alone / own, alone / best
    summary.update(ratio_from_parts=estimate,
                   ratio_from_parts_against_jax_without_backoff=at_best)
    print(f"  the package's parts in place of JAX's own start (JAX's own {own:.2f} s; "
          f"{best:.2f} s with its start as in its {len(clean)} steps without the backoff): "
          + ", ".join(f"{m} x{estimate[m]:.2f} (x{at_best[m]:.2f})" for m in estimate))
    return at_best


def verdict(figures: Sequence[float]) -> str:
    """Returns the goal's verdict on its figures (ratios to JAX's own): "met" when all are
    within GOAL, "not met" when none is, else "borderline (N of the 3 figures within)"."""
    within = sum(f <= GOAL for f in figures)
    if within == len(figures):
        return "met"
    return "not met" if within == 0 else f"borderline ({within} of the {len(figures)} " \
        "figures within)"


def check_arguments(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Ends with argparse's usage error where a figure could not be measured."""
    for name, least in (("repeat", 1), ("tasks_per_node", 1), ("fit_repeat", 1),
                        ("fit_steps", 1)):
        if getattr(args, name) < least:
            parser.error(f"--{name.replace('_', '-')} must be at least {least}")
    if args.fit_epochs == 1 or args.fit_epochs < 0:
        parser.error("--fit-epochs must be 0 (no training runs) or at least 2: the rate is "
                     "timed from the first epoch's end to the last's")


def main(argv=None) -> int:
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
    args = parser.parse_args(argv)
    if args.rank:
        return rank_main(args.rank)
    check_arguments(parser, args)
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
    summary = report(found, args.tasks_per_node, loads)
    if rates["train.py"]:
        jax_rate, tf_rate = (statistics.median(rates[k]) for k in ("train_jax.py", "train.py"))
        print(f"training steps/s, 2 workers on 2 nodes, epochs 2-{args.fit_epochs} of "
              f"at least {args.fit_steps} steps, {len(rates['train.py'])} runs each "
              f"(reported, not a goal): Keras 3 fit on JAX {jax_rate:.1f} "
              f"[{min(rates['train_jax.py']):.1f}, "
              f"{max(rates['train_jax.py']):.1f}], TensorFlow custom loop {tf_rate:.1f} "
              f"[{min(rates['train.py']):.1f}, {max(rates['train.py']):.1f}]: "
              f"x{jax_rate / tf_rate:.2f}")
        summary["steps_per_second"] = rates
    if args.json:
        Path(args.json).write_text(json.dumps(summary, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
