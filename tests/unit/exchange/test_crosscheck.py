"""The cross-check of Slurm against MPI, and placement, as tables of fake jobs (no real MPI).

Each case builds every rank's RankRecord as the real exchange would deliver it, then runs the
pure resolution for one rank.
"""

from __future__ import annotations

import pytest

from mpi_resolver.exchange.crosscheck import (Difference, compare, format_table, likely_cause,
                                      own_differences, raise_mismatch)
from mpi_resolver.core.errors import MismatchError, ResolutionError
from mpi_resolver.exchange.records import RankRecord
from mpi_resolver.launch.slurm_step import SlurmStep
from tests.unit.envs import BLOCK
from tests.unit.jobs import run_job, run_world, srun_env

pytestmark = pytest.mark.unit


def test_fully_qualified_host_names_are_the_same_host():
    envs = [srun_env(r, ["node1", "node2"], [3, 1], BLOCK) for r in range(4)]
    res = run_job(envs, [h + ".cluster.example.org" for h in BLOCK], rank=3)
    assert res.verified and res.layout.addresses[3] == "node2:8888"


MISMATCH_CASES = [
    # (name, per-rank env changes, MPI size seen, expected words in the cause)
    ("srun without the --mpi plugin the MPI speaks: each task is an MPI world of one",
     {}, 1, "srun without the --mpi plugin this MPI speaks"),
    ("mpirun inside salloc: Slurm's variables describe the launcher daemons",
     {"mpirun": True}, None, "inside a Slurm allocation"),
    ("a Slurm step with fewer tasks than the MPI world",
     {"SLURM_STEP_NUM_TASKS": "2", "SLURM_STEP_TASKS_PER_NODE": "1,1"}, None,
     "fewer tasks|smaller than the MPI world"),
    ("MPI not wired to the step: ranks come from different steps",
     {"SLURM_STEP_ID": "rank-dependent"}, None, "not wired to the step"),
    ("MPI numbers ranks differently from SLURM_PROCID",
     {"SLURM_PROCID": "reversed"}, None, "numbers the ranks differently"),
    ("a rank runs on another host than Slurm says",
     {"SLURMD_NODENAME": "node9"}, None, "other hosts"),
]


@pytest.mark.parametrize("name,change,mpi_size,cause", MISMATCH_CASES,
                         ids=[c[0] for c in MISMATCH_CASES])
def test_mismatch_raises_with_table_and_cause(name, change, mpi_size, cause):
    envs = [srun_env(r, ["node1", "node2"], [3, 1], BLOCK) for r in range(4)]
    for r, env in enumerate(envs):
        if change.get("mpirun"):
            daemon = 0 if BLOCK[r] == "node1" else 1
            env.update(SLURM_PROCID=str(daemon), SLURM_STEP_NUM_TASKS="2",
                       SLURM_STEP_TASKS_PER_NODE="1,1", OMPI_COMM_WORLD_RANK=str(r),
                       OMPI_COMM_WORLD_SIZE="4", OMPI_COMM_WORLD_LOCAL_RANK="0")
            continue
        for key, value in change.items():
            if value == "rank-dependent":
                value = str(r % 2)
            elif value == "reversed":
                value = str(3 - r)
            env[key] = value
    for rank in range(4):
        kwargs = {"verify": True}
        with pytest.raises(MismatchError, match=cause) as info:
            run_job(envs, BLOCK, rank=rank, mpi_size=mpi_size, **kwargs)
        text = str(info.value)
        assert "Slurm says" in text and "MPI says" in text and "Likely cause" in text
        assert info.value.rows, "the error carries its per-rank rows"


def test_nodes_with_different_gpu_counts_use_their_own_count():
    """The rule: each node's own GPU list; gpus_per_task = min over nodes of GPUs // tasks."""
    placement = ["node1", "node1", "node2", "node2"]
    envs = [srun_env(r, ["node1", "node2"], [2, 2], placement,
                     CUDA_VISIBLE_DEVICES="0,1,2,3" if placement[r] == "node1" else "0,1")
            for r in range(4)]
    got = [run_job(envs, placement, rank=r) for r in range(4)]
    assert [g.visible_devices for g in got] == ["0", "1", "0", "1"]
    assert got[0].gpus.per_task == 1
    for rank in range(4):  # node2 cannot give 2 tasks 2 GPUs each: every rank says so
        with pytest.raises(ResolutionError, match="node2, which has 2"):
            run_job(envs, placement, rank=rank, gpus_per_task=2)


