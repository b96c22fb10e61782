"""_gpu_allocation: the rules that give each rank its GPUs from every rank's list (pure)."""

from __future__ import annotations

import pytest

from mpi_resolver.core.errors import ResolutionError
from mpi_resolver.gpus.allocation import (GpuAllocation, NodeGpus, Share, allocate_nodes,
                                          allocate_own, allocate_uniform)
from mpi_resolver.gpus.notes import describe
from mpi_resolver.gpus.counts import NO_LIMIT
from mpi_resolver.gpus.lists import SlurmGpus

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




# --------------------------------------------------------------------------------------------
# Node by node, from every rank's list (MPI): each rank's GPUs, how, and per_task
# --------------------------------------------------------------------------------------------

FOUR = ("0", "1", "2", "3")


def every_rank(gpus, lists):
    """[(GPUs, kind)] of every rank of ``lists``, host by host in order."""
    return [gpus.at(host, i) for host, per_rank in lists.items() for i in range(len(per_rank))]


@pytest.mark.parametrize("lists, per_task, expected, job_per_task", [
    pytest.param({"a": [FOUR] * 2}, None, [(("0", "1"), "divided"), (("2", "3"), "divided")], 2,
                 id="a node's list divided"),
    pytest.param({"a": [FOUR] * 2, "b": [("0", "1")] * 2}, None,
                 [(("0",), "divided"), (("1",), "divided"), (("0",), "divided"),
                  (("1",), "divided")], 1, id="the smallest share for every node"),
    pytest.param({"a": [FOUR] * 2}, 1, [(("0",), "divided"), (("1",), "divided")], 1,
                 id="gpus_per_task given"),
    pytest.param({"a": [FOUR] * 2}, 0, [((), "none"), ((), "none")], 0,
                 id="gpus_per_task=0: none"),
    pytest.param({"a": [()] * 2}, None, [((), "none"), ((), "none")], 0, id="no GPUs"),
    pytest.param({"a": [("0",)] * 2}, None, [(("0",), "shared"), (("0",), "shared")], 0,
                 id="one GPU for two: shared, all of it"),
    pytest.param({"a": [("0", "1", "2")] * 2}, None, [(("0", "1", "2"), "divided")] * 0
                 + [(("0",), "divided"), (("1",), "divided")], 1,
                 id="3 GPUs for 2: one each, the third unused"),
    pytest.param({"a": [("0",), ("1",)]}, None, [(("0",), "own"), (("1",), "own")], 0,
                 id="lists of their own: each keeps its own"),
    pytest.param({"a": [("0", "1"), ("2", "3")]}, 1, [(("0",), "own"), (("2",), "own")], 1,
                 id="own lists, gpus_per_task takes the first"),
    pytest.param({"a": [("0",), ("0",), ("1",), ("1",)]}, None,
                 [(("0",), "shared")] * 2 + [(("1",), "shared")] * 2, 0,
                 id="two tasks per GPU (--ntasks-per-gpu=2)"),
    pytest.param({"a": [("0", "1")] * 2 + [("2", "3")] * 2}, None,
                 [(("0",), "divided"), (("1",), "divided"), (("2",), "divided"),
                  (("3",), "divided")], 0, id="two groups, each divided"),
])
def test_allocate_nodes(lists, per_task, expected, job_per_task):
    """Each list's rule, uneven: each rank as many as its list gives (evening out below)."""
    gpus = allocate_nodes(lists, per_task, uneven=True)
    assert every_rank(gpus, lists) == expected
    assert gpus.per_task == job_per_task


