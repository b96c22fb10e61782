"""GPUs as Slurm binds them: each row is a job as srun starts it (the variables every task
sees, measured on Slurm 22.05), resolved for every rank through MPI's records and through
Slurm's variables alone."""

from __future__ import annotations

import re

from typing import Dict, List, Optional, Sequence

import pytest

from mpi_resolver.core.agreement import NodeSummary
from mpi_resolver.core.errors import MismatchError, ResolutionError
from mpi_resolver.gpus.counts import NO_LIMIT
from mpi_resolver.resolve.gpu_resolution import (_cpu_only_note, _ignored_note, gpus_before_mpi,
                                          gpus_from_node, gpus_from_records, node_summary)
from mpi_resolver.placement.layout import Layout, build_layout_runs, runs_of
from mpi_resolver.options import make_options
from mpi_resolver.exchange.records import RankRecord
from mpi_resolver.resolve.resolution import resolve_job
from tests.unit.jobs import run_job, run_world, srun_env

pytestmark = pytest.mark.unit

ONE_NODE = ["node1"] * 4


def job(cvd: Sequence[Optional[str]], placement: Sequence[str] = ONE_NODE,
        **gpu_vars: str) -> List[Dict[str, str]]:
    """Every task's variables: CUDA_VISIBLE_DEVICES per task (None: unset) and Slurm's GPU
    variables (the same on every task)."""
    hosts = list(dict.fromkeys(placement))
    counts = [placement.count(h) for h in hosts]
    envs = []
    for rank, value in enumerate(cvd):
        env = srun_env(rank, hosts, counts, list(placement), **gpu_vars)
        if value is not None:
            env["CUDA_VISIBLE_DEVICES"] = value
        envs.append(env)
    return envs


def via_mpi(envs, placement=ONE_NODE, **kwargs) -> List[str]:
    """CUDA_VISIBLE_DEVICES of every rank, resolved with every rank's record (srun --mpi=pmix)."""
    return [run_job(envs, list(placement), rank=r, **kwargs).visible_devices
            for r in range(len(envs))]


def via_slurm(envs, probe=None, **kwargs) -> List[str]:
    """CUDA_VISIBLE_DEVICES of every rank from its own variables alone (source='slurm')."""
    out = []
    for env in envs:
        opts = make_options(source="slurm", **kwargs)
        res = resolve_job(opts, env, probe=probe or _no_probe)
        out.append(res.visible_devices)
    return out


def _no_probe():
    raise AssertionError("nvidia-smi must not run: Slurm's variables say how many GPUs")


# --------------------------------------------------------------------------------------------
# The issue's table: one node with 4 GPUs
# --------------------------------------------------------------------------------------------

ROWS = [
    # (srun options, what Slurm gives each task, Slurm's GPU variables, must give: via MPI,
    #  via Slurm's variables alone)
    pytest.param(["0", "1", "2", "3"], dict(SLURMD_TRES_BIND="gpu:per_task:1",
                                            SLURM_GPUS_ON_NODE="4"),
                 ["0", "1", "2", "3"], ["0", "1", "2", "3"], id="-n4 --gpus-per-task=1"),
    pytest.param(["0", "1", "2", "3"], dict(SLURM_GPUS_ON_NODE="4"),
                 ["0", "1", "2", "3"], ["0", "1", "2", "3"],
                 id="per-task lists without SLURMD_TRES_BIND: fewer than SLURM_GPUS_ON_NODE"),
    pytest.param(["0,1", "2,3"], dict(SLURMD_TRES_BIND="gpu:per_task:2",
                                      SLURM_GPUS_ON_NODE="4"),
                 ["0,1", "2,3"], ["0,1", "2,3"], id="-n2 --gpus-per-task=2"),
    pytest.param(["0", "1", "2", "3"], dict(SLURMD_TRES_BIND="gpu:single:1",
                                            SLURM_GPUS_ON_NODE="4"),
                 ["0", "1", "2", "3"], ["0", "1", "2", "3"],
                 id="-n4 --gpus=4 --gpu-bind=single:1"),
    pytest.param(["0", "0", "1", "1"], dict(SLURMD_TRES_BIND="gpu:single:2",
                                            SLURM_NTASKS_PER_TRES="2", SLURM_GPUS_ON_NODE="2"),
                 ["0", "0", "1", "1"], ["0", "0", "1", "1"],
                 id="-n4 --ntasks-per-gpu=2 --gpus=2: shared"),
    pytest.param(["3", "1"], dict(SLURMD_TRES_BIND="gpu:map_gpu:3,1", SLURM_GPUS_ON_NODE="4"),
                 ["3", "1"], ["3", "1"], id="-n2 --gpus-per-node=4 --gpu-bind=map_gpu:3,1"),
    pytest.param(["0,1,2,3"] * 4, dict(SLURM_GPUS_ON_NODE="4"),
                 ["0", "1", "2", "3"], ["0", "1", "2", "3"],
                 id="-n4 --gpus-per-node=4: the node's list divided (TensorFlow parity)"),
    pytest.param([None] * 4, dict(SLURMD_TRES_BIND="gpu:none", SLURM_GPUS_ON_NODE="4"),
                 ["0", "1", "2", "3"], ["0", "1", "2", "3"],
                 id="-n4 --gpus-per-task=1 --gpu-bind=none: from SLURM_GPUS_ON_NODE"),
    pytest.param(["2,3", "2,3", "0,1", "0,1"], dict(SLURMD_TRES_BIND="gpu:closest",
                                                    SLURM_GPUS_ON_NODE="4"),
                 ["2", "3", "0", "1"], ["2,3", "2,3", "0,1", "0,1"],
                 id="--gpu-bind=closest: pairs divide theirs via MPI, keep it without"),
    pytest.param(["0,1", "1,2"], dict(SLURMD_TRES_BIND="gpu:mask_gpu:0x3,0x6",
                                      SLURM_GPUS_ON_NODE="3"),
                 ["0,1", "1,2"], ["0,1", "1,2"],
                 id="--gpu-bind=mask_gpu overlapping masks: each keeps its own"),
    pytest.param(["0"] * 2, {}, ["0", "0"], ["0", "0"],
                 id="one GPU for two tasks without binding: shared, not dropped"),
    pytest.param([""] * 2, {}, ["", ""], ["", ""], id="empty CUDA_VISIBLE_DEVICES: no GPUs"),
]


