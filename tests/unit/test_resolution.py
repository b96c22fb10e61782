"""_resolution: a job resolved for every rank, from Slurm's variables alone and with the MPI
exchange (a thread-based fake of MPI)."""

from __future__ import annotations

import pytest

from mpi_resolver._errors import MismatchError, ResolutionError
from mpi_resolver._mpi_library import MpiLibrary
from mpi_resolver._options import make_options
from mpi_resolver._resolution import resolve_job
from tests.unit.envs import BLOCK, CYCLIC, MPICH_TEXT
from tests.unit.jobs import FakePorts, PerRank, run_job, run_world, srun_env

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


def test_tf_config_is_the_cluster_and_this_ranks_task():
    env = srun_env(2, ["node1", "node2"], [3, 1], BLOCK, mpi="none")
    res = resolve_job(make_options(source="slurm", gpus_per_node=0), env)
    assert res.tf_config() == {
        "cluster": {"worker": ["node1:8888", "node1:8889", "node1:8890", "node2:8888"]},
        "task": {"type": "worker", "index": 2}}
    assert res.source == "slurm" and res.records is None and not res.verified


class _Started(Exception):
    """What the fake transport raises: MPI would start here."""


def _starts_mpi(calls):
    def transport():
        calls.append("transport")
        raise _Started
    return transport


@pytest.mark.parametrize("have_comm, mpi_running, starts", [
    (False, False, False), (True, False, True), (False, True, True)])
def test_an_unwired_step_starts_mpi_only_where_mpi_is_already_there(
        have_comm, mpi_running, starts):
    """srun --mpi=none: MPI_Init could abort, so Slurm alone, unless MPI is already running or
    a communicator was given (then the cross-check runs)."""
    env = srun_env(0, ["node1", "node2"], [3, 1], BLOCK, mpi="none")
    calls: list = []
    call = lambda: resolve_job(make_options(gpus_per_node=0), env,  # noqa: E731
                               have_comm=have_comm, mpi_running=mpi_running,
                               transport=_starts_mpi(calls))
    if starts:
        with pytest.raises(_Started):
            call()
        assert calls == ["transport"]
    else:
        assert call().source == "slurm" and calls == []


def test_a_plan_that_needs_mpi_without_a_transport_is_an_internal_error():
    env = srun_env(0, ["node1", "node2"], [3, 1], BLOCK)
    with pytest.raises(ResolutionError, match="internal: MPI is needed but no transport"):
        resolve_job(make_options(gpus_per_node=0), env)


def test_the_library_is_read_and_its_warnings_come_before_mpi_starts():
    env = srun_env(0, ["node1", "node2"], [3, 1], BLOCK, mpi="pmi2")
    calls: list = []
    with pytest.raises(_Started):
        resolve_job(make_options(gpus_per_node=0), env,
                    library=lambda: MpiLibrary(MPICH_TEXT),
                    warn=lambda warnings: calls.append(list(warnings)),
                    transport=_starts_mpi(calls))
    assert len(calls) == 2 and calls[1] == "transport"
    assert len(calls[0]) == 1 and "UCX netmod under srun --mpi=pmi2 on 2 nodes" in calls[0][0]


def test_a_library_that_cannot_speak_the_plugin_stops_before_mpi():
    env = srun_env(0, ["node1", "node2"], [3, 1], BLOCK)
    calls: list = []
    with pytest.raises(ResolutionError, match="`srun --mpi=pmi2`"):
        resolve_job(make_options(gpus_per_node=0), env,
                    library=lambda: MpiLibrary(MPICH_TEXT), transport=_starts_mpi(calls))
    assert calls == []


@pytest.mark.parametrize("details", [False, True])
def test_records_of_every_rank_come_back_with_details(details):
    envs = [srun_env(r, ["node1", "node2"], [3, 1], BLOCK) for r in range(4)]
    results = run_world(envs, BLOCK, gpus_per_node=0, details=details)
    for rank, res in enumerate(results):
        assert res.rank == rank and res.verified, res
        if details:
            assert [(r.rank, r.host) for r in res.records] == list(enumerate(BLOCK))
        else:
            assert res.records is None


def test_a_rank_that_cannot_read_slurm_fails_every_rank_with_its_error():
    envs = [srun_env(r, ["node1", "node2"], [3, 1], BLOCK) for r in range(4)]
    results = run_world(envs, BLOCK, gpus_per_node=0,
                        tasks_per_node=PerRank(None, None, {"node9": 4}, None))
    for res in results:
        assert type(res) is ResolutionError, res
        assert str(res).startswith("rank 2 on node1: ResolutionError: tasks_per_node names "
                                   "node9, which are not in SLURM_STEP_NODELIST"), res


def test_the_transport_is_closed_and_auto_ports_released_after_the_exchange():
    envs = [srun_env(r, ["node1", "node2"], [3, 1], BLOCK) for r in range(4)]
    ports = FakePorts()
    results = run_world(envs, BLOCK, gpus_per_node=0, port_base="auto", ports=ports)
    assert all(not isinstance(r, Exception) for r in results), results
    assert run_world.last.closed == [True] * 4
    assert ports.held == {"node1": set(), "node2": set()}
    assert results[0].layout.addresses == [f"{h}:{p}" for h, p in ports.tried]


def test_the_transport_is_closed_also_when_a_rank_fails():
    envs = [srun_env(r, ["node1", "node2"], [3, 1], BLOCK) for r in range(4)]
    envs[3]["SLURM_STEP_ID"] = "1"
    results = run_world(envs, BLOCK, gpus_per_node=0)
    assert all(isinstance(r, MismatchError) for r in results), results
    assert run_world.last.closed == [True] * 4
