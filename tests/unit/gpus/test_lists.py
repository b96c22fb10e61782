"""_gpu_lists: a task's GPU list, Slurm's GPU variables, and lists that no Slurm binding gives."""

from __future__ import annotations

import pytest

from mpi_resolver.core.errors import FormatError
from mpi_resolver.gpus.lists import (SAID_BY, SLURM_SAYS, SlurmGpus, conflicts, is_bound,
                                     narrowing_changes, parse_visible_devices, task_gpus,
                                     task_list)
from tests.unit.envs import MIG_A, MIG_B, UUID_A, UUID_B

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("value, expected", [
    pytest.param(None, None, id="unset says nothing"),
    pytest.param("", (), id="empty means no GPUs, not one"),
    pytest.param("   ", (), id="only spaces means no GPUs"),
    pytest.param("NoDevFiles", (), id="Slurm's NoDevFiles means no GPUs"),
    pytest.param("0", ("0",), id="one index"),
    pytest.param("0,1", ("0", "1"), id="two indices"),
    pytest.param(" 2, 3 ", ("2", "3"), id="spaces around entries are dropped"),
    pytest.param("3,1", ("3", "1"), id="the order is kept, not sorted"),
    pytest.param(f"{UUID_A},{UUID_B}", (UUID_A, UUID_B), id="GPU UUIDs are kept as written"),
    pytest.param(f"{MIG_A},{MIG_B}", (MIG_A, MIG_B), id="MIG UUIDs are kept as written"),
    pytest.param("-1", (), id="a negative index hides every GPU"),
    pytest.param("0,-1,2", ("0",), id="a negative index ends the list"),
    pytest.param("0,1,-1", ("0", "1"), id="a trailing negative index is dropped"),
])
def test_parse_visible_devices(value, expected):
    assert parse_visible_devices(value) == expected


@pytest.mark.parametrize("value, fragment", [
    pytest.param("abc", "entry 'abc'", id="a word is refused"),
    pytest.param("0,0", "lists '0' twice", id="an index twice is refused"),
    pytest.param(f"{UUID_A},{UUID_A}", "twice", id="a UUID twice is refused"),
    pytest.param("0,,1", "entry ''", id="an empty entry is refused"),
    pytest.param("1.5", "entry '1.5'", id="a fraction is refused"),
    pytest.param("GPU-", "entry 'GPU-'", id="a UUID prefix without a UUID is refused"),
    pytest.param("²", "entry '²'", id="a superscript digit is refused"),
])
def test_parse_visible_devices_refuses_malformed_values(value, fragment):
    with pytest.raises(FormatError, match="CUDA_VISIBLE_DEVICES") as excinfo:
        parse_visible_devices(value)
    assert fragment in str(excinfo.value)


@pytest.mark.parametrize("env, expected", [
    pytest.param({}, SlurmGpus(), id="no GPU variables"),
    pytest.param({"SLURMD_TRES_BIND": "gpu:per_task:2"}, SlurmGpus(bind="per_task:2"),
                 id="per_task"),
    pytest.param({"SLURMD_TRES_BIND": "gpu:verbose,map_gpu:3,1"},
                 SlurmGpus(bind="map_gpu:3,1"), id="verbose is dropped, commas kept"),
    pytest.param({"SLURMD_TRES_BIND": "gpu:single:2"}, SlurmGpus(bind="single:2",
                                                                 tasks_per_gpu=2),
                 id="single:K gives K tasks per GPU"),
    pytest.param({"SLURMD_TRES_BIND": "gpu:single:1", "SLURM_NTASKS_PER_TRES": "3"},
                 SlurmGpus(bind="single:1", tasks_per_gpu=3),
                 id="SLURM_NTASKS_PER_TRES wins over single:K"),
    pytest.param({"SLURMD_TRES_BIND": "nic:closest"}, SlurmGpus(), id="another TRES only"),
    pytest.param({"SLURM_GPUS_ON_NODE": "4", "SLURM_GPUS_PER_TASK": "2"},
                 SlurmGpus(on_node=4, per_task=2), id="counts"),
    pytest.param({"SLURM_GPUS_ON_NODE": "four", "SLURM_NTASKS_PER_TRES": "-1"}, SlurmGpus(),
                 id="malformed counts are unset"),
])
def test_slurm_gpus_read(env, expected):
    assert SlurmGpus.read(env) == expected


