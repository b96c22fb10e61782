"""Benchmarks: mpi_resolver against TensorFlow's SlurmClusterResolver, measured in one run.

Prints a table of measured figures with ratios to TensorFlow and writes them, with the
machine they were taken on, to benchmarks/results/latest.json and latest.md. Nothing here is
a test: targets are reported as met or missed, never asserted.

    python benchmarks/bench.py [--quick] [--skip-slurm]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable, Dict, List

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
RESULTS = Path(os.environ.get("MPI_RESOLVER_BENCH_RESULTS", ROOT / "benchmarks" / "results"))
PY = sys.executable

from benchmarks.bench_mpi import QUIET, bench_gpu_probes, bench_mpi  # noqa: E402


def slurm_env(nodes: int, per_node: int) -> Dict[str, str]:
    """The step variables of rank 0 of a block job on ``nodes`` nodes."""
    width = len(str(nodes))
    nodelist = f"n[{'1'.zfill(width)}-{nodes}]" if nodes > 1 else "n1"
    return {"SLURM_PROCID": "0", "SLURM_STEP_NUM_TASKS": str(nodes * per_node),
            "SLURM_STEP_NODELIST": nodelist,
            "SLURM_STEP_TASKS_PER_NODE": f"{per_node}(x{nodes})" if nodes > 1 else str(per_node),
            "CUDA_VISIBLE_DEVICES": "0,1,2,3", "PATH": os.environ.get("PATH", "")}


def median_ms(fn: Callable[[], Any], reps: int) -> float:
    times = []
    for _ in range(reps):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1000


def _slurm_size(nodes: int, per_node: int, reps: int) -> Dict[str, Any]:
    """Returns one size's row: TensorFlow's resolver against ours from Slurm's variables (each
    resolver built and asked for its spec), and the CLI's path, medians of ``reps``."""
    import tensorflow as tf

    from mpi_resolver import MPIClusterResolver
    from mpi_resolver.options import make_options
    from mpi_resolver.resolve.resolution import resolve_job

    tf_cls = tf.distribute.cluster_resolver.SlurmClusterResolver
    env = slurm_env(nodes, per_node)

    def run(cls, **kw):
        os.environ.clear()
        os.environ.update(env)  # TensorFlow narrows CUDA_VISIBLE_DEVICES each time
        return cls(**kw).cluster_spec()

    def cli():
        return resolve_job(make_options(source="slurm"), env).cluster()

    same = run(tf_cls).as_dict() == run(MPIClusterResolver, source="slurm").as_dict()
    theirs = median_ms(lambda: run(tf_cls), reps)
    ours = median_ms(lambda: run(MPIClusterResolver, source="slurm"), reps)
    return {"nodes": nodes, "tasks_per_node": per_node, "reps": reps, "tensorflow_ms": theirs,
            "mpi_resolver_ms": ours, "ratio": ours / theirs, "cli_path_ms": median_ms(cli, reps),
            "same_spec": same}


