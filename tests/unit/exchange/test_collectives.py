"""_exchange: the steps of the MPI exchange, run by every rank of a fake world (threads) that
behaves as MPI does (tests/unit/jobs.py): which collectives each path takes, what each rank's
buffers receive, and that every path gives the same answer; then gather_facts alone, and
what each rank puts into the first reduction."""

from __future__ import annotations

from dataclasses import replace
from typing import Any, List

import pytest

from mpi_resolver.exchange import collectives as _exchange
from mpi_resolver.core.agreement import FirstReport, NodeSummary
from mpi_resolver.core.errors import ResolutionError
from mpi_resolver.exchange.collectives import MpiFacts, gather_facts
from mpi_resolver.exchange.records import RankRecord
from tests.unit.envs import BLOCK
from tests.unit.jobs import FakePorts, ThreadWorld, each_rank, run_world, srun_env

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
        # 11 numbers; (8 of hash + 4 of length + 4 of MPI's slot length) x 4; "node1node2"; 6
        assert taken(rank) == [88, 64, 10, 48]


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


@pytest.mark.parametrize("hosts", [
    pytest.param(TWO_HOSTS, id="names of one length"),
    pytest.param(["node1", "node1", "n2", "n2"], id="names of two lengths: the hash alone names"),
])
def test_two_host_names_sharing_a_hash_fall_back_to_every_record(monkeypatch, hosts):
    """The host table names each host by its 8-byte hash alone; where two names share one
    (forced here), the second reduction says so and every rank gathers every record."""
    monkeypatch.setattr(_exchange, "host_hash", lambda host: b"\x01" * 8)
    results = run_world(mpirun_envs(hosts), hosts, gpus_per_node=0)
    spec = {"worker": [f"{h}:{8888 + r % 2}" for r, h in enumerate(hosts)]}
    assert all(r.cluster() == spec for r in results), results
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


# gather_facts itself, on every rank of a ThreadWorld: what each rank learns on each path.

FOUR = ["node1", "node1", "node2", "node2"]
HALVES = [("node1", 2), ("node2", 2)]


def by_size(node: List[RankRecord]) -> NodeSummary:
    """A node's summary: its number of ranks as GPUs per task, fewest and most; no problem."""
    return NodeSummary(per_task=len(node), fewest=len(node), most=len(node), problem=False)


def gather_world(hosts: List[str], summary=by_size, **kwargs: Any) -> List[Any]:
    """Runs gather_facts on every rank (plan 'mpi', outside a step, on ``hosts``); each
    node's summary is ``summary(its records)``."""
    world = ThreadWorld(len(hosts))

    def one(rank: int) -> Any:
        record = RankRecord(rank=rank, size=len(hosts), host=hosts[rank], launcher=None,
                            plan="mpi")
        return gather_facts(world.transport(rank), record, node_summary=summary, **kwargs)

    return each_rank(len(hosts), one)


@pytest.mark.parametrize("hosts, slurm_runs, details, gathered, per_task, counts", [
    pytest.param(FOUR, None, True, "records", None, None, id="details: every record"),
    pytest.param(FOUR, None, False, "hosts", 2, (2, 2), id="without Slurm: the host table"),
    pytest.param(FOUR, HALVES, False, None, 2, (2, 2),
                 id="Slurm's placement holds: nothing gathered"),
    pytest.param(["node1", "node2", "node1", "node2"], HALVES, False, "hosts", 2, (2, 2),
                 id="Slurm's placement fails on some ranks: the host table"),
    pytest.param(["node1", "node2", "node2", "node2"], None, False, "hosts", 1, (1, 3),
                 id="the smallest node's GPUs per task, the fewest and most of any node"),
])
def test_each_rank_learns_its_rank_the_size_and_its_node_s_records(
        hosts, slurm_runs, details, gathered, per_task, counts):
    facts = gather_world(hosts, slurm_runs=slurm_runs, details=details)
    records = [RankRecord(rank=r, size=4, host=h, launcher=None, plan="mpi")
               for r, h in enumerate(hosts)]
    for rank, got in enumerate(facts):
        assert got == MpiFacts(
            rank=rank, size=4, records=records if gathered == "records" else None,
            hosts=hosts if gathered else None,
            node=[r for r in records if r.host == hosts[rank]], per_task=per_task,
            counts=counts)