def test_a_node_whose_lists_are_shared_gets_one_note_naming_its_lists():
    lists = {"a": [("0",)] * 2, "b": [("5",)] * 2}
    assert allocate_nodes(lists, None).notes == (
        "GPUs are shared: 1 GPU(s) (0) on a for 2 tasks that see them, fewer than one each, so "
        "each of those tasks uses all of them (TensorFlow's resolver crashes here). Ask Slurm "
        "for --gpus-per-task=1, or run at most one task per GPU, if sharing is not intended.",)
    per_gpu = allocate_nodes({"a": [("0",), ("0",), ("1",), ("1",)]}, None, tasks_per_gpu=2)
    assert per_gpu.notes == ("GPUs are shared: 4 tasks on a use GPU(s) 0 / 1, 2 tasks per GPU as "
                             "Slurm bound them (--ntasks-per-gpu / --gpu-bind=single:2).",)
    one_each = allocate_nodes({"a": [("0",), ("0",), ("1",), ("1",)]}, None, tasks_per_gpu=1)
    assert "fewer than one each" in one_each.notes[0]
    assert allocate_nodes({"a": [FOUR] * 2}, None).notes == ()


@pytest.mark.parametrize("lists, per_task, words", [
    pytest.param({"n2": [("0",)] * 2}, 2, "gpus_per_task=2, but the 2 tasks on n2 that see GPUs "
                 "0 share 1; lower gpus_per_task", id="shared list, more asked"),
    pytest.param({"n2": [("0", "1")] * 2}, 2, "2 tasks x gpus_per_task=2 need 4 GPUs on n2, "
                 "which has 2", id="divided list, more asked"),
    pytest.param({"n2": [("0",), ("1",)]}, 2, "1 task x gpus_per_task=2 needs 2 GPUs on n2, "
                 "which has 1", id="own lists, more asked"),
])
def test_allocate_nodes_refuses_more_than_a_list_gives(lists, per_task, words):
    with pytest.raises(ResolutionError) as caught:
        allocate_nodes(lists, per_task)
    assert words in str(caught.value)


def test_divided_per_task_comes_from_the_other_nodes_where_lists_hold_one():
    gpus = allocate_nodes({"a": [FOUR] * 2}, None, divided_per_task=1, uneven=True)
    assert every_rank(gpus, {"a": [FOUR] * 2}) == [(("0",), "divided"), (("1",), "divided")]
    assert allocate_nodes({"a": [FOUR] * 2}, None, divided_per_task=NO_LIMIT,
                          uneven=True).per_task == 0


def test_allocation_lookups_outside_what_is_known_are_unknown():
    own = allocate_own(("5",), "a", 1, 2, SlurmGpus(bind="single:1"), None)
    assert own.nodes["a"].at(2) == (None, "unknown") and own.nodes["a"].at(-1) == (None, "unknown")
    uniform = allocate_uniform(FOUR, {"a": 2}, None)
    assert uniform.at("b", 0) == (None, "unknown")  # a host of no known task count
    assert GpuAllocation({}, 0).at("a", 0) == (None, "unknown")
    by_count_only = GpuAllocation({}, 0, by_count={2: NodeGpus((Share(FOUR, "divided", 2),))})
    assert by_count_only.at("a", 0) == (None, "unknown")  # no task counts to look it up by


@pytest.mark.parametrize("tasks, per_task, host, expected, notes", [
    pytest.param({"a": 2, "b": 1}, None, "a", {("a", 1): (("2", "3"), "divided"),
                                                ("b", 0): (("0", "1"), "divided")}, 0,
                 id="the smallest share where nodes run different counts"),
    pytest.param({"a": 8}, None, "a", {("a", 0): (FOUR, "shared")}, 1,
                 id="more tasks than GPUs: shared, with a note on this host"),
    pytest.param({"a": 8}, None, "b", {("a", 0): (FOUR, "shared")}, 0,
                 id="a note only for this rank's own host"),
    pytest.param({"a": 2}, 1, "a", {("a", 1): (("1",), "divided")}, 0, id="gpus_per_task"),
])
def test_allocate_uniform(tasks, per_task, host, expected, notes):
    gpus = allocate_uniform(FOUR, tasks, per_task, host)
    assert {key: gpus.at(*key) for key in expected} == expected
    assert len(gpus.notes) == notes
    if notes:
        assert gpus.notes[0].startswith(f"GPUs are shared: 4 GPU(s) (0,1,2,3) on {host} for 8")