@pytest.mark.parametrize("cvd, gpu_vars, by_mpi, by_slurm", ROWS)
def test_issue_table_one_node(cvd, gpu_vars, by_mpi, by_slurm):
    envs = job(cvd, ONE_NODE[:len(cvd)], **gpu_vars)
    assert via_mpi(envs, ONE_NODE[:len(cvd)], smi=99) == by_mpi
    assert via_slurm(envs) == by_slurm


@pytest.mark.parametrize("cvd, gpu_vars, by_mpi, by_slurm", ROWS)
def test_a_rank_never_gets_a_gpu_outside_its_own_list_nor_none_where_it_has_some(
        cvd, gpu_vars, by_mpi, by_slurm):
    for given, got in list(zip(cvd, by_mpi, strict=False)) + list(zip(cvd, by_slurm, strict=False)):
        if given is None:
            continue
        assert set(filter(None, got.split(","))) <= set(filter(None, given.split(",")))
        assert bool(got) == bool(given)


@pytest.mark.parametrize("cvd, gpu_vars, fragment", [
    pytest.param(["0", "0", "1", "1"], dict(SLURMD_TRES_BIND="gpu:single:2",
                                            SLURM_NTASKS_PER_TRES="2"),
                 "2 tasks per GPU", id="--ntasks-per-gpu=2 says it is Slurm's sharing"),
    pytest.param(["0", "0"], {}, "fewer than one each", id="one GPU for two tasks"),
])
def test_shared_gpus_give_one_note(cvd, gpu_vars, fragment):
    envs = job(cvd, ONE_NODE[:len(cvd)], **gpu_vars)
    res = run_job(envs, ONE_NODE[:len(cvd)], rank=1)
    shared = [n for n in res.notes if "shared" in n]
    assert len(shared) == 1 and fragment in shared[0], res.notes
    opts = make_options(source="slurm")
    alone = resolve_job(opts, envs[1], probe=_no_probe)
    assert [n for n in alone.notes if "shared" in n], alone.notes


def test_no_note_where_nothing_is_shared():
    envs = job(["0", "1", "2", "3"], SLURMD_TRES_BIND="gpu:per_task:1")
    assert not [n for n in run_job(envs, ONE_NODE, rank=0).notes if "shared" in n]


def test_gpu_bind_none_never_runs_nvidia_smi():
    calls = []

    def probe():
        calls.append(1)
        return 4, False

    envs = job([None] * 4, SLURMD_TRES_BIND="gpu:none", SLURM_GPUS_ON_NODE="4")
    assert via_mpi(envs, probe=probe) == ["0", "1", "2", "3"]
    assert via_slurm(envs, probe=probe) == ["0", "1", "2", "3"]
    assert calls == []


# --------------------------------------------------------------------------------------------
# Two nodes of different GPU counts (node1 4, node2 2)
# --------------------------------------------------------------------------------------------

TWO = ["node1", "node1", "node2", "node2"]
THREE_ONE = ["node1", "node1", "node1", "node2"]


@pytest.mark.parametrize("placement, cvd, gpu_vars, expected", [
    pytest.param(TWO, ["0", "1", "0", "1"], dict(SLURMD_TRES_BIND="gpu:per_task:1"),
                 ["0", "1", "0", "1"], id="--gpus-per-task=1 on both nodes"),
    pytest.param(TWO, ["0,1", "0,1", "0,1", "0,1"], {}, ["0", "1", "0", "1"],
                 id="--gpus-per-node=2 on both nodes: divided"),
    pytest.param(TWO, ["0,1,2,3", "0,1,2,3", "0,1", "0,1"], {}, ["0", "1", "0", "1"],
                 id="each node's own list, one GPU per task for every node"),
    pytest.param(THREE_ONE, ["0", "1", "2", "0"], dict(SLURMD_TRES_BIND="gpu:per_task:1"),
                 ["0", "1", "2", "0"], id="-n4 --gpus-per-task=1 placed 3,1"),
    pytest.param(THREE_ONE, ["0,1,2,3"] * 3 + ["0,1"], {}, ["0", "1", "2", "0"],
                 id="-n4 --gpus-per-node: 3 tasks divide 4, one task gets 1 like them"),
])
def test_two_nodes(placement, cvd, gpu_vars, expected):
    envs = job(cvd, placement, **gpu_vars)
    assert via_mpi(envs, placement) == expected