def test_gpu_probe_runs_once_per_node_and_its_failure_reaches_every_rank():
    placement = ["node1", "node1", "node2", "node2"]
    envs = [srun_env(r, ["node1", "node2"], [2, 2], placement) for r in range(4)]
    calls = []

    def probe():
        calls.append(1)
        raise ResolutionError("nvidia-smi was not found on PATH; set gpus_per_node")

    results = run_world(envs, placement, probe=probe)
    assert len(calls) == 2  # local rank 0 of each node
    for result in results:
        assert isinstance(result, ResolutionError), result
        assert "rank 0 on node1: nvidia-smi" in str(result)




# --------------------------------------------------------------------------------------------
# The comparison itself, row by row
# --------------------------------------------------------------------------------------------

def rec(rank: int, host: str = "n1", procid="same", num_tasks="4", nodename=None,
        launcher="pmix", **more):
    """A record of MPI rank ``rank`` (Slurm's task id the same unless ``procid`` says)."""
    return RankRecord(rank=rank, size=4, host=host, launcher=launcher,
                      procid=str(rank) if procid == "same" else procid, num_tasks=num_tasks,
                      nodename=nodename, **more)


HOSTS = ["n1", "n1", "n1", "n2"]


@pytest.mark.parametrize("record, size, host_of, rows", [
    pytest.param(rec(3, procid=None), 4, None,
                 [Difference(3, "step", "not a Slurm task", "rank 3")], id="no Slurm task"),
    pytest.param(rec(0, num_tasks="2"), 4, None,
                 [Difference(0, "size", "2 tasks", "4 processes")], id="step smaller"),
    pytest.param(rec(0, num_tasks=None), 1, None,
                 [Difference(0, "size", "? tasks", "1 process")], id="task count unknown"),
    pytest.param(rec(0, procid="1"), 4, None,
                 [Difference(0, "rank", "SLURM_PROCID=1", "rank 0")], id="renumbered"),
    pytest.param(rec(0, nodename="n1", host="n2"), 4, None,
                 [Difference(0, "host", "n1", "n2")], id="SLURMD_NODENAME says another host"),
    pytest.param(rec(3, host="n1"), 4, HOSTS.__getitem__,
                 [Difference(3, "host", "n2", "n1")], id="Slurm's placement, last task"),
    pytest.param(rec(0, procid="4", host="nX"), 4, HOSTS.__getitem__,
                 [Difference(0, "rank", "SLURM_PROCID=4", "rank 0")],
                 id="a task id outside the step: no placement to look up"),
    pytest.param(rec(0, procid="x", host="nX"), 4, HOSTS.__getitem__,
                 [Difference(0, "rank", "SLURM_PROCID=x", "rank 0")],
                 id="a task id that is no number: no placement to look up"),
    pytest.param(rec(1), 4, HOSTS.__getitem__, [], id="all agree"),
])
def test_own_differences(record, size, host_of, rows):
    assert own_differences(record, size, host_of) == rows


def step_env(**more):
    return {"SLURM_PROCID": "0", "SLURM_STEP_NUM_TASKS": "4", "SLURM_STEP_NODELIST": "n[1-2]",
            "SLURM_STEP_TASKS_PER_NODE": "3,1", **more}


def test_compare_reads_slurm_s_placement_from_the_step():
    records = [rec(r, host=h) for r, h in enumerate(["n1", "n2", "n1", "n1"])]
    assert compare(records, SlurmStep(step_env(SLURM_DISTRIBUTION="cyclic"))) == []
    assert compare(records, SlurmStep(step_env())) == [Difference(1, "host", "n1", "n2"),
                                                       Difference(3, "host", "n2", "n1")]
    assert compare(records, None) == []  # without the step: nothing to place the ranks by


def test_compare_ignores_a_placement_of_another_size():
    records = [rec(r, host="nX", num_tasks="4") for r in range(4)]
    step = SlurmStep(step_env(SLURM_STEP_TASKS_PER_NODE="2,1"))  # 3 tasks, not 4
    assert [d.check for d in compare(records, step)] == []