@pytest.mark.parametrize("gpus, slurm, per_task, mine, kind, job_per_task, notes", [
    pytest.param(("2", "3"), SlurmGpus(bind="per_task:2"), None, ("2", "3"), "own", 2, 0,
                 id="its own list"),
    pytest.param(("2", "3"), SlurmGpus(bind="per_task:2"), 1, ("2",), "own", 1, 0,
                 id="gpus_per_task takes the first"),
    pytest.param((), SlurmGpus(bind="per_task:1"), None, (), "none", 0, 0, id="no GPU"),
    pytest.param(("2",), SlurmGpus(bind="per_task:1"), 0, (), "none", 0, 0,
                 id="gpus_per_task=0"),
    pytest.param(("1",), SlurmGpus(bind="single:2", tasks_per_gpu=2), None, ("1",), "shared",
                 1, 1, id="--ntasks-per-gpu=2: shared, with a note"),
    pytest.param(("1",), SlurmGpus(bind="single:1", tasks_per_gpu=1), None, ("1",), "own",
                 1, 0, id="one task per GPU: its own"),
])
def test_allocate_own(gpus, slurm, per_task, mine, kind, job_per_task, notes):
    got = allocate_own(gpus, "n1", 1, 3, slurm, per_task)
    assert got.at("n1", 1) == (mine, kind)
    assert got.at("n1", 0) == (None, "unknown") and got.at("n1", 2) == (None, "unknown")
    assert got.per_task == job_per_task and len(got.notes) == notes
    if notes:
        assert got.notes[0] == ("GPUs are shared: 2 tasks on n1 use GPU(s) 1, 2 tasks per GPU as "
                                "Slurm bound them (--ntasks-per-gpu / --gpu-bind=single:2).")


# --------------------------------------------------------------------------------------------
# What each node holds: its shares (list, kind, per_task) and where each rank sits in them
# --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("lists, per_task, node", [
    pytest.param([()] * 2, None, NodeGpus((Share((), "none", 0),)),
                 id="no GPUs: none, 0 each"),
    pytest.param([FOUR] * 2, 0, NodeGpus((Share((), "none", 0),)),
                 id="gpus_per_task=0: none, 0 each, the list dropped"),
    pytest.param([("0", "1")] * 3, None, NodeGpus((Share(("0", "1"), "shared", 2),)),
                 id="2 GPUs for 3: shared, all of the list each"),
    pytest.param([("0", "1")] * 3, 1, NodeGpus((Share(("0", "1"), "shared", 1),)),
                 id="2 GPUs for 3, gpus_per_task=1: shared, the first each"),
    pytest.param([FOUR] * 2, None, NodeGpus((Share(FOUR, "divided", 2),)),
                 id="4 for 2: divided, 2 each"),
    pytest.param([("0", "1"), ("2", "3"), ("0", "1")], None,
                 NodeGpus((Share(("0", "1"), "divided", 1), Share(("2", "3"), "own", 2)),
                          ((0, 0), (1, 0), (0, 1))),
                 id="lists of their own: one share per list, each rank's place in it"),
])
def test_a_node_holds_its_shares_and_each_rank_s_place(lists, per_task, node):
    assert allocate_nodes({"a": lists}, per_task, uneven=True).nodes == {"a": node}


@pytest.mark.parametrize("lists, per_task, expected", [
    pytest.param([("0", "1")] * 3, 1, [(("0",), "shared")] * 3,
                 id="shared list: gpus_per_task takes the first for each"),
    pytest.param([("0", "1"), ("2", "3")], None, [(("0", "1"), "own"), (("2", "3"), "own")],
                 id="own lists of two GPUs: each keeps both"),
    pytest.param([("0", "1", "2", "3")] * 2 + [("4",)], None,
                 [(("0", "1"), "divided"), (("2", "3"), "divided"), (("4",), "own")],
                 id="a group divides its list, a lone rank keeps its own"),
])
def test_allocate_nodes_gives_each_rank(lists, per_task, expected):
    gpus = allocate_nodes({"a": lists}, per_task, uneven=True)
    assert every_rank(gpus, {"a": lists}) == expected


def test_no_nodes_give_no_gpus_per_task():
    assert allocate_nodes({}, None) == GpuAllocation({}, 0)