@pytest.mark.parametrize("fewest_on_node2, gathers", [
    pytest.param(0, True, id="ranks with GPUs and ranks without: every record, to name them"),
    pytest.param(1, False, id="every rank with some: nothing more"),
])
def test_ranks_with_gpus_and_without_gather_every_record(fewest_on_node2, gathers):
    def summary(node):
        fewest = fewest_on_node2 if node[0].host == "node2" else 2
        return NodeSummary(per_task=1, fewest=fewest, most=2, problem=False)

    for got in gather_world(FOUR, summary=summary, slurm_runs=HALVES, details=False):
        assert (got.records is not None) is gathers, got
        assert got.counts == (None if gathers else (1, 2))


# What a rank puts into the first reduction (_first_report), field by field.

TASK = RankRecord(rank=1, size=4, host="node1", launcher="pmix", procid="1", num_tasks="4",
                  step="00c0ffee", plan="slurm+check")
REPORT = FirstReport(plan=1, step=0xC0FFEE, own_checks_ok=True, no_error=True, placed=True,
                     picked_port=False, aimed_base=-1)


@pytest.mark.parametrize("change, runs, aimed_base, expected", [
    pytest.param({}, HALVES, None, {}, id="a checked task where Slurm puts it"),
    pytest.param(dict(host="node2"), HALVES, None, dict(own_checks_ok=False, placed=False),
                 id="Slurm's runs put it on another node: its own check fails"),
    pytest.param(dict(host="node2", plan="slurm"), HALVES, None,
                 dict(plan=0, placed=False), id="an unchecked plan: no own check"),
    pytest.param(dict(host="node2"), [("node1", 3)], None, dict(placed=False),
                 id="runs of another size say nothing of where it runs"),
    pytest.param(dict(procid=None, num_tasks=None, step=None, plan="mpi"), None, None,
                 dict(plan=2, step=-1, placed=False), id="outside a step: step -1"),
    pytest.param(dict(procid=None, num_tasks=None, step=None, plan="mpi+check"), None, None,
                 dict(plan=3, step=-1, own_checks_ok=False, placed=False),
                 id="a check outside a step fails"),
    pytest.param(dict(plan=None), HALVES, None, dict(plan=4), id="no plan: no check"),
    pytest.param(dict(port=20001), HALVES, 20000, dict(picked_port=True, aimed_base=20000),
                 id="a picked port and the base it aims at"),
    pytest.param(dict(error="failed"), HALVES, None, dict(no_error=False), id="an error"),
])
def test_the_first_report_says_what_this_rank_s_record_says(change, runs, aimed_base,
                                                             expected):
    report = _exchange._first_report(replace(TASK, **change), 4, runs, aimed_base)
    assert report == replace(REPORT, **expected)


def test_gather_json_gives_every_rank_everyone_s_data_in_compact_json():
    """Two collectives: 4 bytes (and MPI's 4 of length) from each rank, then each rank's JSON
    without blanks."""
    world = ThreadWorld(3)
    data = [{"rank": r, "seen": [r, "x" * r]} for r in range(3)]
    got = each_rank(3, lambda r: _exchange.gather_json(world.transport(r), data[r]))
    assert got == [data] * 3
    texts = [f'{{"rank":{r},"seen":[{r},"{"x" * r}"]}}' for r in range(3)]
    assert world.kinds[0] == [("allgather", 8 * 3), ("allgatherv", sum(map(len, texts)))]
