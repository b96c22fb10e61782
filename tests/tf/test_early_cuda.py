"""CUDA started before this rank's CUDA_VISIBLE_DEVICES was set: TensorFlow for real, in a
fresh process each (its devices are listed once per process), and a stand-in libcuda.so
loaded as a CUDA-aware MPI's MPI_Init would load it."""

from __future__ import annotations

import ctypes.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.tf
ROOT = Path(__file__).resolve().parents[2]

SCRIPT = """
import json, os, sys
os.environ.update(json.loads(sys.argv[1]))
import tensorflow as tf
from mpi_resolver import MPIClusterResolver
order = sys.argv[2]
if order == "tf-lists-first":
    tf.config.list_physical_devices("GPU")
if order == "cuda-first":
    import ctypes
    ctypes.CDLL(sys.argv[3])
try:
    resolver = MPIClusterResolver(source="slurm")
    if order == "resolver-first":
        tf.config.list_physical_devices("GPU")
    resolver.cluster_spec()
    print(json.dumps({"visible": os.environ.get("CUDA_VISIBLE_DEVICES")}))
except Exception as e:
    print(json.dumps({"error": type(e).__name__, "message": str(e)}))
"""
STEP = {"SLURM_PROCID": "1", "SLURM_STEP_NUM_TASKS": "2", "SLURM_STEP_NODELIST": "n1",
        "SLURM_STEP_TASKS_PER_NODE": "2", "SLURMD_NODENAME": "n1", "SLURM_LOCALID": "1",
        "SLURM_GTIDS": "0,1", "PATH": "/usr/bin:/bin"}
FOUR = {**STEP, "CUDA_VISIBLE_DEVICES": "0,1,2,3"}
ONE_TASK = {**STEP, "SLURM_PROCID": "0", "SLURM_LOCALID": "0", "SLURM_STEP_NUM_TASKS": "1",
            "SLURM_STEP_TASKS_PER_NODE": "1", "SLURM_GTIDS": "0", "CUDA_VISIBLE_DEVICES": "0"}


@pytest.fixture(scope="module")
def libcuda(tmp_path_factory) -> str:
    """A stand-in libcuda.so.1: a copy of the C maths library under CUDA's driver's name."""
    found = ctypes.util.find_library("m")
    source = next(p for p in ("/lib/x86_64-linux-gnu/libm.so.6", "/usr/lib64/libm.so.6",
                              f"/lib/{found}") if os.path.exists(p))
    target = tmp_path_factory.mktemp("cuda") / "libcuda.so.1"
    shutil.copy(source, target)
    return str(target)


def run(env, order, libcuda=""):
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM", "CUDA", "OMPI",
                                                                        "PMI"))}
    proc = subprocess.run([sys.executable, "-c", SCRIPT, json.dumps(env), order, libcuda],
                          capture_output=True, text=True, timeout=120, cwd=ROOT,
                          env={**clean, "TF_CPP_MIN_LOG_LEVEL": "3",
                               "PYTHONPATH": str(ROOT)})
    lines = [x for x in proc.stdout.splitlines() if x.startswith("{")]
    assert proc.returncode == 0 and len(lines) == 1, proc.stdout + proc.stderr[-3000:]
    return json.loads(lines[0])


@pytest.mark.parametrize("env, order, expected", [
    pytest.param(FOUR, "tf-lists-first", "TensorFlow already listed this process's devices",
                 id="TensorFlow listed the GPUs first: an error naming the fix"),
    pytest.param(FOUR, "resolver-first", {"visible": "2,3"},
                 id="the resolver first, then listing: narrowed in time"),
    pytest.param(STEP, "tf-lists-first", {"visible": ""},
                 id="a CPU-only node: nothing to narrow, no error"),
    pytest.param(ONE_TASK, "tf-lists-first", {"visible": "0"},
                 id="the variable already as wanted: no error"),
    pytest.param(FOUR, "cuda-first", "CUDA is already loaded in this process (libcuda.so",
                 id="libcuda loaded first (a CUDA-aware MPI_Init): an error"),
    pytest.param(STEP, "cuda-first", {"visible": ""},
                 id="libcuda loaded on a CPU-only node: no error"),
])
def test_cuda_started_before_the_narrowing(libcuda, env, order, expected):
    got = run(env, order, libcuda)
    if isinstance(expected, dict):
        assert got == expected
        return
    assert got["error"] == "ResolutionError", got
    assert got["message"].startswith(expected), got
    assert "before this rank's GPUs were set (CUDA_VISIBLE_DEVICES='2,3')" in got["message"]
    assert "Create MPIClusterResolver before anything lists or configures GPUs" in got["message"]
    assert "mpi-resolver exec -- python train.py" in got["message"]


@pytest.mark.parametrize("tf_listed, cuda, expected", [
    pytest.param(False, False, "1", id="CUDA not started: set before MPI_Init"),
    pytest.param(False, True, "0,1,2,3",
                 id="libcuda loaded already: left as CUDA saw it, so that the check compares"),
    pytest.param(True, False, "0,1,2,3", id="TensorFlow listed its devices: left as it was"),
])
def test_gpus_set_before_mpi_only_where_cuda_has_not_started(monkeypatch, tf_listed, cuda,
                                                             expected):
    from tensorflow.python.eager import context

    from mpi_resolver.resolve import this_process, tf_resolver

    monkeypatch.setattr(context.context(), "_physical_devices",
                        [] if tf_listed else None, raising=False)
    monkeypatch.setattr(this_process, "cuda_loaded", lambda: cuda)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1,2,3")
    monkeypatch.setattr(this_process, "_narrowed", {})
    this_process._set_before_mpi(("1",), tf_resolver._cuda_started)
    assert os.environ["CUDA_VISIBLE_DEVICES"] == expected
