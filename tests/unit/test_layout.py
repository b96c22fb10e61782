"""Placements and the layout built from them: addresses and tasks of every rank."""

from __future__ import annotations

import pytest

from mpi_resolver._errors import MismatchError, ResolutionError
from mpi_resolver._layout import (
    build_layout_runs,
    check_own_placement,
    expand_runs,
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