def test_slurm_alone_cannot_know_other_ranks_bound_gpus():
    envs = job(["0,1", "2,3"], ONE_NODE[:2], SLURMD_TRES_BIND="gpu:per_task:2")
    opts = make_options(source="slurm")
    res = resolve_job(opts, envs[1], probe=_no_probe)
    assert res.gpus_of(1) == (("2", "3"), "own")
    assert res.gpus_of(0) == (None, "unknown")


# --------------------------------------------------------------------------------------------
# Explicit arguments
# --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("cvd, gpu_vars, kwargs, expected", [
    pytest.param(["0,1", "2,3"], dict(SLURMD_TRES_BIND="gpu:per_task:2"),
                 dict(gpus_per_task=1), ["0", "2"], id="gpus_per_task 1 takes the first own"),
    pytest.param(["0,1", "2,3"], dict(SLURMD_TRES_BIND="gpu:per_task:2"),
                 dict(gpus_per_node=8), ["0,1", "2,3"],
                 id="gpus_per_node cannot widen a per-task binding"),
    pytest.param(["0,1", "2,3"], dict(SLURMD_TRES_BIND="gpu:per_task:2"),
                 dict(gpus_per_task=0), ["", ""], id="gpus_per_task 0 hides them"),
    pytest.param(["0"] * 2, {}, dict(gpus_per_task=1), ["0", "0"],
                 id="gpus_per_task 1 on a shared GPU keeps it shared"),
])
def test_explicit_arguments_with_binding(cvd, gpu_vars, kwargs, expected):
    envs = job(cvd, ONE_NODE[:len(cvd)], **gpu_vars)
    assert via_mpi(envs, ONE_NODE[:len(cvd)], **kwargs) == expected
    assert via_slurm(envs, **kwargs) == expected


def test_gpus_per_node_ignored_for_bound_tasks_says_so():
    envs = job(["0,1", "2,3"], ONE_NODE[:2], SLURMD_TRES_BIND="gpu:per_task:2")
    res = run_job(envs, ONE_NODE[:2], rank=0, gpus_per_node=8)
    assert any("gpus_per_node=8 is ignored" in n and "per_task:2" in n for n in res.notes)


@pytest.mark.parametrize("cvd, gpu_vars, gpus_per_task, fragment", [
    pytest.param(["0,1", "2,3"], dict(SLURMD_TRES_BIND="gpu:per_task:2"), 3, "gpus_per_task=3",
                 id="more than Slurm bound to the task"),
    pytest.param(["0"] * 2, {}, 2, "share 1", id="more than the shared list has"),
])
def test_explicit_gpus_per_task_above_the_list_is_an_error(cvd, gpu_vars, gpus_per_task,
                                                           fragment):
    envs = job(cvd, ONE_NODE[:len(cvd)], **gpu_vars)
    with pytest.raises(ResolutionError, match="gpus_per_task") as excinfo:
        via_mpi(envs, ONE_NODE[:len(cvd)], gpus_per_task=gpus_per_task)
    assert fragment in str(excinfo.value) or "gpus_per_task" in str(excinfo.value)
    with pytest.raises(ResolutionError, match="gpus_per_task"):
        via_slurm(envs, gpus_per_task=gpus_per_task)


@pytest.mark.parametrize("cvd, probe, kwargs, fragment", [
    pytest.param(["", ""], None, dict(gpus_per_task=1),
                 "have no GPUs (from CUDA_VISIBLE_DEVICES)", id="CUDA_VISIBLE_DEVICES empty"),
    pytest.param([None, None], (0, True), dict(gpus_per_task=1),
                 "have no GPUs (from nvidia-smi)", id="a CPU-only node"),
    pytest.param([None, None], None, dict(gpus_per_node=1, gpus_per_task=1),
                 "need 2 GPUs on node1, which has 1 (from gpus_per_node)",
                 id="gpus_per_node=1 for two tasks of one GPU each"),
    pytest.param([None, None], (1, False), dict(gpus_per_task=1),
                 "need 2 GPUs on node1, which has 1 (from nvidia-smi)",
                 id="nvidia-smi's one GPU for two tasks of one GPU each"),
])
def test_gpus_asked_for_and_not_there_are_an_error(cvd, probe, kwargs, fragment):
    """TensorFlow raises 'Requested more GPUs per node than available' here (with an empty
    CUDA_VISIBLE_DEVICES it counts one GPU): never a silent CPU run nor a shared GPU."""
    envs = job(cvd, ONE_NODE[:2])
    found = (lambda: probe) if probe else _no_probe
    for rank in range(2):
        with pytest.raises(ResolutionError, match=re.escape(fragment)):
            run_job(envs, ONE_NODE[:2], rank=rank, probe=found, **kwargs)
    with pytest.raises(ResolutionError, match=re.escape(fragment)):
        via_slurm(envs, probe=found, **kwargs)