FOUR_GPUS = ("0", "1", "2", "3")


@pytest.mark.parametrize("visible, slurm, bound", [
    pytest.param(None, SlurmGpus(bind="per_task:1"), False, id="nothing visible is not bound"),
    pytest.param(("0",), SlurmGpus(bind="per_task:1"), True, id="a binding is bound"),
    pytest.param(("0",), SlurmGpus(bind="none"), False, id="gpu-bind=none is not bound"),
    pytest.param(("0",), SlurmGpus(on_node=2), True, id="fewer than the node's: bound"),
    pytest.param(("0", "1"), SlurmGpus(on_node=2), False, id="as many as the node's: not"),
    pytest.param(("0", "1"), SlurmGpus(), False, id="no Slurm variables: not bound"),
])
def test_is_bound(visible, slurm, bound):
    assert is_bound(visible, slurm) is bound


@pytest.mark.parametrize("visible, slurm, probed, gpus_per_node, expected", [
    pytest.param(None, SlurmGpus(), None, None, None, id="nothing known gives None"),
    pytest.param(None, SlurmGpus(), 2, None, ("0", "1"), id="nvidia-smi's count from 0"),
    pytest.param(None, SlurmGpus(), 0, None, (), id="nvidia-smi's 0 gives no GPUs"),
    pytest.param(("2", "3"), SlurmGpus(), 8, None, ("2", "3"),
                 id="CUDA_VISIBLE_DEVICES wins over nvidia-smi"),
    pytest.param((), SlurmGpus(), 4, None, (), id="an empty CUDA_VISIBLE_DEVICES wins"),
    pytest.param(None, SlurmGpus(on_node=3), 8, None, ("0", "1", "2"),
                 id="SLURM_GPUS_ON_NODE wins over nvidia-smi"),
    pytest.param(("2", "3", "5"), SlurmGpus(), None, 2, ("2", "3"),
                 id="gpus_per_node takes that many from CUDA_VISIBLE_DEVICES"),
    pytest.param(("2",), SlurmGpus(), None, 2, ("0", "1"),
                 id="gpus_per_node above what CUDA_VISIBLE_DEVICES lists numbers from 0"),
    pytest.param(None, SlurmGpus(), 8, 2, ("0", "1"), id="gpus_per_node wins over nvidia-smi"),
    pytest.param(("2", "3"), SlurmGpus(), 8, 0, (), id="gpus_per_node 0 means no GPUs"),
    pytest.param(("3",), SlurmGpus(bind="single:1"), None, 4, ("3",),
                 id="gpus_per_node does not widen a bound task's list"),
])
def test_task_gpus(visible, slurm, probed, gpus_per_node, expected):
    assert task_gpus(visible, slurm, probed, gpus_per_node) == expected


@pytest.mark.parametrize("visible, slurm, probed, gpus_per_node, said_by, from_slurm", [
    pytest.param(("3",), SlurmGpus(bind="single:1"), None, 4, "Slurm's binding", True,
                 id="a bound task's list is Slurm's binding"),
    pytest.param(("2", "3"), SlurmGpus(), 8, 2, "gpus_per_node", False,
                 id="gpus_per_node over CUDA_VISIBLE_DEVICES is the user's"),
    pytest.param(None, SlurmGpus(), None, 0, "gpus_per_node", False,
                 id="gpus_per_node alone is the user's"),
    pytest.param((), SlurmGpus(), 4, None, "CUDA_VISIBLE_DEVICES", True,
                 id="CUDA_VISIBLE_DEVICES, even empty, is Slurm's"),
    pytest.param(None, SlurmGpus(on_node=3), 8, None, "SLURM_GPUS_ON_NODE", True,
                 id="SLURM_GPUS_ON_NODE is Slurm's"),
    pytest.param(None, SlurmGpus(), 0, None, "nvidia-smi", False,
                 id="nvidia-smi's count is nobody's binding"),
])
def test_task_list_says_what_gave_the_list(visible, slurm, probed, gpus_per_node, said_by,
                                           from_slurm):
    found = task_list(visible, slurm, probed, gpus_per_node)
    assert found is not None and found.gpus == task_gpus(visible, slurm, probed, gpus_per_node)
    assert (found.said_by, found.from_slurm) == (said_by, from_slurm)
    assert said_by in SAID_BY and (said_by in SLURM_SAYS) is from_slurm