def test_a_node_whose_ranks_all_share_one_gpu_as_bound_says_so():
    """One list, two tasks per GPU as Slurm bound them: the note says --ntasks-per-gpu."""
    assert allocate_nodes({"a": [("0",)] * 2}, None, tasks_per_gpu=2).notes == (
        "GPUs are shared: 2 tasks on a use GPU(s) 0, 2 tasks per GPU as Slurm bound them "
        "(--ntasks-per-gpu / --gpu-bind=single:2).",)


def test_divided_per_task_no_limit_divides_each_list_by_its_ranks():
    gpus = allocate_nodes({"a": [FOUR] * 2}, None, divided_per_task=NO_LIMIT)
    assert every_rank(gpus, {"a": [FOUR] * 2}) == [(("0", "1"), "divided"),
                                                   (("2", "3"), "divided")]


def test_allocate_uniform_refuses_naming_a_host_of_the_count_that_cannot_be_given():
    with pytest.raises(ResolutionError) as caught:
        allocate_uniform(FOUR, {"a": 1, "b": 2, "c": 2}, 3)
    assert str(caught.value).startswith(
        "2 tasks x gpus_per_task=3 need 6 GPUs on b, which has 4 (from CUDA_VISIBLE_DEVICES); ")


def test_allocate_own_places_the_rank_first_of_its_share_and_no_other():
    own = allocate_own(("5", "6"), "a", 1, 3, SlurmGpus(bind="per_task:2"), None)
    assert own.nodes == {"a": NodeGpus((Share(("5", "6"), "own", 2),), (None, (0, 0), None))}


ONE = NodeGpus((Share(("0",), "own", 1),))
TWO = NodeGpus((Share(("7",), "own", 1),))


@pytest.mark.parametrize("allocation, host, expected", [
    pytest.param(GpuAllocation({"a": ONE}, 1, tasks={"a": 1}, by_count={1: TWO}), "a",
                 (("0",), "own"), id="a node of its own wins over its count"),
    pytest.param(GpuAllocation({}, 1, tasks={"a": 1}, by_count={1: TWO}), "a",
                 (("7",), "own"), id="else the node of its count"),
    pytest.param(GpuAllocation({}, 1, tasks={"a": 1}, by_count={1: TWO}), "b",
                 (None, "unknown"), id="a host of no count is unknown, even beside count 1"),
    pytest.param(GpuAllocation({}, 1, tasks={"a": 1}), "a", (None, "unknown"),
                 id="a count without nodes by count is unknown"),
])
def test_allocation_at_looks_up_the_node_then_the_count(allocation, host, expected):
    assert allocation.at(host, 0) == expected


@pytest.mark.parametrize("allocate, message", [
    pytest.param(lambda: allocate_nodes({"n2": [("0", "1")] * 3}, 3),
                 "gpus_per_task=3, but the 3 tasks on n2 that see GPUs 0,1 share 2; lower "
                 "gpus_per_task (--gpus-per-task).", id="a shared list"),
    pytest.param(lambda: allocate_nodes({"n2": [("0", "1")] * 2}, 2),
                 "2 tasks x gpus_per_task=2 need 4 GPUs on n2, which has 2 (from "
                 "CUDA_VISIBLE_DEVICES); lower gpus_per_task (--gpus-per-task) or run fewer "
                 "tasks per node.", id="a divided list"),
    pytest.param(lambda: allocate_nodes({"n2": [("0",)] * 2}, 1, said_by={"n2": "nvidia-smi"}),
                 "2 tasks x gpus_per_task=1 need 2 GPUs on n2, which has 1 (from nvidia-smi); "
                 "lower gpus_per_task (--gpus-per-task) or run fewer tasks per node.",
                 id="a list of nvidia-smi's count, fewer GPUs than tasks"),
    pytest.param(lambda: allocate_uniform((), {"n1": 1}, 2, "n1", "CUDA_VISIBLE_DEVICES"),
                 "gpus_per_task=2, but the 1 task on n1 has no GPUs (from CUDA_VISIBLE_DEVICES); "
                 "ask Slurm for GPUs (--gres=gpu:N or --gpus-per-task=N), or pass "
                 "gpus_per_task=0 (--gpus-per-task 0) to run on CPU.", id="no GPUs at all"),
    pytest.param(lambda: allocate_own(("2", "3"), "n1", 0, 1, SlurmGpus(bind="map_gpu:2,3"), 3),
                 "gpus_per_task=3, but Slurm bound 2 GPU(s) (2,3) to this task on n1 "
                 "(SLURMD_TRES_BIND=gpu:map_gpu:2,3); lower gpus_per_task (--gpus-per-task).",
                 id="a task's own list"),
])
def test_too_many_gpus_per_task_is_refused_with_the_whole_story(allocate, message):
    with pytest.raises(ResolutionError) as caught:
        allocate()
    assert str(caught.value) == message