@pytest.mark.parametrize("cvd, probe, kwargs, expected", [
    pytest.param(["0", "0"], None, dict(gpus_per_task=1), ["0", "0"],
                 id="Slurm's one GPU for two tasks stays shared"),
    pytest.param([None, None], None, dict(gpus_per_node=2, gpus_per_task=1), ["0", "1"],
                 id="gpus_per_node=2 for two tasks of one GPU each"),
    pytest.param([None, None], (2, False), dict(gpus_per_task=1), ["0", "1"],
                 id="nvidia-smi's two GPUs for two tasks of one GPU each"),
    pytest.param(["", ""], None, {}, ["", ""], id="no GPUs, none asked for"),
    pytest.param(["", ""], None, dict(gpus_per_task=0), ["", ""], id="no GPUs, 0 asked for"),
    pytest.param([None, None], (0, True), {}, ["", ""], id="a CPU-only node, none asked for"),
])
def test_gpus_asked_for_and_there(cvd, probe, kwargs, expected):
    envs = job(cvd, ONE_NODE[:2])
    found = (lambda: probe) if probe else _no_probe
    assert via_mpi(envs, ONE_NODE[:2], probe=found, **kwargs) == expected
    assert via_slurm(envs, probe=found, **kwargs) == expected


TWO_NODES = ["node1"] * 4 + ["node2"] * 4


@pytest.mark.parametrize("kwargs, expected", [
    pytest.param({}, ["0", "1", "2", "3", "0", "0", "1", "1"],
                 id="one GPU per task everywhere, two tasks per GPU on the smaller node"),
    pytest.param(dict(uneven_gpus=True), ["0", "1", "2", "3"] + ["0,1"] * 4,
                 id="uneven_gpus: node2's tasks each keep both"),
    pytest.param(dict(gpus_per_task=1), ["0", "1", "2", "3", "0", "0", "0", "0"],
                 id="an explicit gpus_per_task: that many each (the first of a shared list)"),
])
def test_workers_with_different_gpu_counts_get_the_same_number(kwargs, expected):
    """The issue's job: node1 with 4 GPUs, node2 with 2, four tasks each (MPI, node by node,
    with the fewest and most of every node from the exchange; and every record)."""
    envs = job(["0,1,2,3"] * 4 + ["0,1"] * 4, TWO_NODES)
    assert via_mpi(envs, TWO_NODES, **kwargs) == expected
    assert via_mpi(envs, TWO_NODES, details=True, **kwargs) == expected


def test_gpu_nodes_and_cpu_nodes_in_one_job_are_an_error_unless_uneven():
    placement = ["node1", "node1", "node2", "node2"]
    envs = job(["0,1", "0,1", "", ""], placement)
    for rank in range(4):
        with pytest.raises(ResolutionError, match=re.escape(
                "workers would get different numbers of GPUs: 0 GPU(s) per task on node2; 1 "
                "GPU(s) per task on node1.")):
            run_job(envs, placement, rank=rank)
    assert via_mpi(envs, placement, uneven_gpus=True) == ["0", "1", "", ""]
    assert via_mpi(envs, placement, gpus_per_task=0) == ["", "", "", ""]


@pytest.mark.parametrize("placement, kwargs, noted", [
    pytest.param(TWO_NODES, {}, True, id="two nodes: the other's GPUs are not checked"),
    pytest.param(["node1"] * 4, {}, False, id="one node: nothing unchecked"),
    pytest.param(TWO_NODES, dict(gpus_per_task=1), False, id="gpus_per_task given: that many"),
])
def test_without_mpi_a_note_says_other_nodes_gpus_are_not_checked(placement, kwargs, noted):
    env = job(["0,1,2,3"] * len(placement), placement)[0]
    res = resolve_job(make_options(source="slurm", **kwargs), env, probe=_no_probe)
    notes = [n for n in res.notes if "not checked without MPI" in n]
    assert notes == ([
        "the other nodes' GPUs are not checked without MPI: each is taken to have what node1 "
        "has (0,1,2,3), as TensorFlow does; start the job with srun --mpi=pmix to check that "
        "every worker gets the same number."] if noted else [])


