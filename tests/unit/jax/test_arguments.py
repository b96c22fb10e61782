"""The pure part of the JAX edge (mpi_resolver.jax.arguments) as tables: which CUDA ordinals
JAX is given for each way Slurm (or the package) hands a task its GPUs, the CPU collectives,
the coordinator, the timeout and the version pin. No JAX needed: runs in the suite's .venv
(and under mutmut: scripts/mutation.sh)."""

from __future__ import annotations

import pytest

from mpi_resolver.core.errors import FormatError, ResolutionError
from mpi_resolver.jax.arguments import (TESTED_JAX, JaxArguments, check_rpc_layer,
                                        cpu_collectives, detection_supported,
                                        initialization_timeout, jax_arguments,
                                        local_device_ids)

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("own, visible, expected", [
    pytest.param((), None, None, id="no GPU, CVD unset: JAX keeps its CPU device"),
    pytest.param((), "", None, id="no GPU, CVD empty"),
    pytest.param(("0",), "0", (0,), id="--gpus-per-task=1, task 0 (CVD 0)"),
    pytest.param(("1",), "1", (0,), id="--gpus-per-task=1, task 1 (CVD 1): ordinal 0, JAX's "
                                       "own says [SLURM_LOCALID]=[1]"),
    pytest.param(("2", "3"), "2,3", (0, 1), id="--gpus-per-task=2, task 1 (CVD 2,3)"),
    pytest.param(("2", "3"), "0,1,2,3", (2, 3), id="--gpus-per-node=4, 2 tasks, task 1"),
    pytest.param(("1",), "1", (0,), id="--ntasks-per-gpu=2, tasks 2 and 3 (CVD 1, shared)"),
    pytest.param(("3",), "3", (0,), id="--gpu-bind=map_gpu:3,1, task 0"),
    pytest.param(("1", "3"), "3,1,2", (1, 0), id="the task's order, positions in CVD"),
    pytest.param(("2", "3"), None, (2, 3), id="CVD unset: indices are ordinals"),
    pytest.param(("GPU-b",), "GPU-a,GPU-b", (1,), id="UUIDs in CVD"),
    pytest.param(("1",), "1,-1,2", (0,), id="-1 ends CVD's list, as CUDA reads it"),
])
def test_local_device_ids(own, visible, expected) -> None:
    assert local_device_ids(own, visible) == expected


@pytest.mark.parametrize("own, visible, error, says", [
    pytest.param(("2",), "0,1", ResolutionError, ("GPUs 2 ", "CUDA_VISIBLE_DEVICES='0,1'",
                                                   "gpus_per_task"), id="a GPU not visible"),
    pytest.param(("0", "2"), "0", ResolutionError, ("GPUs 2 ",), id="one of two not visible"),
    pytest.param(("2", "3"), "0", ResolutionError, ("GPUs 2,3 of this task",),
                 id="two not visible, both named"),
    pytest.param(("GPU-a",), None, ResolutionError, ("UUID", "CUDA_VISIBLE_DEVICES is unset",
                                                     "set CUDA_VISIBLE_DEVICES"),
                 id="a UUID with CVD unset"),
    pytest.param(("GPU-a", "GPU-b"), None, ResolutionError, ("GPUs GPU-a,GPU-b are named",),
                 id="two UUIDs with CVD unset, both named"),
    pytest.param(("0",), "zero", FormatError, ("CUDA_VISIBLE_DEVICES='zero'",),
                 id="malformed CVD"),
])
def test_local_device_ids_refused(own, visible, error, says) -> None:
    with pytest.raises(error) as e:
        local_device_ids(own, visible)
    assert all(s in str(e.value) for s in says), str(e.value)


@pytest.mark.parametrize("own, expected", [
    pytest.param((), "gloo", id="CPU-only task: gloo"),
    pytest.param(("0",), None, id="a GPU: JAX's own collectives"),
])
def test_cpu_collectives(own, expected) -> None:
    assert cpu_collectives(own) == expected


@pytest.mark.parametrize("value, ok", [
    ("grpc", True), ("grpc+verbs", False), (None, False), ("", False)])
def test_check_rpc_layer(value, ok) -> None:
    if ok:
        check_rpc_layer(value)
        return
    with pytest.raises(ResolutionError, match=r"rpc_layer=.*gRPC only; pass rpc_layer='grpc'"):
        check_rpc_layer(value)


@pytest.mark.parametrize("timeout, expected", [
    (60.0, 60), (0.2, 1), (1.0, 1), (1.01, 2), (299.5, 300)])
def test_initialization_timeout(timeout, expected) -> None:
    assert initialization_timeout(timeout) == expected


ADDRESSES = ["node1:24410", "node1:24411", "node2:24410", "node2:24411"]


@pytest.mark.parametrize("rank, own, visible, auto_set_gpu, expected", [
    pytest.param(0, (), None, True, JaxArguments("node1:24410", 4, 0, None, "gloo", 60),
                 id="CPU rank 0"),
    pytest.param(3, (), None, True, JaxArguments("node1:24410", 4, 3, None, "gloo", 60),
                 id="CPU rank 3: coordinator is task 0's address"),
    pytest.param(1, ("1",), "1", True, JaxArguments("node1:24410", 4, 1, (0,), None, 60),
                 id="GPU rank bound by Slurm"),
    pytest.param(1, ("1",), "1", False, JaxArguments("node1:24410", 4, 1, None, None, 60),
                 id="auto_set_gpu=False: JAX sees every visible device"),
])
def test_jax_arguments(rank, own, visible, auto_set_gpu, expected) -> None:
    assert jax_arguments(addresses=ADDRESSES, rank=rank, own_gpus=own, visible=visible,
                         timeout=60.0, auto_set_gpu=auto_set_gpu) == expected


def test_jax_arguments_set_gpus_by_default() -> None:
    args = jax_arguments(addresses=ADDRESSES, rank=2, own_gpus=("3",), visible="2,3",
                         timeout=60.0)
    assert args.local_device_ids == (1,)


@pytest.mark.parametrize("rank", [-1, 4])
def test_jax_arguments_rank_outside(rank) -> None:
    with pytest.raises(ResolutionError, match=f"rank {rank} is outside the job's 4 tasks"):
        jax_arguments(addresses=ADDRESSES, rank=rank, own_gpus=(), visible=None, timeout=1.0)


@pytest.mark.parametrize("version, ok", [
    ("0.10.2", True), ("0.10.1", False), ("0.10.20", False), ("0.12.0", False), ("", False)])
def test_detection_supported(version, ok) -> None:
    assert TESTED_JAX == ("0.10.2",)
    assert detection_supported(version) is ok