def bench_slurm_sizes(quick: bool) -> List[Dict[str, Any]]:
    """1. Construct + cluster_spec() from Slurm variables, ours and TensorFlow's, per size."""
    rows = []
    saved = dict(os.environ)
    sizes = [1, 64, 1024, 10000] + ([] if quick else [100000])
    try:
        for nodes in sizes:
            for per_node in (1, 4):
                reps = 3 if nodes >= 100000 else 7 if nodes >= 10000 else 21
                r = _slurm_size(nodes, per_node, max(3, reps // 3) if quick else reps)
                rows.append(r)
                print(f"  {nodes:>6} nodes x {per_node}: TF {r['tensorflow_ms']:8.2f} ms, ours "
                      f"{r['mpi_resolver_ms']:8.2f} ms ({r['ratio']:.2f}), CLI path "
                      f"{r['cli_path_ms']:.2f} ms, same spec: {r['same_spec']}", flush=True)
    finally:
        os.environ.clear()
        os.environ.update(saved)
    return rows


def _wall(args: List[str], env: Dict[str, str], reps: int) -> float:
    times = []
    for _ in range(reps):
        start = time.perf_counter()
        proc = subprocess.run(args, capture_output=True, text=True, timeout=300, env=env)
        times.append(time.perf_counter() - start)
        if proc.returncode != 0:
            raise RuntimeError(f"{' '.join(args)} failed: {proc.stdout[-500:]}"
                               f"{proc.stderr[-1500:]}")
    return statistics.median(times)


def bench_startup(quick: bool, skip_slurm: bool) -> Dict[str, Any]:
    """4. `mpi-resolver check` under srun -n4 --mpi=pmix vs importing mpi4py there; imports."""
    out: Dict[str, Any] = {}
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    reps = 3 if quick else 7
    timer = ("import sys, time; t = time.perf_counter(); import {mod}; "
             "print(time.perf_counter() - t, 'tensorflow' in sys.modules, "
             "'mpi4py' in sys.modules)")
    ours, theirs = [], []
    for _ in range(reps):
        ours.append(subprocess.run([PY, "-c", timer.format(mod="mpi_resolver")], env=env,
                                   capture_output=True, text=True, check=True).stdout.split())
    for _ in range(1 if quick else max(3, reps // 2)):  # 4-5 CPU-s each (TensorFlow's import)
        theirs.append(subprocess.run(
            [PY, "-c", timer.format(mod="tensorflow.python.distribute.cluster_resolver."
                                        "slurm_cluster_resolver")],
            env=dict(env, **QUIET), capture_output=True, text=True, check=True).stdout.split())
    ours_s = statistics.median(float(o[0]) for o in ours)
    theirs_s = statistics.median(float(t[0]) for t in theirs)
    out.update({"import_mpi_resolver_s": ours_s, "import_tf_resolver_s": theirs_s,
                "imports_tensorflow": any(o[1] == "True" for o in ours),
                "imports_mpi4py": any(o[2] == "True" for o in ours)})
    print(f"  import mpi_resolver: {1000 * ours_s:.1f} ms (imports TensorFlow: "
          f"{out['imports_tensorflow']}, mpi4py: {out['imports_mpi4py']}); TensorFlow's "
          f"resolver module: {theirs_s:.2f} s", flush=True)
    if skip_slurm:
        return out
    from tests.harness.slurm_cluster import SlurmCluster

    with SlurmCluster(nodes=("node1",)) as cluster:
        cenv = dict(cluster.env, PYTHONPATH=str(ROOT), **QUIET)
        base = ["srun", "-N1", "-n4", "--mpi=pmix"]
        mpi4py_s = _wall(base + [PY, "-c", "from mpi4py import MPI"], cenv, reps)
        check_s = _wall(base + [PY, "-m", "mpi_resolver", "check", "--gpus-per-node", "0"],
                        cenv, reps)
    out.update({"srun_mpi4py_import_s": mpi4py_s, "srun_check_s": check_s,
                "check_overhead_s": check_s - mpi4py_s})
    print(f"  srun -n4 --mpi=pmix: mpi-resolver check {check_s:.2f} s, python -c 'from mpi4py "
          f"import MPI' {mpi4py_s:.2f} s: +{check_s - mpi4py_s:.2f} s", flush=True)
    return out


MEMORY_WORKER = r'''
import os, resource, sys, tracemalloc
sys.path.insert(0, sys.argv[1])
os.environ.update(__ENV__)
import tensorflow as tf
from mpi_resolver import MPIClusterResolver
if sys.argv[2] == "ours":
    cls = MPIClusterResolver
else:
    cls = tf.distribute.cluster_resolver.SlurmClusterResolver
kw = {"source": "slurm"} if sys.argv[2] == "ours" else {}
tracemalloc.start()
resolver = cls(**kw)
spec = resolver.cluster_spec()
current, peak = tracemalloc.get_traced_memory()
tracemalloc.stop()
print(peak / 2 ** 20, current / 2 ** 20, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
'''


def bench_memory(nodes: int = 100000, per_node: int = 4) -> Dict[str, Any]:
    """5. Peak memory of one resolution at ``nodes`` nodes: Python allocations (tracemalloc
    peak and what stays allocated) and the process's peak resident set (MiB)."""
    out: Dict[str, Any] = {"nodes": nodes, "tasks_per_node": per_node}
    code = MEMORY_WORKER.replace("__ENV__", repr(slurm_env(nodes, per_node)))
    for mode, name in (("ours", "mpi_resolver"), ("tf", "tensorflow")):
        proc = subprocess.run([PY, "-c", code, str(ROOT), mode], capture_output=True,
                              text=True, timeout=600, env=dict(os.environ, **QUIET))
        if proc.returncode != 0:
            raise RuntimeError(proc.stderr[-1500:])
        peak, kept, rss = (float(v) for v in proc.stdout.split()[-3:])
        out.update({f"{name}_peak_mib": peak, f"{name}_kept_mib": kept,
                    f"{name}_process_peak_rss_mib": rss})
    out["ratio"] = out["mpi_resolver_peak_mib"] / out["tensorflow_peak_mib"]
    print(f"  {nodes} nodes x {per_node}: peak allocated during resolution: ours "
          f"{out['mpi_resolver_peak_mib']:.1f} MiB, TF {out['tensorflow_peak_mib']:.1f} MiB; "
          f"process peak RSS: ours {out['mpi_resolver_process_peak_rss_mib']:.0f} MiB, TF "
          f"{out['tensorflow_process_peak_rss_mib']:.0f} MiB", flush=True)
    return out


def machine() -> Dict[str, Any]:
    cpu = ""
    try:
        cpu = next(ln.split(":", 1)[1].strip() for ln in open("/proc/cpuinfo")
                   if ln.startswith("model name"))
    except (OSError, StopIteration):
        pass
    import tensorflow as tf

    return {"cpu": cpu, "cores": os.cpu_count(), "python": platform.python_version(),
            "tensorflow": tf.__version__, "kernel": platform.release(),
            "memory_gib": round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
                                / 2 ** 30, 1),
            "date": time.strftime("%Y-%m-%d %H:%M:%S %Z")}


def _resolution_rows(results: Dict[str, Any]) -> List[str]:
    """Returns the table's rows of the resolutions: from Slurm's variables at each size, the
    CLI's path, under mpirun, and the nvidia-smi count."""
    rows = []
    for r in results["slurm_sizes"]:
        target = "<= 0.6" if (r["nodes"], r["tasks_per_node"]) == (10000, 4) else "<= 1.0"
        limit = 0.6 if target == "<= 0.6" else 1.0
        rows.append(f"| Slurm vars, {r['nodes']} nodes x {r['tasks_per_node']} | "
                    f"{r['mpi_resolver_ms']:.2f} ms | {r['tensorflow_ms']:.2f} ms | "
                    f"{r['ratio']:.2f} | {target} | {'yes' if r['ratio'] <= limit else 'NO'} |")
    for r in results["slurm_sizes"]:
        if (r["nodes"], r["tasks_per_node"]) == (10000, 4):
            rows.append(f"| CLI path (no TF object), 10000 x 4 | {r['cli_path_ms']:.2f} ms | - |"
                        f" - | < 20 ms | {'yes' if r['cli_path_ms'] < 20 else 'NO'} |")
    # source='mpi': Idup, the verdict, the host table and its names, the GPU reduction
    # (_exchange.py); the count must not grow with the job (benchmarks/exchange.py up to 64).
    for r in results["mpi"]:
        rows.append(f"| mpirun -n {r['ranks']}: constructor to ClusterSpec | "
                    f"{r['mpi_resolver_ms']:.1f} ms, {r['collectives']} collectives | "
                    f"{r['tensorflow_ms']:.1f} ms (Slurm vars) | {r['ratio']:.2f} | "
                    f"5 collectives | {'yes' if r['collectives'] == 5 else 'NO'} |")
    g = results["gpu_probes"]
    probe_ratio = g['mpi_resolver_calls'] / max(1, g['tensorflow_calls'])
    rows.append(f"| nvidia-smi runs, 4 ranks on 1 node | {g['mpi_resolver_calls']} | "
                f"{g['tensorflow_calls']} | {probe_ratio:.2f}"
                f" | once per node | {'yes' if g['mpi_resolver_calls'] == 1 else 'NO'} |")
    return rows


def _process_rows(results: Dict[str, Any]) -> List[str]:
    """Returns the table's rows of the imports, srun's start-up and the memory."""
    s = results["startup"]
    no_tf = not s["imports_tensorflow"]
    rows = [f"| import mpi_resolver | {1000 * s['import_mpi_resolver_s']:.1f} ms, "
            f"{'no TF' if no_tf else 'imports TF'} | "
            f"{1000 * s['import_tf_resolver_s']:.0f} ms | "
            f"{s['import_mpi_resolver_s'] / s['import_tf_resolver_s']:.4f} | no TF import | "
            f"{'yes' if no_tf else 'NO'} |"]
    if "srun_check_s" in s:
        rows.append(f"| srun -n4 --mpi=pmix: mpi-resolver check | {s['srun_check_s']:.2f} s | "
                    f"{s['srun_mpi4py_import_s']:.2f} s (mpi4py import) | "
                    f"+{s['check_overhead_s']:.2f} s | within 0.3 s | "
                    f"{'yes' if s['check_overhead_s'] <= 0.3 else 'NO'} |")
    m = results.get("memory")
    if m:
        rows.append(f"| peak memory of resolution, {m['nodes']} nodes x {m['tasks_per_node']} "
                    f"(tracemalloc) | {m['mpi_resolver_peak_mib']:.1f} MiB | "
                    f"{m['tensorflow_peak_mib']:.1f} MiB | {m['ratio']:.2f} | reported | - |")
        ours_rss, tf_rss = (m['mpi_resolver_process_peak_rss_mib'],
                            m['tensorflow_process_peak_rss_mib'])
        rows.append(f"| process peak RSS (TensorFlow imported), same job | "
                    f"{ours_rss:.0f} MiB | {tf_rss:.0f} MiB | {ours_rss / tf_rss:.2f}"
                    f" | reported | - |")
    return rows


def table(results: Dict[str, Any]) -> str:
    """Returns the results as a Markdown table with targets."""
    return "\n".join(["| measure | mpi_resolver | TensorFlow | ratio | target | met |",
                      "|---|---|---|---|---|---|", *_resolution_rows(results),
                      *_process_rows(results)])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer sizes and repetitions")
    parser.add_argument("--skip-slurm", action="store_true",
                        help="skip the srun start-up figures (no throw-away Slurm cluster)")
    args = parser.parse_args()
    for key, value in QUIET.items():
        os.environ.setdefault(key, value)
    results: Dict[str, Any] = {"machine": machine()}
    print("1. resolution from Slurm variables (construct + cluster_spec, median)", flush=True)
    results["slurm_sizes"] = bench_slurm_sizes(args.quick)
    print("2. MPI path under mpirun", flush=True)
    results["mpi"] = bench_mpi(args.quick)
    print("3. GPU probes", flush=True)
    results["gpu_probes"] = bench_gpu_probes()
    print("4. start-up", flush=True)
    results["startup"] = bench_startup(args.quick, args.skip_slurm)
    if not args.quick:
        print("5. memory", flush=True)
        results["memory"] = bench_memory()
    md = table(results)
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "latest.json").write_text(json.dumps(results, indent=2))
    m = results["machine"]
    (RESULTS / "latest.md").write_text(
        f"Measured {m['date']} on {m['cpu']} ({m['cores']} cores, {m['memory_gib']} GiB), "
        f"Python {m['python']}, TensorFlow {m['tensorflow']}.\n\n{md}\n")
    print()
    print(f"machine: {m['cpu']}, {m['cores']} cores, {m['memory_gib']} GiB, Python "
          f"{m['python']}, TensorFlow {m['tensorflow']}")
    print(md)
    print(f"\nwritten: {RESULTS / 'latest.json'} and latest.md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