# --------------------------------------------------------------------------------------------
# The cross-check: lists that no Slurm binding gives
# --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("cvd, gpu_vars, agree", [
    pytest.param(["0,1", "1,2"], {}, False, id="overlapping lists without binding: refused"),
    pytest.param(["0,1", "1,2"], dict(SLURMD_TRES_BIND="gpu:mask_gpu:0x3,0x6"), True,
                 id="the same lists from --gpu-bind=mask_gpu: accepted"),
    pytest.param(["0,1", "2,3"], {}, True,
                 id="disjoint lists without binding (a per-task wrapper): accepted"),
    pytest.param(["0,1", "0,1"], {}, True, id="the same list on both: accepted"),
    pytest.param(["0,1,2", "1,2"], dict(SLURM_GPUS_ON_NODE="3"), True,
                 id="one task given fewer than the node's GPUs is bound: accepted"),
])
def test_check_refuses_lists_no_slurm_binding_gives(cvd, gpu_vars, agree):
    envs = job(cvd, ONE_NODE[:2], **gpu_vars)
    if agree:
        run_job(envs, ONE_NODE[:2], rank=0, verify=True)
        return
    with pytest.raises(MismatchError) as excinfo:
        run_job(envs, ONE_NODE[:2], rank=0, verify=True)
    text = str(excinfo.value)
    assert "gpus" in text and "sees 1,2; rank 0 on node1 sees 0,1" in text
    assert "no Slurm GPU binding" in text and "--gpu-bind" in text
    assert [(d.rank, d.check) for d in excinfo.value.rows] == [(1, "gpus")]


# --------------------------------------------------------------------------------------------
# The pure pieces
# --------------------------------------------------------------------------------------------


def test_without_mpi_notes_speak_of_this_rank_s_node_only():
    """source='slurm': node2's lone rank sees 0,1 and cannot know node1's GPUs: no note that
    node1's 3 tasks share 2 GPUs (a guess from its own list)."""
    placement = ["node1"] * 3 + ["node2"]
    envs = job(["0,1,2,3"] * 3 + ["0,1"], placement, SLURM_GPUS_ON_NODE="2")
    opts = make_options(source="slurm")
    alone = resolve_job(opts, envs[3], probe=_no_probe)
    assert alone.visible_devices == "0,1"
    assert [n for n in alone.notes if "shared" in n] == []


def test_shared_note_names_every_shared_list_of_the_node():
    envs = job(["0", "0", "1", "1"], SLURMD_TRES_BIND="gpu:single:2", SLURM_NTASKS_PER_TRES="2")
    notes = [n for n in run_job(envs, ONE_NODE, rank=3).notes if "shared" in n]
    assert notes == ["GPUs are shared: 4 tasks on node1 use GPU(s) 0 / 1, 2 tasks per GPU as "
                     "Slurm bound them (--ntasks-per-gpu / --gpu-bind=single:2)."]


# --------------------------------------------------------------------------------------------
# The notes, word for word, and the job's GPUs per task
# --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("hosts, shown", [
    pytest.param(["a"], "a", id="one host"),
    pytest.param(["a", "b", "c"], "a, b, c", id="three hosts: all named"),
    pytest.param(["a", "b", "c", "d"], "a, b, c and 1 more", id="four: three and one more"),
    pytest.param(["a", "b", "c", "d", "e"], "a, b, c and 2 more", id="five"),
])
def test_the_cpu_only_note_names_at_most_three_hosts(hosts, shown):
    assert _cpu_only_note(hosts) == (
        f"no GPUs found on {shown} (no nvidia-smi, no /dev/nvidia* devices, "
        "CUDA_VISIBLE_DEVICES and SLURM_GPUS_ON_NODE unset): running on CPU.")


@pytest.mark.parametrize("bind, how", [
    pytest.param("single:1", "SLURMD_TRES_BIND=gpu:single:1", id="Slurm's binding"),
    pytest.param(None, "fewer GPUs than SLURM_GPUS_ON_NODE", id="a subset"),
])
def test_the_ignored_note_names_how_slurm_bound_the_gpus(bind, how):
    assert _ignored_note(2, bind) == (f"gpus_per_node=2 is ignored for tasks that Slurm bound "
                                      f"GPUs to ({how}): each keeps the GPUs Slurm gave it.")


def test_from_slurm_alone_gpus_per_node_ignored_says_so_and_keeps_per_task():
    env = srun_env(0, ["node1"], [2], ["node1"] * 2, CUDA_VISIBLE_DEVICES="1",
                   SLURMD_TRES_BIND="gpu:single:1")
    res = run_job([env], ["node1"], rank=0, mpi_size=1, source="slurm", gpus_per_node=4)
    assert res.own_gpus == ("1",) and res.gpus.per_task == 1
    assert "gpus_per_node=4 is ignored for tasks that Slurm bound GPUs to " \
           "(SLURMD_TRES_BIND=gpu:single:1)" in " ".join(res.notes)
    cpu = run_job([srun_env(0, ["node1"], [1], ["node1"])], ["node1"], rank=0, mpi_size=1,
                  source="slurm", probe=lambda: (0, True))
    assert cpu.gpus.per_task == 0 and any("running on CPU" in n for n in cpu.notes)


def test_with_mpi_the_cpu_only_note_names_the_cpu_only_hosts_the_rank_knows():
    """Where every record was gathered (details), every CPU-only host; else its own node."""
    envs = [srun_env(r, ["node1", "node2"], [1, 1], ["node1", "node2"]) for r in range(2)]
    res = run_job(envs, ["node1", "node2"], rank=0, probe=lambda: (0, True), details=True)
    cpu = [n for n in res.notes if "running on CPU" in n]
    assert cpu == [_cpu_only_note(["node1", "node2"])]
    res = run_job(envs, ["node1", "node2"], rank=1, probe=lambda: (0, True))
    assert [n for n in res.notes if "running on CPU" in n] == [_cpu_only_note(["node2"])]


