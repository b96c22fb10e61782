"""Benchmarks 2 and 3 of bench.py, under a real mpirun: the MPI path's time to a ClusterSpec
and its collective calls against TensorFlow's resolver from Slurm's variables, and how often
nvidia-smi runs on a node of 4 ranks (ours: once per node; TensorFlow's: once per rank)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, Dict, List, Optional

ROOT = Path(__file__).resolve().parent.parent
PY = sys.executable
#: The ranks' threads and TensorFlow's log level (bench.py sets them for itself too).
QUIET = {"TF_CPP_MIN_LOG_LEVEL": "3", "OMP_NUM_THREADS": "1", "TF_NUM_INTRAOP_THREADS": "1",
         "TF_NUM_INTEROP_THREADS": "1"}


#: A rank of the MPI benchmarks. Modes: "tf", TensorFlow's resolver from Slurm's variables;
#: "ours", MPIClusterResolver over MPI; "resolution", the same resolution without TensorFlow
#: (resolve_process, what MPIClusterResolver calls: nvidia-smi runs there, and the ranks need
#: not import TensorFlow only to be counted).
MPI_WORKER = r'''
import json, os, sys, time
sys.path.insert(0, sys.argv[1])
mode = sys.argv[2]
if mode != "resolution":
    import tensorflow as tf
from mpi4py import MPI
from tests.mpi.counting import CountingComm
comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
smi_calls = sys.argv[3] if len(sys.argv) > 3 else None
if mode == "tf":
    import socket
    os.environ.update({"SLURM_PROCID": str(rank), "SLURM_STEP_NUM_TASKS": str(size),
        "SLURM_STEP_NODELIST": socket.gethostname(), "SLURM_STEP_TASKS_PER_NODE": str(size)})
comm.Barrier()
start = time.perf_counter()
counting = None if mode == "tf" else CountingComm(comm)
if mode == "resolution":
    from mpi_resolver.options import make_options
    from mpi_resolver.resolve.this_process import narrow, resolve_process
    res = resolve_process(make_options(source="mpi", env=os.environ), comm=counting)
    narrow(res); res.cluster(); narrow(res); res.cluster()
else:
    if mode == "tf":
        resolver = tf.distribute.cluster_resolver.SlurmClusterResolver()
    else:
        from mpi_resolver import MPIClusterResolver
        resolver = MPIClusterResolver(comm=counting, source="mpi")
    resolver.cluster_spec(); resolver.master(); resolver.cluster_spec()
    resolver.num_accelerators()
elapsed = time.perf_counter() - start
times = comm.gather(elapsed, root=0)
if rank == 0:
    calls = len(open(smi_calls).read().split()) if smi_calls and os.path.exists(smi_calls) else 0
    sys.stdout.write(json.dumps({"max_ms": max(times) * 1000, "median_ms":
        sorted(times)[len(times) // 2] * 1000, "collectives": None if counting is None else
        len(counting.collectives), "nvidia_smi_calls": calls}) + "\n")
'''


def mpirun_env(extra: Optional[Dict[str, str]] = None) -> Dict[str, str]:
    """Returns the environment of a benchmark's `mpirun` without Slurm: this one without Slurm's
    and MPI's variables, QUIET, Open MPI as root and oversubscribed, ``extra`` last."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("SLURM_", "SLURMD_", "PMI_", "PMIX_", "OMPI_COMM"))}
    env.update(QUIET)
    env.update({"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
                "OMPI_MCA_rmaps_base_oversubscribe": "1",
                "OMPI_MCA_hwloc_base_binding_policy": "none", "PYTHONPATH": str(ROOT)})
    env.update(extra or {})
    return env


def _mpi_run(n: int, mode: str, env: Dict[str, str], calls: Optional[str] = None) -> Dict:
    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as f:
        f.write(MPI_WORKER)
    try:
        args = ["mpirun", "-n", str(n), PY, f.name, str(ROOT), mode] + ([calls] if calls else [])
        proc = subprocess.run(args, capture_output=True, text=True, timeout=600, env=env)
    finally:
        os.unlink(f.name)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if proc.returncode != 0 or not lines:
        raise RuntimeError(f"mpirun -n {n} {mode} failed: {proc.stdout[-800:]}"
                           f"{proc.stderr[-1500:]}")
    return json.loads(lines[-1])


def bench_mpi(quick: bool) -> List[Dict[str, Any]]:
    """2. The MPI path under a real mpirun: time to ClusterSpec and collective calls."""
    rows = []
    for n in (2,) if quick else (2, 4, 8):  # --quick: each rank imports TensorFlow
        env = mpirun_env({"CUDA_VISIBLE_DEVICES": ",".join(map(str, range(n)))})
        ours = _mpi_run(n, "ours", env)
        theirs = _mpi_run(n, "tf", env)
        rows.append({"ranks": n, "mpi_resolver_ms": ours["median_ms"],
                     "mpi_resolver_max_ms": ours["max_ms"], "tensorflow_ms": theirs["median_ms"],
                     "ratio": ours["median_ms"] / theirs["median_ms"],
                     "collectives": ours["collectives"]})
        print(f"  mpirun -n {n}: ours {ours['median_ms']:.1f} ms (slowest rank "
              f"{ours['max_ms']:.1f} ms) with {ours['collectives']} collective(s); TF (Slurm "
              f"variables, no MPI) {theirs['median_ms']:.1f} ms",
              flush=True)
    return rows


def bench_gpu_probes() -> Dict[str, Any]:
    """3. nvidia-smi calls on one node with 4 ranks: ours (once per node) vs TF (per rank).
    Ours without TensorFlow ("resolution"): the count is the resolution's, and the class's
    own ranks gave the same (1 call, 5 collectives) in 12.1 s against 1.1 s (2026-11-30)."""
    out = {}
    with tempfile.TemporaryDirectory() as tmp:
        smi = Path(tmp) / "nvidia-smi"
        for mode in ("resolution", "tf"):
            calls = Path(tmp) / f"calls-{mode}"
            smi.write_text(f"#!/bin/sh\necho x >> {calls}\n" +
                           "".join(f"echo 'GPU {i}: Fake GPU (UUID: GPU-{i})'\n"
                                   for i in range(4)))
            smi.chmod(0o755)
            env = mpirun_env({"PATH": f"{tmp}:{os.environ['PATH']}"})
            env.pop("CUDA_VISIBLE_DEVICES", None)
            out[mode] = _mpi_run(4, mode, env, str(calls))["nvidia_smi_calls"]
    print(f"  4 ranks on 1 node: nvidia-smi ran {out['resolution']} time(s) for mpi_resolver, "
          f"{out['tf']} for TensorFlow", flush=True)
    return {"ranks_per_node": 4, "nodes": 1, "mpi_resolver_calls": out["resolution"],
            "tensorflow_calls": out["tf"]}