@pytest.mark.parametrize("said_by, shared", [
    pytest.param("Slurm's binding", True, id="Slurm's binding may be shared"),
    pytest.param("CUDA_VISIBLE_DEVICES", True, id="Slurm's CUDA_VISIBLE_DEVICES may be shared"),
    pytest.param("SLURM_GPUS_ON_NODE", True, id="SLURM_GPUS_ON_NODE may be shared"),
    pytest.param("gpus_per_node", False, id="the user's gpus_per_node is not shared"),
    pytest.param("nvidia-smi", False, id="nvidia-smi's count is not shared"),
])
@pytest.mark.parametrize("allocate", [
    pytest.param(lambda per_task, said_by: allocate_nodes({"a": [("0",)] * 2}, per_task,
                                                          said_by={"a": said_by}),
                 id="records"),
    pytest.param(lambda per_task, said_by: allocate_uniform(("0",), {"a": 2}, per_task, "a",
                                                            said_by),
                 id="Slurm's variables"),
])
def test_fewer_gpus_than_tasks_are_shared_only_where_slurm_gave_them(allocate, said_by, shared):
    assert allocate(None, said_by).at("a", 1) == (("0",), "shared")  # nothing asked: shared
    assert allocate(0, said_by).at("a", 1) == ((), "none")
    if shared:
        assert allocate(1, said_by).at("a", 1) == (("0",), "shared")
    else:  # gpus_per_task=1 asks for a GPU each, which that source says are not there
        with pytest.raises(ResolutionError, match=f"need 2 GPUs on a, which has 1 .from "
                                                  f"{said_by}."):
            allocate(1, said_by)


@pytest.mark.parametrize("said_by", ["Slurm's binding", "CUDA_VISIBLE_DEVICES",
                                     "SLURM_GPUS_ON_NODE", "gpus_per_node", "nvidia-smi"])
def test_gpus_per_task_on_a_node_without_gpus_is_refused_from_any_source(said_by):
    lists = {"a": [()] * 2}
    none = [((), "none")] * 2
    assert every_rank(allocate_nodes(lists, None, said_by={"a": said_by}), lists) == none
    assert every_rank(allocate_nodes(lists, 0, said_by={"a": said_by}), lists) == none
    with pytest.raises(ResolutionError, match=f"gpus_per_task=1, but the 2 tasks on a have no "
                                              f"GPUs .from {said_by}.; ask Slurm for GPUs"):
        allocate_nodes(lists, 1, said_by={"a": said_by})


def test_as_many_gpus_as_tasks_divide_from_any_source():
    for said_by in ("gpus_per_node", "nvidia-smi", "CUDA_VISIBLE_DEVICES"):
        lists = {"a": [("0", "1")] * 2}
        gpus = allocate_nodes(lists, 1, said_by={"a": said_by})
        assert every_rank(gpus, lists) == [(("0",), "divided"), (("1",), "divided")]


# --------------------------------------------------------------------------------------------
# Every rank the same number of GPUs (MultiWorkerMirroredStrategy), unless uneven
# --------------------------------------------------------------------------------------------

ISSUE = {"node1": [FOUR] * 4, "node2": [("0", "1")] * 4}  # 4 GPUs and 2, four tasks each