def test_tasks_per_gpu_from_any_rank_names_the_sharing_in_the_note():
    envs = job(["0", "0", "1", "1"], SLURMD_TRES_BIND="gpu:single:2")
    envs[2]["SLURM_NTASKS_PER_TRES"] = "2"
    notes = run_job(envs, ONE_NODE, rank=0).notes
    assert any("2 tasks per GPU as Slurm bound them" in n for n in notes), notes


# --------------------------------------------------------------------------------------------
# From the ranks' records directly: a host that cannot say, lengths, a node's share
# --------------------------------------------------------------------------------------------

def record(rank: int, host: str, **fields) -> RankRecord:
    """A rank's record as the exchange gathers it (every other field at its default)."""
    return RankRecord(rank=rank, size=2, host=host, launcher=None, **fields)


def layout_of(placement: Sequence[str]) -> Layout:
    return build_layout_runs(runs_of(placement), jobs={"worker": len(placement)},
                             port_base=8888)


NO_ONE_SAYS = ("no rank on n2 reported its GPUs (CUDA_VISIBLE_DEVICES and SLURM_GPUS_ON_NODE "
               "unset, and no local rank 0 ran nvidia-smi); set gpus_per_node or "
               "CUDA_VISIBLE_DEVICES.")


def test_a_host_none_of_whose_ranks_reports_its_gpus_is_an_error_naming_it():
    records = [record(0, "n1", visible=("0",)), record(1, "n2")]
    with pytest.raises(ResolutionError) as caught:
        gpus_from_records(make_options(), layout_of(["n1", "n2"]), records)
    assert str(caught.value) == NO_ONE_SAYS
    assert node_summary(make_options(), [records[1]]) == NodeSummary(
        per_task=NO_LIMIT, fewest=0, most=0, problem=True)
    given = gpus_from_records(make_options(gpus_per_node=2), layout_of(["n1", "n2"]), records)
    assert given.at("n2", 0) == (("0", "1"), "divided")


@pytest.mark.parametrize("placement", [
    pytest.param(["n1"], id="fewer hosts than records"),
    pytest.param(["n1", "n1", "n1"], id="more hosts than records"),
])
def test_records_must_be_one_per_rank_of_the_layout(placement):
    """An internal invariant: the layout and the records describe the same ranks."""
    records = [record(0, "n1", visible=("0",)), record(1, "n1", visible=("1",))]
    with pytest.raises(ValueError, match="zip"):
        gpus_from_records(make_options(), layout_of(placement), records)


@pytest.mark.parametrize("visible, per_task, counts, uneven, expected", [
    pytest.param([("0", "1", "2", "3")] * 2, None, None, False, [("0", "1"), ("2", "3")],
                 id="a node's list divided by its own ranks where the job says nothing"),
    pytest.param([("0", "1", "2", "3")] * 2, 1, (1, 2), False, [("0",), ("1",)],
                 id="the job's GPUs per task where another node divides fewer"),
    pytest.param([("0",), ("1",)], NO_LIMIT, (1, 1), False, [("0",), ("1",)],
                 id="no node divides a list: each rank keeps its own"),
    pytest.param([("0", "1"), ("2", "3")], NO_LIMIT, (1, 2), False, [("0",), ("2",)],
                 id="own lists of two where another node's ranks take one: one each"),
    pytest.param([("0", "1", "2", "3")] * 2, 1, (1, 2), True, [("0",), ("1",)],
                 id="uneven: divided lists take the job's GPUs per task"),
    pytest.param([("0", "1"), ("2", "3")], 1, (1, 2), True, [("0", "1"), ("2", "3")],
                 id="uneven: own lists stay whole"),
])
def test_a_node_s_gpus_take_the_job_s_gpus_per_task(visible, per_task, counts, uneven,
                                                     expected):
    node = [record(r, "n1", visible=v) for r, v in enumerate(visible)]
    gpus = gpus_from_node(make_options(uneven_gpus=uneven), "n1", node, per_task, counts)
    assert [gpus.at("n1", i)[0] for i in range(len(node))] == expected


def test_node_summary_flags_a_list_that_gpus_per_task_cannot_share_and_counts_the_rest():
    """nvidia-smi's one GPU for two tasks with gpus_per_task=1 is a problem every rank must
    see (the error); a node of ranks with GPUs and without is not one (the exchange sees it
    in the counts and gathers every record), nor is a list Slurm gave."""
    probed = [record(0, "n1", probed=1), record(1, "n1")]
    assert node_summary(make_options(gpus_per_task=1), probed).problem is True
    mixed = [record(0, "n1", visible=("0",)), record(1, "n1", visible=())]
    assert node_summary(make_options(), mixed) == NodeSummary(per_task=NO_LIMIT, fewest=0,
                                                              most=1, problem=False)
    given = [record(0, "n1", visible=("0",)), record(1, "n1", visible=("0",))]
    assert node_summary(make_options(gpus_per_task=1), given).problem is False