def test_task_list_of_nothing_known_is_none():
    assert task_list(None, SlurmGpus(), None, None) is None


def test_conflicts_names_the_first_overlapping_pair_per_rank():
    lists = {"n1": [(0, ("0", "1"), False), (1, ("1", "2"), False), (2, ("1", "2"), False),
                    (3, ("2", "3"), False)]}
    assert conflicts(lists) == [(1, 0, "n1", ("1", "2"), ("0", "1")),
                                (3, 1, "n1", ("2", "3"), ("1", "2"))]


@pytest.mark.parametrize("value, bind", [
    pytest.param("gpu:per_task:2", "per_task:2", id="gpu alone"),
    pytest.param("nic:closest+gpu:single:1", "single:1", id="gpu after another TRES"),
    pytest.param("gpu:map_gpu:3,1+nic:closest", "map_gpu:3,1", id="gpu before another TRES"),
    pytest.param("gpu:", None, id="gpu with nothing"),
    pytest.param(None, None, id="unset"),
])
def test_slurmd_tres_bind_gpu_part(value, bind):
    env = {} if value is None else {"SLURMD_TRES_BIND": value}
    assert SlurmGpus.read(env).bind == bind


@pytest.mark.parametrize("variable", ["SLURM_GPUS_ON_NODE", "SLURM_GPUS_PER_TASK"])
def test_gpu_counts_beyond_a_node_name_their_variable(variable):
    with pytest.raises(FormatError) as caught:
        SlurmGpus.read({variable: "5000"})
    assert str(caught.value).startswith(f"{variable}='5000': more GPUs than a node can have")


def test_gpus_per_node_equal_to_the_list_takes_the_list_itself():
    assert task_gpus(("2", "3"), SlurmGpus(), None, 2) == ("2", "3")
    assert task_gpus(("2", "3"), SlurmGpus(), None, 3) == ("0", "1", "2")


def test_a_malformed_entry_s_message_says_what_an_entry_may_be():
    with pytest.raises(FormatError) as caught:
        parse_visible_devices("0,abc")
    assert str(caught.value) == (
        "CUDA_VISIBLE_DEVICES='0,abc': entry 'abc' is neither a GPU index nor a GPU-/MIG- UUID; "
        "expected e.g. '0,1' or 'GPU-<uuid>,GPU-<uuid>'.")


@pytest.mark.parametrize("current, node, wanted, changes", [
    pytest.param("0,1,2,3", FOUR_GPUS, ("2", "3"), True, id="narrowed from four to two"),
    pytest.param(None, FOUR_GPUS, ("0",), True, id="unset: every GPU of the node, narrowed"),
    pytest.param(None, (), (), False, id="a CPU-only node: nothing to narrow"),
    pytest.param("", ("0",), (), False, id="already empty, none wanted"),
    pytest.param("3,2", FOUR_GPUS, ("2", "3"), False, id="already the wanted ones, any order"),
    pytest.param(None, ("0", "1"), ("0", "1"), False, id="unset, every GPU wanted"),
    pytest.param("0", FOUR_GPUS, ("0", "1"), True, id="widening changes too"),
])
def test_narrowing_changes(current, node, wanted, changes):
    assert narrowing_changes(current, node, wanted) is changes