@pytest.mark.parametrize("lists, uneven, expected", [
    pytest.param(ISSUE, False, [(("0",), "divided"), (("1",), "divided"), (("2",), "divided"),
                                (("3",), "divided"), (("0",), "shared"), (("0",), "shared"),
                                (("1",), "shared"), (("1",), "shared")],
                 id="4 GPUs and 2 for four tasks each: one each, two tasks per GPU on node2"),
    pytest.param(ISSUE, True, [(("0",), "divided"), (("1",), "divided"), (("2",), "divided"),
                               (("3",), "divided")] + [(("0", "1"), "shared")] * 4,
                 id="uneven: node2's tasks each keep both"),
    pytest.param({"a": [("0", "1"), ("2", "3")], "b": [("5",), ("6",)]}, False,
                 [(("0",), "own"), (("2",), "own"), (("5",), "own"), (("6",), "own")],
                 id="own lists of two where others have one: the first of each"),
    pytest.param({"a": [FOUR] * 2, "b": [FOUR] * 4}, False,
                 [(("0",), "divided"), (("1",), "divided")] +
                 [((g,), "divided") for g in FOUR], id="two per task and one: one each"),
    pytest.param({"a": [("0", "1", "2")] * 4, "b": [("0",)] * 1}, False,
                 [(("0",), "shared"), (("0",), "shared"), (("1",), "shared"), (("2",), "shared"),
                  (("0",), "divided")],
                 id="3 GPUs for 4 tasks: spread from entry i*3//4"),
    pytest.param({"a": [FOUR] * 2, "b": [FOUR] * 2}, False,
                 [(("0", "1"), "divided"), (("2", "3"), "divided")] * 2,
                 id="nodes alike: nothing changes"),
])
def test_every_rank_of_the_job_takes_the_same_number(lists, uneven, expected):
    assert every_rank(allocate_nodes(lists, None, uneven=uneven), lists) == expected


def test_an_evened_shared_list_says_each_takes_the_job_s_count():
    (note,) = allocate_nodes(ISSUE, None).notes
    assert note == ("GPUs are shared: 2 GPU(s) (0,1) on node2 for 4 tasks that see them, fewer "
                    "than one each: each task takes 1, spread over them, so that every task of "
                    "the job has 1 (MultiWorkerMirroredStrategy needs the same number on every "
                    "worker; uneven_gpus=True lets each keep all).")


def test_an_evened_share_spreads_wrapping_round_the_list():
    share = Share(("0", "1", "2"), "shared", 2, spread_over=4)
    assert [share.of(i) for i in range(4)] == [("0", "1"), ("0", "1"), ("1", "2"), ("2", "0")]
    assert Share(("0", "1", "2"), "shared", 2).of(3) == ("0", "1")  # not spread: the first


MIXED = {"g1": [FOUR] * 2, "c1": [()] * 2, "c2": [()], "c3": [()], "c4": [()]}


def test_ranks_with_gpus_and_without_are_an_error_naming_the_nodes_unless_uneven():
    with pytest.raises(ResolutionError) as caught:
        allocate_nodes(MIXED, None)
    assert str(caught.value) == (
        "workers would get different numbers of GPUs: 0 GPU(s) per task on c1, c2, c3 and 1 "
        "more; 2 GPU(s) per task on g1. MultiWorkerMirroredStrategy needs the same number on "
        "every worker (TensorFlow leaves the rest undefined). Run on GPU nodes only, pass "
        "gpus_per_task=0 (--gpus-per-task 0) to train on CPU, or uneven_gpus=True "
        "(--uneven-gpus) for jobs that need no equal counts (parameter servers).")
    uneven = allocate_nodes(MIXED, None, uneven=True)
    assert uneven.at("g1", 1) == (("2", "3"), "divided") and uneven.at("c1", 0) == ((), "none")
    assert allocate_nodes(MIXED, 0).at("g1", 0) == ((), "none")  # gpus_per_task=0: CPU


@pytest.mark.parametrize("counts, expected", [
    pytest.param((1, 2), [(("0",), "divided"), (("1",), "divided")],
                 id="another node's ranks take one: one each here"),
    pytest.param((2, 2), [(("0", "1"), "divided"), (("2", "3"), "divided")],
                 id="every node's take two"),
])
def test_counts_from_the_exchange_even_out_one_node(counts, expected):
    lists = {"a": [FOUR] * 2}
    assert every_rank(allocate_nodes(lists, None, counts=counts), lists) == expected