def test_uneven_gpus_with_mpi_keeps_the_job_s_smallest_part_for_divided_lists():
    """Uneven: node1's 2 tasks and node2's 4 divide 4 GPUs each, one per task everywhere (as
    TensorFlow's gpus_per_node // max_tasks_per_node); every record or node by node."""
    placement = ["node1"] * 2 + ["node2"] * 4
    envs = job(["0,1,2,3"] * 6, placement)
    expected = ["0", "1", "0", "1", "2", "3"]
    assert via_mpi(envs, placement, uneven_gpus=True) == expected
    assert via_mpi(envs, placement, uneven_gpus=True, details=True) == expected


@pytest.mark.parametrize("uneven, gpus", [(False, "0,1"), (True, "0,1,2,3")])
def test_without_mpi_uneven_gpus_lets_a_crowded_node_share_all(uneven, gpus):
    """Slurm's variables alone, 5 tasks on node1 and 2 on node2, 4 GPUs seen on each: evened,
    node1's tasks take 2 each like node2's; uneven, they share all 4."""
    placement = ["node1"] * 5 + ["node2"] * 2
    env = job(["0,1,2,3"] * 7, placement)[0]
    res = resolve_job(make_options(source="slurm", uneven_gpus=uneven), env, probe=_no_probe)
    assert res.visible_devices == gpus


# --------------------------------------------------------------------------------------------
# MIG: one MIG device a task, named by its UUID (CUDA's rule)
# --------------------------------------------------------------------------------------------

MIGS = tuple(f"MIG-{i}a4f1ef-42e4-5de3-91c7-45d71c87eb3f" for i in range(7))
MIG_NOTE = "CUDA lets a process use only one MIG device"


