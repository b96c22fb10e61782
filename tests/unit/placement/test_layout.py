"""Placements and the layout built from them: addresses and tasks of every rank."""

from __future__ import annotations

import pytest

from mpi_resolver.core.errors import FormatError, MismatchError, ResolutionError
from mpi_resolver.placement.layout import (
    build_layout_runs,
    check_own_placement,
    expand_runs,
    host_of_rank,
    mpi_runs,
    runs_of,
    slurm_placement,
    tf_runs,
)

pytestmark = pytest.mark.unit


def build_layout(placement, **kwargs):
    """The layout of a per-rank placement."""
    return build_layout_runs(runs_of(placement), **kwargs)


# --------------------------------------------------------------------------------------------
# tf_runs and slurm_placement
# --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("task_configuration, expected", [
    pytest.param({"n1": 2, "n2": 1}, ["n1", "n1", "n2"], id="ranks are packed onto each host"),
    pytest.param({"n9": 1, "n10": 1}, ["n10", "n9"],
                 id="hosts sort as strings, so n10 comes before n9"),
    pytest.param({"b": 1, "a": 2}, ["a", "a", "b"], id="the dict's order does not matter"),
    pytest.param({"n1": 3}, ["n1", "n1", "n1"], id="one host takes every rank"),
])
def test_tf_runs(task_configuration, expected):
    assert expand_runs(tf_runs(task_configuration)) == expected


@pytest.mark.parametrize("hosts, counts, distribution, expected", [
    pytest.param(["h1", "h2"], [3, 1], "block", ["h1", "h1", "h1", "h2"],
                 id="block fills each node in turn"),
    pytest.param(["n9", "n10"], [1, 1], "block", ["n9", "n10"],
                 id="block keeps the node list order, not string order"),
    pytest.param(["h2", "h1"], [2, 1], "block", ["h2", "h2", "h1"],
                 id="block follows the node list even when it is not sorted"),
    pytest.param(["h1", "h2"], [3, 1], "cyclic", ["h1", "h2", "h1", "h1"],
                 id="cyclic with 3,1 deals one each, then fills the first node"),
    pytest.param(["h1", "h2"], [2, 2], "cyclic", ["h1", "h2", "h1", "h2"],
                 id="cyclic with 2,2 alternates"),
    pytest.param(["h1", "h2", "h3"], [2, 1, 2], "cyclic", ["h1", "h2", "h3", "h1", "h3"],
                 id="cyclic over three nodes skips the full one"),
    pytest.param(["h1", "h2"], [1, 1], "cyclic", ["h1", "h2"],
                 id="cyclic with one task per node is block"),
    pytest.param(["h1", "h2"], [2, 2], "plane", None,
                 id="plane on several nodes with several tasks each is unknown"),
    pytest.param(["h1", "h2"], [2, 2], "arbitrary", None,
                 id="arbitrary on several nodes is unknown"),
    pytest.param(["h1", "h2"], [1, 1], "arbitrary", None,
                 id="arbitrary on several nodes is unknown even with one task each"),
    pytest.param(["h1", "h2"], [1, 1], "plane", ["h1", "h2"],
                 id="plane with one task per node is block"),
    pytest.param(["h1", "h2"], [2, 2], "fcyclic", None,
                 id="an unknown distribution on several nodes is unknown"),
    pytest.param(["h1"], [4], "plane", ["h1"] * 4, id="plane on one node is block"),
    pytest.param(["h1"], [2], "arbitrary", ["h1", "h1"], id="arbitrary on one node is block"),
    pytest.param(["h1"], [3], "cyclic", ["h1"] * 3, id="cyclic on one node is block"),
])
def test_slurm_placement(hosts, counts, distribution, expected):
    assert slurm_placement(hosts, counts, distribution) == expected


@pytest.mark.parametrize("hosts, counts", [
    pytest.param(["h1", "h2"], [1], id="more nodes than counts"),
    pytest.param(["h1"], [1, 1], id="more counts than nodes"),
])
def test_slurm_runs_refuses_nodes_and_counts_of_different_lengths(hosts, counts):
    with pytest.raises(ValueError):  # the callers check first; a mistake here must not pair
        slurm_placement(hosts, counts, "block")


