"""_exchange: the steps of the MPI exchange, run by every rank of a fake world (threads) that
behaves as MPI does (tests/unit/jobs.py): which collectives each path takes, what each rank's
buffers receive, and that every path gives the same answer."""

from __future__ import annotations

from typing import List

import pytest

from mpi_resolver import _exchange
from mpi_resolver._errors import ResolutionError
from tests.unit.envs import BLOCK
from tests.unit.jobs import FakePorts, run_world, srun_env

pytestmark = pytest.mark.unit

TWO_HOSTS = ["node1", "node1", "node2", "node2"]
SPEC = {"worker": ["node1:8888", "node1:8889", "node2:8888", "node2:8889"]}


def mpirun_envs(hosts: List[str]) -> List[dict]:
    """What Open MPI's mpirun gives each rank (no Slurm)."""
    return [{"OMPI_COMM_WORLD_RANK": str(r), "OMPI_COMM_WORLD_SIZE": str(len(hosts)),
             "OMPI_COMM_WORLD_LOCAL_RANK": str(hosts[:r].count(h))}
            for r, h in enumerate(hosts)]


def kinds(rank: int = 0) -> List[str]:
    return [k for k, _ in run_world.last.kinds[rank]]  # type: ignore[attr-defined]


def taken(rank: int = 0) -> List[int]:
    return [n for _, n in run_world.last.kinds[rank]]  # type: ignore[attr-defined]


def test_without_slurm_the_host_table_costs_12_bytes_a_rank_and_one_name_a_host():
    results = run_world(mpirun_envs(TWO_HOSTS), TWO_HOSTS, gpus_per_node=0)
    assert all(r.cluster() == SPEC and r.source == "mpi" for r in results), results
    for rank in range(4):
        assert kinds(rank) == ["allreduce", "allgather", "allgatherv", "allreduce"]
        # 11 numbers; (8 of hash + 4 of length + 4 of MPI's slot length) x 4; "node1node2"; 4
        assert taken(rank) == [88, 64, 10, 32]


def test_a_cross_checked_job_whose_placement_holds_costs_two_reductions():
    envs = [srun_env(r, ["node1", "node2"], [3, 1], BLOCK) for r in range(4)]
    results = run_world(envs, BLOCK, gpus_per_node=0)
    assert all(r.verified for r in results), results
    assert kinds(0) == kinds(3) == ["allreduce", "allreduce"]
    assert run_world.last.messages == [2, 2, 2, 0]  # records to node1's peers only


def test_details_gather_every_record_at_once():
    results = run_world(mpirun_envs(TWO_HOSTS), TWO_HOSTS, gpus_per_node=0, details=True)
    assert [r.records is not None for r in results] == [True] * 4
    assert all(r.cluster() == SPEC for r in results)
    assert kinds(2) == ["allgather"] and taken(2) == [(1024 + 4) * 4]


def test_one_rank_s_error_sends_every_rank_to_the_full_gather():
    envs = mpirun_envs(TWO_HOSTS)
    envs[3]["CUDA_VISIBLE_DEVICES"] = "zero"  # a malformed list: rank 3's own error
    results = run_world(envs, TWO_HOSTS)
    assert all(isinstance(r, ResolutionError) and "rank 3 on node2" in str(r)
               for r in results), results
    assert kinds(0) == ["allreduce", "allgather"]


def test_two_host_names_sharing_a_hash_fall_back_to_every_record(monkeypatch):
    """The host table names each host by an 8-byte hash; where two names share one (forced
    here), the second reduction says so and every rank gathers every record: the same spec."""
    monkeypatch.setattr(_exchange, "host_hash", lambda host: b"\x01" * 8)
    results = run_world(mpirun_envs(TWO_HOSTS), TWO_HOSTS, gpus_per_node=0)
    assert all(r.cluster() == SPEC for r in results), results
    assert kinds(1) == ["allreduce", "allgather", "allgatherv", "allreduce", "allgather"]


def test_auto_ports_where_one_rank_moved_gather_two_bytes_a_rank():
    envs = [srun_env(r, ["node1", "node2"], [3, 1], BLOCK) for r in range(4)]
    first = run_world(envs, BLOCK, gpus_per_node=0, port_base="auto")[0].layout.addresses
    busy = int(first[0].rsplit(":", 1)[1])
    results = run_world(envs, BLOCK, gpus_per_node=0, port_base="auto",
                        ports=FakePorts({"node1": {busy}}))
    spec = results[0].cluster()
    assert all(r.cluster() == spec for r in results)
    assert spec["worker"][0] != first[0] and spec["worker"][1:] == first[1:]
    assert kinds(0) == ["allreduce", "allreduce", "allgather"] and taken(0)[-1] == (2 + 4) * 4


def test_a_host_name_with_undecodable_bytes_is_reported_not_a_crash():
    """socket.gethostname() decodes undecodable bytes as lone surrogates: the exchange carries
    them (surrogateescape) and the host name check names the rank."""
    hosts = ["n\udcff1", "n\udcff1", "node2", "node2"]
    results = run_world(mpirun_envs(hosts), hosts, gpus_per_node=0)
    for r in results:
        assert type(r).__name__ == "FormatError", r
        assert "host name of MPI rank 0" in str(r)