def test_counts_from_the_exchange_with_ranks_without_gpus_are_an_error():
    with pytest.raises(ResolutionError, match="workers would get different numbers of GPUs: "
                                              "2 GPU.s. per task on a"):
        allocate_nodes({"a": [FOUR] * 2}, None, counts=(0, 2))


@pytest.mark.parametrize("uneven, on_a", [
    pytest.param(False, [("0", "1"), ("0", "1"), ("1", "2"), ("2", "3"), ("3", "0")],
                 id="two each, as on b: spread over a's four"),
    pytest.param(True, [FOUR] * 5, id="uneven: a's five each keep all four"),
])
def test_allocate_uniform_evens_out_nodes_of_different_task_counts(uneven, on_a):
    gpus = allocate_uniform(FOUR, {"a": 5, "b": 2}, None, "a", uneven=uneven)
    assert [gpus.at("a", i)[0] for i in range(5)] == on_a
    assert [gpus.at("b", i)[0] for i in range(2)] == [("0", "1"), ("2", "3")]


@pytest.mark.parametrize("allocation, host, expected", [
    pytest.param(allocate_nodes({"a": [("0", "1"), ("2", "3"), ("0", "1")]}, None, uneven=True),
                 "a", FOUR, id="every list of the node, in order, once"),
    pytest.param(allocate_uniform(FOUR, {"a": 2, "b": 1}, None), "b", FOUR,
                 id="nodes by count: the count's list"),
    pytest.param(allocate_nodes({"a": [FOUR]}, None), "z", (), id="an unknown host: none"),
    pytest.param(allocate_uniform(FOUR, {"a": 2}, None), "z", (),
                 id="a host of no count: none"),
    pytest.param(allocate_uniform(FOUR, {"a": 1}, None), "z", (),
                 id="a host of no count: none, even beside count 1"),
])
def test_node_gpus(allocation, host, expected):
    assert allocation.node_gpus(host) == expected



def test_a_node_of_several_lists_from_nvidia_smi_is_not_shared_when_gpus_per_task_asks():
    lists = {"a": [("0",), ("0",), ("1",)]}
    with pytest.raises(ResolutionError, match=r"need 2 GPUs on a, which has 1 \(from "
                                              r"nvidia-smi\)"):
        allocate_nodes(lists, 1, said_by={"a": "nvidia-smi"})
    assert allocate_nodes(lists, 1).at("a", 1) == (("0",), "shared")  # Slurm's: shared


@pytest.mark.parametrize("uneven", [False, True])
def test_no_ranks_no_gpus(uneven):
    assert allocate_nodes({}, None, uneven=uneven) == GpuAllocation({}, 0)
    assert allocate_uniform(FOUR, {}, None, uneven=uneven) == GpuAllocation({}, 0, (), {}, {})


@pytest.mark.parametrize("tasks, uneven, per_task, on_a", [
    pytest.param({"a": 4, "b": 2}, True, 1, ("0",), id="uneven: 4 // 4 where 4 tasks see 4"),
    pytest.param({"a": 2, "b": 1}, True, 2, ("0", "1"), id="uneven: the smallest part, 2"),
    pytest.param({"a": 2, "b": 1}, False, 2, ("0", "1"), id="even: the same here"),
])
def test_allocate_uniform_per_task_is_the_smallest_part(tasks, uneven, per_task, on_a):
    gpus = allocate_uniform(FOUR, tasks, None, uneven=uneven)
    assert gpus.per_task == per_task and gpus.at("a", 0)[0] == on_a
    assert gpus.at("b", 0)[0] == FOUR[:per_task]


def test_allocate_uniform_evens_out_by_default():
    gpus = allocate_uniform(FOUR, {"a": 5, "b": 2}, None, "a")
    assert [gpus.at("a", i)[0] for i in range(2)] == [("0", "1"), ("0", "1")]
