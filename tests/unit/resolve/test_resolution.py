"""_resolution: a job resolved for every rank, from Slurm's variables alone and with the MPI
exchange (a thread-based fake of MPI)."""

from __future__ import annotations

import pytest

from mpi_resolver.core.errors import MismatchError, ResolutionError
from mpi_resolver.launch.mpi_library import MpiLibrary
from mpi_resolver.options import make_options
from mpi_resolver.network.ports import ROOM, auto_base, candidates
from mpi_resolver.resolve.resolution import resolve_job
from tests.unit.envs import BLOCK, CYCLIC, MPICH_TEXT
from tests.unit.jobs import FakePorts, PerRank, ThreadWorld, run_job, run_world, srun_env

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
    results = run_world(envs, BLOCK)
    for rank, res in enumerate(results):  # Slurm's procids are the daemons': MPI gives the ranks
        assert res.source == "mpi" and not res.verified, res
        assert res.rank == rank and res.task == ("worker", rank)
        assert res.layout.addresses == ["node1:8888", "node1:8889", "node1:8890", "node2:8888"]
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


@pytest.mark.parametrize("details", [None, False, True], ids=["default", "False", "True"])
def test_records_of_every_rank_come_back_with_details(details):
    envs = [srun_env(r, ["node1", "node2"], [3, 1], BLOCK) for r in range(4)]
    results = run_world(envs, BLOCK, gpus_per_node=0, details=details)
    for rank, res in enumerate(results):
        assert res.rank == rank and res.verified, res
        if details:
            assert [(r.rank, r.size, r.host) for r in res.records] == [
                (r, 4, host) for r, host in enumerate(BLOCK)]
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


def test_by_default_an_unwired_step_resolves_from_slurm_without_mpi():
    env = srun_env(1, ["node1", "node2"], [3, 1], BLOCK, mpi="none")
    res = resolve_job(make_options(gpus_per_node=0), env)  # no transport: MPI never starts
    assert res.source == "slurm" and res.rank == 1


def test_slurm_alone_notes_where_it_differs_from_tensorflow():
    envs = [srun_env(r, ["node1", "node2"], [3, 1], CYCLIC, mpi="none",
                     SLURM_DISTRIBUTION="cyclic") for r in range(4)]
    res = resolve_job(make_options(source="slurm", gpus_per_node=0), envs[1])
    assert res.notes == [
        "the ClusterSpec differs from TensorFlow's SlurmClusterResolver: it would put rank 1 "
        "on node1, but rank 1 runs on node2 (SLURM_DISTRIBUTION=cyclic, node order "
        "node1,node2); using where ranks run."]


@pytest.mark.parametrize("mpi, advice", [("pmix", "`srun --mpi=pmix`"),
                                         ("pmi2", "`srun --mpi=pmi2`")])
def test_slurm_alone_advises_the_launch_of_this_steps_plugin(mpi, advice):
    env = srun_env(0, ["node1", "node2"], [2, 2], ["node1"] * 2 + ["node2"] * 2, mpi=mpi,
                   SLURM_DISTRIBUTION="plane=2")
    with pytest.raises(MismatchError) as excinfo:
        resolve_job(make_options(source="slurm", gpus_per_node=0), env)
    assert str(excinfo.value).endswith(
        f"Launch with {advice} so that mpi_resolver learns placement from MPI "
        "(source='auto'), or use --distribution=block.")


def _mpirun_envs(hosts):
    return [{"OMPI_COMM_WORLD_RANK": str(r), "OMPI_COMM_WORLD_SIZE": str(len(hosts)),
             "OMPI_COMM_WORLD_LOCAL_RANK": str(hosts[:r].count(h))}
            for r, h in enumerate(hosts)]


def test_an_error_before_the_exchange_is_raised_as_it_is():
    """A failure while this rank prepares its record (here: its host name) is not hidden by
    the clean-up after it."""
    world = ThreadWorld(1)

    def no_name():
        raise OSError("no host name")
    with pytest.raises(OSError, match="no host name"):
        resolve_job(make_options(gpus_per_node=0, port_base="auto"), _mpirun_envs(["a"])[0],
                    transport=lambda: world.transport(0), hostname=no_name,
                    ports=FakePorts().on("a"))
    assert world.closed == [True]


@pytest.mark.parametrize("details", [False, True])
def test_an_mpirun_of_one_rank(details):
    res = run_job(_mpirun_envs(["a"]), ["a"], rank=0, gpus_per_node=0, details=details)
    assert res.cluster() == {"worker": ["a:8888"]} and res.source == "mpi"
    assert (res.records is not None) is details


@pytest.mark.parametrize("moved", [False, True], ids=["all aimed ports free", "rank 0 moved"])
def test_auto_ports_with_mpi_keep_the_lowest_as_the_port_base(moved):
    aimed = auto_base("", ROOM)  # mpirun without a job id: the key is ''
    ports = FakePorts({"a": {aimed}} if moved else {})
    res = run_job(_mpirun_envs(["a", "a", "b"]), ["a", "a", "b"], rank=2, gpus_per_node=0,
                  port_base="auto", ports=ports)
    picked = [res.layout.port_of(r) for r in range(3)]
    assert res.layout.port_base == min(picked) and picked[0] != picked[1]
    # a taken port moves to the next candidate drawn from the job key, host and rank
    assert picked == [list(candidates(aimed, "/a/0", 2))[1] if moved else aimed, aimed + 1, aimed]


def test_mpirun_checks_a_declared_tasks_per_node():
    with pytest.raises(MismatchError, match="tasks_per_node=2 does not match where MPI ranks"):
        run_job(_mpirun_envs(["a", "a", "b"]), ["a", "a", "b"], rank=0, gpus_per_node=0,
                tasks_per_node=2)
    res = run_job(_mpirun_envs(["a", "b", "a"]), ["a", "b", "a"], rank=0, gpus_per_node=0,
                  tasks_per_node={"a": 2, "b": 1})
    assert res.cluster() == {"worker": ["a:8888", "b:8888", "a:8889"]}


def test_where_slurm_cannot_place_ranks_mpi_does_with_slurms_node_names():
    """plane=2 on 2 nodes: the exchange gives where ranks run; MPI's long host names are
    written as Slurm names the nodes."""
    placement = ["node1", "node1", "node2", "node2", "node1"]
    envs = [srun_env(r, ["node1", "node2"], [3, 2], placement, SLURM_DISTRIBUTION="plane=2")
            for r in range(5)]
    hosts = [f"{h}.cluster.example" for h in placement]
    res = run_job(envs, hosts, rank=4, gpus_per_node=0)
    assert res.cluster() == {"worker": ["node1:8888", "node1:8889", "node2:8888",
                                        "node2:8889", "node1:8890"]}