@pytest.mark.parametrize("tasks, kwargs, expected", [
    pytest.param(7, {}, list(MIGS), id="7 MIG devices, 7 tasks: one each"),
    pytest.param(2, {}, list(MIGS[:2]), id="7 MIG devices, 2 tasks: one each, not 3"),
    pytest.param(1, {}, [MIGS[0]], id="7 MIG devices, 1 task: one"),
    pytest.param(2, dict(gpus_per_task=1), list(MIGS[:2]), id="gpus_per_task=1: one each"),
    pytest.param(14, {}, [MIGS[i // 2] for i in range(14)],
                 id="7 MIG devices, 14 tasks: two tasks on each, spread"),
    pytest.param(2, dict(gpus_per_task=0), ["", ""], id="gpus_per_task=0: none"),
])
def test_mig_devices_from_nvidia_smi(tasks, kwargs, expected):
    """CUDA_VISIBLE_DEVICES unset, nvidia-smi lists one GPU in MIG mode with 7 devices: every
    task gets its own MIG device by UUID (unset, every task would land on the same one)."""
    placement = ["node1"] * tasks
    envs = job([None] * tasks, placement)
    probe = lambda: (MIGS, False)  # noqa: E731
    assert via_mpi(envs, placement, probe=probe, **kwargs) == expected
    assert via_slurm(envs, probe=probe, **kwargs) == expected
    notes = run_job(envs, placement, rank=0, probe=probe, **kwargs).notes
    assert [n for n in notes if MIG_NOTE in n] == ([] if kwargs.get("gpus_per_task") == 0 else [
        "MIG devices on node1: each task gets one, named by its UUID in CUDA_VISIBLE_DEVICES, "
        "as CUDA lets a process use only one MIG device. MIG devices have no NVLink or CUDA "
        "IPC between them, so NCCL's all-reduce between them goes through host memory."])


@pytest.mark.parametrize("cvd, gpu_vars", [
    pytest.param([None, None], {}, id="nvidia-smi's MIG devices"),
    pytest.param([",".join(MIGS[:2]), ",".join(MIGS[2:4])],
                 dict(SLURMD_TRES_BIND="gpu:per_task:2"), id="two bound by Slurm to each task"),
])
def test_two_mig_devices_a_task_are_an_error(cvd, gpu_vars):
    envs = job(cvd, ONE_NODE[:2], **gpu_vars)
    probe = lambda: (MIGS, False)  # noqa: E731
    fragment = "the GPUs of node1 are MIG devices"
    for rank in range(2):
        with pytest.raises(ResolutionError, match=fragment):
            run_job(envs, ONE_NODE[:2], rank=rank, probe=probe, gpus_per_task=2)
    with pytest.raises(ResolutionError, match=fragment):
        via_slurm(envs, probe=probe, gpus_per_task=2)


def test_mig_devices_bound_by_slurm_two_a_task_give_one_each():
    """Slurm bound two MIG devices to each task (--gpus-per-task=2): CUDA would use one of
    each task's two; each task is given that one, and the note says why."""
    envs = job([",".join(MIGS[:2]), ",".join(MIGS[2:4])], ONE_NODE[:2],
               SLURMD_TRES_BIND="gpu:per_task:2")
    assert via_mpi(envs, ONE_NODE[:2]) == [MIGS[0], MIGS[2]]
    assert via_slurm(envs) == [MIGS[0], MIGS[2]]
    assert any(MIG_NOTE in n for n in via_slurm_notes(envs[0]))


def test_mig_node_and_a_gpu_node_even_out_at_one():
    """A node of MIG devices (one a task) and a node of plain GPUs (two a task left to
    themselves): every worker gets one (MultiWorkerMirroredStrategy)."""
    placement = ["node1"] * 2 + ["node2"] * 2
    envs = job([",".join(MIGS[:2])] * 2 + ["0,1,2,3"] * 2, placement)
    assert via_mpi(envs, placement) == [MIGS[0], MIGS[1], "0", "1"]


def via_slurm_notes(env) -> List[str]:
    return list(resolve_job(make_options(source="slurm"), env, probe=_no_probe).notes)


# --------------------------------------------------------------------------------------------
# CUDA_VISIBLE_DEVICES before MPI starts, where Slurm's variables give this rank's GPUs
# --------------------------------------------------------------------------------------------

TWO_BY_TWO = ["node1"] * 2 + ["node2"] * 2


@pytest.mark.parametrize("cvd, placement, gpu_vars, kwargs, before, final", [
    pytest.param(["0,1,2,3"] * 4, ONE_NODE, {}, {}, [("0",), ("1",), ("2",), ("3",)],
                 ["0", "1", "2", "3"], id="--gres=gpu:4, four tasks: the same before and after"),
    pytest.param(["0", "1", "2", "3"], ONE_NODE, dict(SLURMD_TRES_BIND="gpu:per_task:1"), {},
                 [("0",), ("1",), ("2",), ("3",)], ["0", "1", "2", "3"],
                 id="--gpus-per-task=1: Slurm's own binding"),
    pytest.param([None] * 4, ONE_NODE, dict(SLURM_GPUS_ON_NODE="4"), {},
                 [("0",), ("1",), ("2",), ("3",)], ["0", "1", "2", "3"],
                 id="SLURM_GPUS_ON_NODE=4, the variable unset"),
    pytest.param([None] * 4, ONE_NODE, {}, dict(gpus_per_node=2),
                 [("0", "1")] * 4, ["0,1"] * 4, id="gpus_per_node=2 for four tasks: shared"),
    pytest.param(["0,1,2,3"] * 2 + ["0,1"] * 2, TWO_BY_TWO, {}, {},
                 [("0", "1"), ("2", "3"), ("0",), ("1",)], ["0", "1", "0", "1"],
                 id="node2 has fewer GPUs: node1's count is evened out after MPI"),
    pytest.param([None] * 4, ONE_NODE, {}, {}, None, ["0", "1", "2", "3"],
                 id="only nvidia-smi can say: nothing before MPI"),
    pytest.param(["0,1"] * 4, ONE_NODE, {}, dict(gpus_per_task=3), None, None,
                 id="more GPUs asked for than there are: nothing before MPI, then the error"),
])
def test_gpus_before_mpi_starts(cvd, placement, gpu_vars, kwargs, before, final):
    """A CUDA-aware MPI may start CUDA in MPI_Init: where Slurm's variables give this rank's
    GPUs, the resolver hears of them before MPI starts; after the exchange it narrows to the
    final answer (an error where CUDA started and the two differ: _tf_resolver)."""
    envs = job(cvd, placement, **gpu_vars)
    events: list = []
    results = run_world(envs, list(placement), events=events, **kwargs)
    for rank in range(len(envs)):
        mine = [e for e in events if e[0] == rank]
        expected = [(rank, "MPI starts")] if before is None else [
            (rank, "GPUs before MPI", before[rank]), (rank, "MPI starts")]
        assert mine == expected
        if final is None:
            assert isinstance(results[rank], ResolutionError)
        else:
            assert results[rank].visible_devices == final[rank]


def test_no_gpus_before_mpi_without_slurm():
    """mpirun without Slurm: nothing says this rank's place before MPI does."""
    envs = [{"OMPI_COMM_WORLD_RANK": str(r), "OMPI_COMM_WORLD_SIZE": "2",
             "OMPI_COMM_WORLD_LOCAL_RANK": str(r), "CUDA_VISIBLE_DEVICES": "0,1"}
            for r in range(2)]
    events: list = []
    results = run_world(envs, ["node1"] * 2, events=events)
    assert [e for e in events if e[1] != "MPI starts"] == []
    assert [r.visible_devices for r in results] == ["0", "1"]


def test_no_gpus_before_mpi_where_slurm_placement_is_unknown():
    env = job(["0,1"], ["node1"])[0]
    assert gpus_before_mpi(make_options(), env, None, 0) is None
    assert gpus_before_mpi(make_options(), env, [("node1", 1)], 0) == ("0", "1")


def test_gpus_before_mpi_count_a_node_that_slurm_lists_twice():
    """--distribution=cyclic: node1 holds ranks 0 and 2, so its two GPUs go one to each."""
    env = job(["0,1"], ["node1"])[0]
    runs = [("node1", 1), ("node2", 1), ("node1", 1)]
    assert gpus_before_mpi(make_options(), env, runs, 2) == ("1",)
    assert gpus_before_mpi(make_options(), env, runs, 0) == ("0",)
