"""The cross-check of Slurm against MPI, and placement, as tables of fake jobs (no real MPI).

Each case builds every rank's RankRecord as the real exchange would deliver it, then runs the
pure resolution for one rank.
"""

from __future__ import annotations

import pytest

from mpi_resolver._errors import MismatchError, ResolutionError
from mpi_resolver._options import make_options
from mpi_resolver._plan import plan
from mpi_resolver._resolution import resolve_job
from tests.unit.jobs import run_job, run_world, srun_env

pytestmark = pytest.mark.unit


BLOCK = ["node1", "node1", "node1", "node2"]      # srun -N2 -n4
CYCLIC = ["node1", "node2", "node1", "node1"]     # srun -N2 -n4 --distribution=cyclic


def test_agreeing_job_is_verified_with_slurms_block_layout():
    envs = [srun_env(r, ["node1", "node2"], [3, 1], BLOCK) for r in range(4)]
    res = run_job(envs, BLOCK, rank=1)
    assert res.verified and res.source == "slurm"
    assert res.cluster() == {"worker": ["node1:8888", "node1:8889", "node1:8890",
                                        "node2:8888"]}
    assert res.visible_devices == "1"


def test_fully_qualified_host_names_are_the_same_host():
    envs = [srun_env(r, ["node1", "node2"], [3, 1], BLOCK) for r in range(4)]
    res = run_job(envs, [h + ".cluster.example.org" for h in BLOCK], rank=3)
    assert res.verified and res.layout.addresses[3] == "node2:8888"


def test_cyclic_distribution_builds_the_spec_from_where_ranks_run():
    envs = [srun_env(r, ["node1", "node2"], [3, 1], CYCLIC, SLURM_DISTRIBUTION="cyclic")
            for r in range(4)]
    res = run_job(envs, CYCLIC, rank=1)
    assert res.cluster() == {"worker": ["node1:8888", "node2:8888", "node1:8889",
                                        "node1:8890"]}
    assert res.visible_devices == "0"          # first GPU of node2, where rank 1 runs
    assert any("differs from TensorFlow" in n for n in res.notes)


def test_host_names_that_do_not_sort_as_strings():
    placement = ["n9", "n9", "n10", "n10"]
    envs = [srun_env(r, ["n9", "n10"], [2, 2], placement) for r in range(4)]
    res = run_job(envs, placement, rank=0)
    assert res.layout.addresses[0] == "n9:8888"  # TensorFlow says n10:8888


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


def test_mpirun_inside_allocation_with_auto_uses_mpi_and_logs_once():
    envs = []
    for r in range(4):
        daemon = 0 if BLOCK[r] == "node1" else 1
        envs.append({"SLURM_PROCID": str(daemon), "SLURM_STEP_NUM_TASKS": "2",
                     "SLURM_STEP_NODELIST": "node[1-2]", "SLURM_STEP_TASKS_PER_NODE": "1(x2)",
                     "OMPI_COMM_WORLD_RANK": str(r), "OMPI_COMM_WORLD_SIZE": "4",
                     "OMPI_COMM_WORLD_LOCAL_RANK": str(BLOCK[:r].count(BLOCK[r]))})
    res = run_job(envs, BLOCK, rank=3)
    assert res.source == "mpi" and not res.verified
    assert res.layout.addresses[3] == "node2:8888"
    assert any("launcher daemons" in n for n in res.notes)


def test_slurm_step_without_mpi_wiring_skips_the_check_with_a_warning():
    env = srun_env(0, ["node1", "node2"], [3, 1], BLOCK, mpi="none")
    opts = make_options(gpus_per_node=0)
    the_plan = plan(opts, env)
    assert not the_plan.use_mpi and not the_plan.verify
    assert any("--mpi=pmix" in n for n in the_plan.notes)
    with pytest.raises(ResolutionError, match="--mpi=pmix"):
        plan(make_options(verify=True), env)
    with pytest.raises(ResolutionError, match="no MPI wiring|without MPI wiring"):
        plan(make_options(source="mpi"), env)


@pytest.mark.parametrize("distribution,placement_ok", [
    ("block", True), ("cyclic", True), ("cyclic:block", True), ("plane=2", False),
    ("arbitrary", False)])
def test_source_slurm_placement_from_variables_alone(distribution, placement_ok):
    actual = CYCLIC if distribution.startswith("cyclic") else BLOCK
    envs = [srun_env(r, ["node1", "node2"], [3, 1], actual, mpi="none",
                     SLURM_DISTRIBUTION=distribution) for r in range(4)]
    for rank in range(4):
        opts = make_options(source="slurm", gpus_per_node=0)
        def call(opts=opts, rank=rank):
            return resolve_job(opts, envs[rank])
        if placement_ok:
            res = call()
            assert res.layout.placement == actual
            assert res.layout.addresses[rank].split(":")[0] == actual[rank]
        else:
            with pytest.raises(MismatchError, match="--mpi=pmix"):
                call()


def test_source_slurm_raises_when_own_variables_contradict_the_layout():
    # SLURM_DISTRIBUTION says block, but Slurm's own SLURMD_NODENAME/GTIDS say otherwise.
    env = srun_env(1, ["node1", "node2"], [3, 1], CYCLIC, mpi="none")
    opts = make_options(source="slurm", gpus_per_node=0)
    with pytest.raises(MismatchError, match="SLURMD_NODENAME=node2"):
        resolve_job(opts, env)


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


def test_a_rank_whose_plan_differs_within_one_step_fails_every_rank():
    """Same step (same digest), but rank 3 also sees Hydra's variables, so it resolves from MPI
    without cross-checking while the others cross-check: every rank raises, with a 'plan'
    row for rank 3, rather than some ranks checking and one not."""
    envs = [srun_env(r, ["node1", "node2"], [3, 1], BLOCK) for r in range(4)]
    envs[3].update(PMI_RANK="3", MPI_LOCALRANKID="0")
    results = run_world(envs, BLOCK, gpus_per_node=0)
    for result in results:
        assert isinstance(result, MismatchError), result
        assert [(d.rank, d.check) for d in result.rows] == [(3, "plan")], result.rows
        assert "Ranks see different launcher variables (rank(s) 3" in str(result)