# --------------------------------------------------------------------------------------------
# build_layout: addresses and tasks
# --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("placement, port_base, addresses, local_index", [
    pytest.param(["n1", "n1", "n2", "n2"], 8888,
                 ["n1:8888", "n1:8889", "n2:8888", "n2:8889"], [0, 1, 0, 1],
                 id="block: ports count up from port_base on each host"),
    pytest.param(["h1", "h2", "h1", "h1"], 2222,
                 ["h1:2222", "h2:2222", "h1:2223", "h1:2224"], [0, 0, 1, 2],
                 id="cyclic: each host counts its own ranks in rank order"),
    pytest.param(["n9", "n10"], 8888, ["n9:8888", "n10:8888"], [0, 0],
                 id="the placement's order is kept, not sorted"),
    pytest.param(["n10", "n9", "n9"], 8888, ["n10:8888", "n9:8888", "n9:8889"], [0, 0, 1],
                 id="a string-sorted placement keeps its order, ports per host"),
    pytest.param(["n2", "n2", "n1"], 1, ["n2:1", "n2:2", "n1:1"], [0, 1, 0],
                 id="an unsorted block placement counts per host"),
    pytest.param(["h1"], 65535, ["h1:65535"], [0], id="port 65535 is allowed"),
    pytest.param(["h1", "h1"], 65534, ["h1:65534", "h1:65535"], [0, 1],
                 id="the last task may take port 65535"),
])
def test_build_layout_addresses(placement, port_base, addresses, local_index):
    layout = build_layout(placement, jobs={"worker": len(placement)}, port_base=port_base)
    assert layout.addresses == addresses
    assert layout.local_index == local_index
    assert layout.cluster == {"worker": addresses}


def test_build_layout_sorts_jobs_by_name_as_tensorflow_does():
    placement = ["n1", "n1", "n1", "n2", "n2"]
    layout = build_layout(placement, jobs={"worker": 2, "ps": 1, "evaluator": 1, "chief": 1},
                          port_base=8888)
    assert layout.jobs == [("chief", 0, 1), ("evaluator", 1, 1), ("ps", 2, 1), ("worker", 3, 2)]
    assert list(layout.cluster) == ["chief", "evaluator", "ps", "worker"]
    assert layout.cluster == {"chief": ["n1:8888"], "evaluator": ["n1:8889"],
                              "ps": ["n1:8890"], "worker": ["n2:8888", "n2:8889"]}


@pytest.mark.parametrize("rank, task", [
    pytest.param(0, ("chief", 0), id="rank 0 is chief 0"),
    pytest.param(1, ("ps", 0), id="rank 1 is ps 0"),
    pytest.param(2, ("ps", 1), id="rank 2 is ps 1"),
    pytest.param(3, ("worker", 0), id="rank 3 is worker 0"),
    pytest.param(5, ("worker", 2), id="rank 5 is worker 2"),
])
def test_task_of(rank, task):
    placement = ["n1"] * 3 + ["n2"] * 3
    layout = build_layout(placement, jobs={"worker": 3, "chief": 1, "ps": 2}, port_base=8888)
    assert layout.task_of(rank) == task


def test_task_of_a_rank_outside_the_job_is_an_error():
    layout = build_layout(["n1", "n1"], jobs={"worker": 2}, port_base=8888)
    with pytest.raises(ResolutionError, match="rank 2"):
        layout.task_of(2)


# --------------------------------------------------------------------------------------------
# build_layout: errors
# --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("jobs", [
    pytest.param({"worker": 3}, id="jobs asking for fewer tasks than the job has"),
    pytest.param({"worker": 4, "ps": 1}, id="jobs asking for more tasks than the job has"),
])
def test_build_layout_refuses_jobs_that_do_not_add_up(jobs):
    placement = ["n1", "n1", "n2", "n2"]
    with pytest.raises(ResolutionError, match="jobs") as excinfo:
        build_layout(placement, jobs=jobs, port_base=8888)
    assert "4" in str(excinfo.value)


