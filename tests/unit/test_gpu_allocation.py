"""_gpu_allocation: the rules that give each rank its GPUs from every rank's list (pure)."""

from __future__ import annotations

import pytest

from mpi_resolver._gpu_allocation import allocate_nodes, allocate_own, allocate_uniform, describe
from mpi_resolver._gpu_lists import SlurmGpus

pytestmark = pytest.mark.unit


def test_allocate_nodes_shares_one_object_for_nodes_alike():
    lists = {f"n{i}": [("0", "1")] * 2 for i in range(1000)}
    gpus = allocate_nodes(lists, None)
    assert len({id(node) for node in gpus.nodes.values()}) == 1
    assert gpus.at("n999", 1) == (("1",), "divided")


def test_allocate_uniform_and_own_and_describe():
    uniform = allocate_uniform(("0", "1", "2", "3"), {"a": 2, "b": 1}, None)
    assert uniform.per_task == 2
    assert [uniform.at("a", 1), uniform.at("b", 0)] == [(("2", "3"), "divided"),
                                                        (("0", "1"), "divided")]
    own = allocate_own(("5",), "a", 1, 2, SlurmGpus(bind="single:1"), None)
    assert [own.at("a", 0), own.at("a", 1), own.at("b", 0)] == [
        (None, "unknown"), (("5",), "own"), (None, "unknown")]
    assert describe(["own", "unknown"], "single:1") == (
        "each task keeps the GPUs Slurm bound to it; other tasks' GPUs unknown without MPI "
        "(each keeps what Slurm bound to it) (Slurm: SLURMD_TRES_BIND=gpu:single:1)")
    assert describe(["divided"], None) == "each node's GPUs divided among its tasks in rank order"


