"""_resolution: a job resolved for every rank, from Slurm's variables alone and with the MPI
exchange (a thread-based fake of MPI)."""

from __future__ import annotations

import pytest

from mpi_resolver._errors import MismatchError
from mpi_resolver._options import make_options
from mpi_resolver._resolution import resolve_job
from tests.unit.envs import BLOCK, CYCLIC
from tests.unit.jobs import run_job, run_world, srun_env

pytestmark = pytest.mark.unit


def test_agreeing_job_is_verified_with_slurms_block_layout():
    envs = [srun_env(r, ["node1", "node2"], [3, 1], BLOCK) for r in range(4)]
    res = run_job(envs, BLOCK, rank=1)
    assert res.verified and res.source == "slurm"
    assert res.cluster() == {"worker": ["node1:8888", "node1:8889", "node1:8890",
                                        "node2:8888"]}
    assert res.visible_devices == "1"


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