@pytest.mark.parametrize("placement, port_base", [
    pytest.param(["h1", "h1"], 65535, id="two tasks from port 65535 need port 65536"),
    pytest.param(["h1", "h2", "h2", "h2"], 65534, id="three tasks on one node from 65534"),
])
def test_build_layout_refuses_ports_above_65535(placement, port_base):
    with pytest.raises(ResolutionError, match="port_base") as excinfo:
        build_layout(placement, jobs={"worker": len(placement)}, port_base=port_base)
    assert "65535" in str(excinfo.value)


# --------------------------------------------------------------------------------------------
# check_own_placement
# --------------------------------------------------------------------------------------------

CYCLIC = ["h1", "h2", "h1", "h1"]


@pytest.mark.parametrize("rank, nodename, gtids", [
    pytest.param(0, "h1", (0, 2, 3), id="rank 0 on h1 with the right gtids"),
    pytest.param(1, "h2", (1,), id="rank 1 on h2 with the right gtids"),
    pytest.param(2, "h1", (3, 2, 0), id="gtids in another order still agree"),
    pytest.param(0, "h1.cluster", (0, 2, 3), id="a long node name is the same host"),
    pytest.param(0, "H1", (0, 2, 3), id="node names compare without case"),
    pytest.param(0, None, None, id="nothing to check"),
    pytest.param(0, None, (5,), id="gtids without a node name are not checked"),
    pytest.param(3, "h1", None, id="a right node name without gtids"),
    pytest.param(4, "h1", (0, 2, 3), id="rank 4 is past the runs: only the gtids are checked"),
    pytest.param(9, "h2", (1,), id="rank 9 is past the runs: only the gtids are checked"),
])
def test_check_own_placement_accepts_agreeing_variables(rank, nodename, gtids):
    assert check_own_placement(runs_of(CYCLIC), rank, nodename, gtids, "FIX") is None


@pytest.mark.parametrize("placement, rank, nodename, gtids, variable", [
    pytest.param(["h1", "h1", "h2", "h2"], 1, "h2", None, "SLURMD_NODENAME",
                 id="block assumed but rank 1 runs on h2: SLURMD_NODENAME disagrees"),
    pytest.param(["n10", "n9"], 0, "n9", None, "SLURMD_NODENAME",
                 id="string-sorted hosts put rank 0 on n10 but it runs on n9"),
    pytest.param(["h1", "h1", "h1", "h2"], 0, "h1", (0, 2, 3), "SLURM_GTIDS",
                 id="block assumed but SLURM_GTIDS says cyclic"),
    pytest.param(CYCLIC, 0, "h1", (0, 1), "SLURM_GTIDS",
                 id="SLURM_GTIDS missing a rank of this node"),
    pytest.param(["hpc.n1", "hpc.n2", "hpc.n2"], 1, "hpc.n2", (1,), "SLURM_GTIDS",
                 id="dotted names that share a first label are two hosts"),
])
def test_check_own_placement_raises_mismatch(placement, rank, nodename, gtids, variable):
    with pytest.raises(MismatchError, match=variable) as excinfo:
        check_own_placement(runs_of(placement), rank, nodename, gtids, "THE FIX.")
    assert str(excinfo.value).endswith("THE FIX.")


def test_layout_takes_given_ports_and_refuses_one_port_twice_on_a_host() -> None:
    runs = [("a", 2), ("b", 1)]
    layout = build_layout_runs(runs, jobs={"worker": 3}, port_base=0, ports=[20001, 20007, 20001])
    assert layout.cluster == {"worker": ["a:20001", "a:20007", "b:20001"]}
    assert [layout.port_of(r) for r in range(3)] == [20001, 20007, 20001]
    with pytest.raises(ResolutionError, match="ranks 0 and 1 on a were both given port 20001"):
        build_layout_runs(runs, jobs={"worker": 3}, port_base=0, ports=[20001, 20001, 20002])