def test_compare_names_ranks_whose_plan_or_step_differs_from_rank_0_s():
    records = [rec(0, plan="slurm+check", step="a"), rec(1, plan="mpi", step="a"),
               rec(2, plan="slurm+check", step="b"), rec(3, plan="slurm+check", step="a")]
    assert compare(records, None) == [
        Difference(1, "plan", "rank 0 resolves from slurm+check", "this rank from mpi"),
        Difference(2, "step", "step b", "same MPI world as rank 0 (step a)")]
    alike = [rec(r, plan="mpi", step="a") for r in range(4)]
    assert compare(alike, None) == []
    # a rank outside any step is named by its own row ('not a Slurm task'), not a step row
    one_step = [rec(0, step="a"), rec(1, step=None), rec(2, step="a"), rec(3, step="a")]
    assert [d.check for d in compare(one_step, None)] == []


def test_compare_names_gpu_lists_no_binding_gives():
    records = [rec(0, visible=("0", "1"), num_tasks="2"),
               rec(1, visible=("1", "2"), num_tasks="2")]
    assert compare(records, None) == [Difference(
        1, "gpus", "no GPU binding (SLURMD_TRES_BIND unset)", "sees 1,2; rank 0 on n1 sees 0,1")]


def test_raise_mismatch_says_how_many_differences_the_table_and_the_cause():
    records = [rec(0, procid="1"), rec(1, procid="0"), rec(2), rec(3, host="n2")]
    with pytest.raises(MismatchError) as caught:
        raise_mismatch(records, SlurmStep(step_env()))
    e = caught.value
    assert str(e).startswith("Slurm and MPI disagree about this job (2 differences).\nrank  check")
    assert "\nLikely cause: MPI numbers the ranks differently" in str(e)
    assert e.rows == (Difference(0, "rank", "SLURM_PROCID=1", "rank 0"),
                      Difference(1, "rank", "SLURM_PROCID=0", "rank 1"))
    assert e.records == records
    with pytest.raises(MismatchError, match=r"\(1 difference\)\."):
        raise_mismatch([rec(0, procid="1", num_tasks="2"), rec(1, num_tasks="2")], None)
    raise_mismatch([rec(r, host=HOSTS[r]) for r in range(4)], SlurmStep(step_env()))  # agree
    with pytest.raises(MismatchError, match="3     host   n2"):  # the step places the ranks
        raise_mismatch([rec(r) for r in range(4)], SlurmStep(step_env()))


@pytest.mark.parametrize("size, slurm_tasks, cause", [
    pytest.param(1, 2, "MPI sees a world of 1 process", id="world of one, 2 tasks"),
    pytest.param(1, 1, "Slurm and MPI disagree; see the table.", id="world of one, 1 task"),
    pytest.param(1, None, "Slurm and MPI disagree; see the table.", id="no task count"),
])
def test_world_of_one_needs_more_than_one_slurm_task(size, slurm_tasks, cause):
    records = [rec(0)][:size]
    assert likely_cause(records, [], slurm_tasks).startswith(cause)


def test_mpirun_in_an_allocation_is_read_from_rank_0_s_record():
    records = [rec(0, launcher="openmpi"), rec(1, procid=None, launcher="openmpi")]
    assert "inside a Slurm allocation" in likely_cause(records, [], 2)
    outside = [rec(0, procid=None, launcher="openmpi"), rec(1, launcher="openmpi")]
    assert "inside a Slurm allocation" not in likely_cause(outside, [], 2)


def test_not_the_step_needs_a_step_row_or_more_slurm_tasks():
    records = [rec(r) for r in range(2)]
    assert likely_cause(records, [], None) == "Slurm and MPI disagree; see the table."
    assert "is not the Slurm step (3 tasks)" in likely_cause(records, [], 3)
    rows = [Difference(1, "step", "step b", "same MPI world as rank 0 (step a)")]
    assert "is not the Slurm step (None tasks)" in likely_cause(records, rows, None)


@pytest.mark.parametrize("count, cut", [(50, False), (51, True)])
def test_the_table_shows_50_rows(count, cut):
    rows = [Difference(r, "rank", f"SLURM_PROCID={r + 1}", f"rank {r}") for r in range(count)]
    text = format_table(rows)
    assert text.endswith("... and 1 more rows") is cut
    assert len(text.splitlines()) == 1 + 50 + cut