def test_given_ports_keep_the_port_base_and_tasks_per_host() -> None:
    layout = build_layout_runs([("a", 2), ("b", 1)], jobs={"worker": 3}, port_base=20001,
                               ports=[20001, 20007, 20002])
    assert layout.port_base == 20001 and layout.tasks_per_host == {"a": 2, "b": 1}
    with pytest.raises(ValueError):  # a port for every rank, no more, no fewer
        build_layout_runs([("a", 2)], jobs={"worker": 2}, port_base=1, ports=[1, 2, 3])


def test_port_of_reads_the_port_after_the_last_colon() -> None:
    layout = build_layout(["n1", "n1", "n2"], jobs={"worker": 3}, port_base=8888)
    assert [layout.port_of(r) for r in range(3)] == [8888, 8889, 8888]


@pytest.mark.parametrize("runs, rank, expected", [
    pytest.param([("a", 2), ("b", 1), ("a", 1)], 0, ("a", 0), id="first rank"),
    pytest.param([("a", 2), ("b", 1), ("a", 1)], 2, ("b", 0), id="first rank of b"),
    pytest.param([("a", 2), ("b", 1), ("a", 1)], 3, ("a", 2), id="a's second run continues"),
])
def test_host_of_rank(runs, rank, expected) -> None:
    assert host_of_rank(runs, rank) == expected


@pytest.mark.parametrize("rank", [4, 5])
def test_host_of_a_rank_past_the_runs_is_an_error(rank) -> None:
    with pytest.raises(ResolutionError) as excinfo:
        host_of_rank([("a", 2), ("b", 1), ("a", 1)], rank)
    assert str(excinfo.value) == f"rank {rank} is outside the job's 4 tasks."


# --------------------------------------------------------------------------------------------
# mpi_runs: where MPI ranks run
# --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("placement, declared, runs", [
    pytest.param(["a", "a", "b"], None, [("a", 2), ("b", 1)], id="block"),
    pytest.param(["a", "b", "a"], None, [("a", 1), ("b", 1), ("a", 1)], id="cyclic"),
    pytest.param(["a", "a", "b", "b"], 2, [("a", 2), ("b", 2)], id="declared as a number"),
    pytest.param(["a", "b", "a"], {"b": 1, "a": 2}, [("a", 1), ("b", 1), ("a", 1)],
                 id="declared as a dict, in any order"),
    pytest.param(["a.cluster", "b"], {"A": 1, "b": 1}, [("a.cluster", 1), ("b", 1)],
                 id="declared with a short name of another case"),
])
def test_mpi_runs(placement, declared, runs) -> None:
    assert mpi_runs(placement, declared) == runs


@pytest.mark.parametrize("placement, declared, says", [
    pytest.param(["a", "a", "b"], 2, "tasks_per_node=2 does not match where MPI ranks run: "
                 "{'a': 2, 'b': 1}", id="a number that one node does not hold"),
    pytest.param(["a", "b"], {"a": 1}, "{'a': 1, 'b': 1}", id="a node left out"),
    pytest.param(["a", "b"], {"a": 1, "c": 1}, "{'a': 1, 'b': 1}", id="a node not used"),
])
def test_mpi_runs_refuses_a_declared_layout_that_is_not_where_ranks_run(
        placement, declared, says) -> None:
    with pytest.raises(MismatchError) as excinfo:
        mpi_runs(placement, declared)
    assert says in str(excinfo.value)
    assert str(excinfo.value).endswith("Leave tasks_per_node unset to use MPI's placement.")


@pytest.mark.parametrize("placement, rank", [
    pytest.param(["bad name"], 0, id="rank 0"),
    pytest.param(["a", "a", "b", "bad name", "bad name"], 3, id="named by its first rank"),
    pytest.param(["a", "bad name", "a", "bad name"], 1, id="cyclic: its first rank"),
])
def test_mpi_runs_names_the_first_rank_of_a_bad_host_name(placement, rank) -> None:
    with pytest.raises(FormatError) as excinfo:
        mpi_runs(placement)
    assert str(excinfo.value).startswith(f"host name of MPI rank {rank}: host name 'bad name'")
