"""Ports: TensorFlow's fixed port_base checked on each rank, and port_base='auto' (ports.py):
derived from the Slurm step without MPI, picked free per host and exchanged with MPI."""

from __future__ import annotations

from typing import Dict, List

import pytest

from mpi_resolver.network import ports as P
from mpi_resolver.core.errors import ResolutionError
from mpi_resolver.launch.launchers import BY_NAME
from mpi_resolver.options import make_options
from mpi_resolver.resolve.resolution import resolve_job
from tests.unit.jobs import FakePorts, PerRank, run_world, srun_env

pytestmark = pytest.mark.unit

TWO_NODES = ["node1", "node1", "node2", "node2"]
SPAN = P.AUTO_LAST - P.AUTO_FIRST + 1


def step_envs(placement: List[str] = TWO_NODES, step: str = "0",
              mpi: str = "pmix") -> List[Dict[str, str]]:
    hosts = list(dict.fromkeys(placement))
    return [srun_env(r, hosts, [placement.count(h) for h in hosts], placement, mpi=mpi,
                     SLURM_STEP_ID=step) for r in range(len(placement))]


def ports_of(spec: Dict[str, List[str]]) -> List[int]:
    return [int(a.rsplit(":", 1)[1]) for a in spec["worker"]]


# --------------------------------------------------------------------------------------------
# The pure part: the 'auto' range, the derived base, the candidates
# --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("key, tasks, expected", [
    pytest.param("7.0", SPAN, P.AUTO_FIRST, id="as many tasks as the range: only one base"),
    pytest.param("7.0", 1, None, id="one task: anywhere in the range"),
    pytest.param("", 64, None, id="no job id: a base still"),
])
def test_auto_base_leaves_room_for_the_node_s_tasks(key, tasks, expected) -> None:
    base = P.auto_base(key, tasks)
    assert P.AUTO_FIRST <= base and base + tasks - 1 <= P.AUTO_LAST
    if expected is not None:
        assert base == expected


@pytest.mark.parametrize("tasks", [SPAN - 1, SPAN - 2])
def test_auto_bases_of_many_steps_leave_room_near_the_limit(tasks) -> None:
    bases = {P.auto_base(f"{job}.0", tasks) for job in range(60)}
    assert bases == set(range(P.AUTO_FIRST, P.AUTO_LAST - tasks + 2))


def test_auto_base_refuses_more_tasks_than_the_range_has_ports() -> None:
    with pytest.raises(ResolutionError, match=r"12768 ports \(20000-32767\).*12769 tasks"):
        P.auto_base("7.0", SPAN + 1)


def test_auto_bases_spread_over_the_range() -> None:
    bases = {P.auto_base(f"{job}.0", 4) for job in range(1000)}
    assert len(bases) > 900  # few steps share a base
    assert min(bases) < P.AUTO_FIRST + 1000 and max(bases) > P.AUTO_LAST - 1000
    assert all(P.AUTO_FIRST <= b <= P.AUTO_LAST - 3 for b in bases)


@pytest.mark.parametrize("env, key", [
    pytest.param({"SLURM_JOB_ID": "12", "SLURM_STEP_ID": "3"}, "12.3", id="a step"),
    pytest.param({"SLURM_JOB_ID": "12"}, "12.batch", id="the batch step"),
    pytest.param({"PMIX_NAMESPACE": "77"}, "PMIX_NAMESPACE=77", id="mpirun: PMIx namespace"),
    pytest.param({"OMPI_MCA_ess_base_jobid": "5"}, "OMPI_MCA_ess_base_jobid=5",
                 id="mpirun: Open MPI job id"),
    pytest.param({}, "", id="MPICH's mpiexec: nothing"),
])
def test_job_key(env, key) -> None:
    assert P.job_key(env) == key
    assert P.step_key(env) == (key if env.get("SLURM_JOB_ID") else None)


@pytest.mark.parametrize("mpirun, key", [
    pytest.param(True, "PMIX_NAMESPACE=77", id="mpirun in an allocation: its own job id"),
    pytest.param(False, "12.0", id="a Slurm task: the step"),
])
def test_job_key_of_mpirun_ranks_inside_an_allocation(mpirun, key) -> None:
    env = {"SLURM_JOB_ID": "12", "SLURM_STEP_ID": "0", "PMIX_NAMESPACE": "77"}
    assert P.job_key(env, mpirun=mpirun) == key


@pytest.mark.parametrize("port, folded", [
    (P.AUTO_FIRST, P.AUTO_FIRST), (P.AUTO_LAST, P.AUTO_LAST), (P.AUTO_LAST + 1, P.AUTO_FIRST),
    (P.AUTO_LAST + 2, P.AUTO_FIRST + 1)])
def test_wrap_folds_into_the_range(port, folded) -> None:
    assert P.wrap(port) == folded


def test_candidates_start_with_the_first_and_stay_in_the_range() -> None:
    tried = list(P.candidates(20005, "seed"))
    assert tried[0] == 20005 and len(tried) == P.TRIES
    assert all(P.AUTO_FIRST <= p <= P.AUTO_LAST for p in tried)
    assert tried == list(P.candidates(20005, "seed")) != list(P.candidates(20005, "other"))


@pytest.mark.parametrize("busy, tries, ok", [
    pytest.param(set(), 1, True, id="first free: taken"),
    pytest.param({"first"}, 2, True, id="first in use: the next candidate"),
    pytest.param({"first", "second"}, 2, False, id="every try in use: error"),
])
def test_claim(busy, tries, ok) -> None:
    first, second = list(P.candidates(20100, "s", 2))
    table = FakePorts({"h": {first if "first" in busy else 0,
                             second if "second" in busy else 0}})
    if ok:
        port, release = P.claim(table.on("h"), 20100, "s", "h", tries)
        assert port == (second if "first" in busy else first)
        assert table.on("h").hold(port) is None  # held until released
        release()
        assert table.on("h").hold(port) is not None
    else:
        with pytest.raises(ResolutionError, match="none of 2 ports tried in 20000-32767 is free "
                                                  "on h"):
            P.claim(table.on("h"), 20100, "s", "h", tries)


@pytest.mark.parametrize("ours", ["first", "second"])
def test_claim_keeps_the_port_where_this_process_s_own_server_listens(ours) -> None:
    """A resolver after one whose job already serves here tries the same candidates, and takes
    the one its own server holds (first, or the one the earlier resolver moved to); another
    process's port before it is skipped."""
    first, second = list(P.candidates(20100, "s", 2))
    table = FakePorts({"h": {first, second}}, ours={"h": {first if ours == "first" else second}})
    assert P.claim(table.on("h"), first, "s", "h", 2)[0] == (first if ours == "first"
                                                              else second)
    with pytest.raises(ResolutionError, match="none of 2 ports"):
        P.claim(FakePorts({"h": {first, second}}).on("h"), first, "s", "h", 2)


# --------------------------------------------------------------------------------------------
# The edge: SocketPorts listens for real (on loopback here)
# --------------------------------------------------------------------------------------------


# --------------------------------------------------------------------------------------------
# Without MPI (source='slurm'): the rank's own port, fixed or derived from the step
# --------------------------------------------------------------------------------------------

def alone(env, table: FakePorts, host: str, **kwargs):
    opts = make_options(source="slurm", gpus_per_node=0, **kwargs)
    return resolve_job(opts, env, ports=table.on(host))


def test_without_mpi_the_default_port_is_checked_on_this_rank_only() -> None:
    envs = step_envs()
    table = FakePorts({"node1": {8889}})
    assert ports_of(alone(envs[0], table, "node1").cluster()) == [8888, 8889, 8888, 8889]
    with pytest.raises(ResolutionError) as e:
        alone(envs[1], table, "node1")
    assert "port 8889 on node1 (port_base=8888) is in use" in str(e.value)
    assert "port_base='auto' (mpi-resolver --port-base auto)" in str(e.value)
    assert table.tried == [("node1", 8888), ("node1", 8889)]


def test_without_mpi_auto_ports_come_from_the_job_and_step() -> None:
    table = FakePorts()
    first = ports_of(alone(step_envs(step="0")[3], table, "node2",
                           port_base="auto").cluster())
    base = P.auto_base("42.0", 2)
    assert first == [base, base + 1, base, base + 1]
    second = ports_of(alone(step_envs(step="1")[0], table, "node1",
                            port_base="auto").cluster())
    assert second[0] == P.auto_base("42.1", 2) != base


@pytest.mark.parametrize("mpi, fix", [
    pytest.param("none", "launch with `srun --mpi=pmix`", id="srun --mpi=none: launch with MPI"),
    pytest.param("pmix", "leave out source='slurm' (--source slurm)",
                 id="MPI wired, source='slurm': leave it out"),
])
def test_without_mpi_an_auto_port_in_use_says_how_to_use_mpi(mpi, fix) -> None:
    env = step_envs(mpi=mpi)[0]
    table = FakePorts({"node1": {P.auto_base("42.0", 2)}})
    with pytest.raises(ResolutionError, match=r"from SLURM_JOB_ID and SLURM_STEP_ID 42\.0, "
                                              r"without MPI\) is in use") as e:
        alone(env, table, "node1", port_base="auto")
    assert f"Without MPI the ranks cannot agree on other ports: {fix}" in str(e.value)


def test_without_mpi_auto_needs_slurm_job_id() -> None:
    env = {k: v for k, v in step_envs()[0].items() if k != "SLURM_JOB_ID"}
    with pytest.raises(ResolutionError, match="SLURM_JOB_ID is not set"):
        alone(env, FakePorts(), "node1", port_base="auto")


# --------------------------------------------------------------------------------------------
# With MPI: every rank picks a free port and learns every rank's
# --------------------------------------------------------------------------------------------

def world(table: FakePorts, envs=None, hosts=TWO_NODES, details=False, **kwargs):
    out = run_world(envs or step_envs(), list(hosts), ports=table, smi=0,
                    details=details, **kwargs)
    return out, run_world.last.collectives  # type: ignore[attr-defined]


def test_auto_with_free_ports_costs_no_extra_collective() -> None:
    fixed, fixed_collectives = world(FakePorts())
    table = FakePorts()
    out, collectives = world(table, port_base="auto")
    assert table.held == {"node1": set(), "node2": set()}  # released after the exchange
    base = P.auto_base("42.0", 2)
    assert [ports_of(r.cluster()) for r in out] == [[base, base + 1, base, base + 1]] * 4
    assert collectives == fixed_collectives
    assert ports_of(fixed[0].cluster()) == [8888, 8889, 8888, 8889]


def test_auto_moves_a_rank_whose_port_is_taken_and_tells_every_rank() -> None:
    base = P.auto_base("42.0", 2)
    table = FakePorts({"node1": {base + 1}})
    out, collectives = world(table, port_base="auto")
    assert not any(isinstance(r, Exception) for r in out), out
    specs = [r.cluster() for r in out]
    assert specs[1:] == specs[:-1]  # every rank: the same ClusterSpec
    got = ports_of(specs[0])
    assert got[0] == base and got[2:] == [base, base + 1]
    assert got[1] != base + 1 and got[1] != base and P.AUTO_FIRST <= got[1] <= P.AUTO_LAST
    assert collectives == [c + 1 for c in world(FakePorts())[1]]  # one 2-byte gather more


def test_auto_ports_of_one_node_differ_even_where_ranks_aim_at_one_port() -> None:
    """Ranks without a local index (an MPI that does not say) all aim at the base: the port
    each holds during the exchange keeps the others off it."""
    envs = [{k: v for k, v in e.items() if k != "SLURM_LOCALID"} for e in step_envs()]
    out, _ = world(FakePorts(), envs=envs, port_base="auto")
    got = ports_of(out[0].cluster())
    assert len(set(got[:2])) == 2 and len(set(got[2:])) == 2
    assert all(r.cluster() == out[0].cluster() for r in out)


@pytest.mark.parametrize("busy", [set(), {"aimed"}], ids=["ports free", "a rank moved"])
def test_auto_details_path_gives_the_same_spec(busy) -> None:
    taken = {"node2": {P.auto_base("42.0", 2)}} if busy else {}
    out, _ = world(FakePorts(taken), port_base="auto")
    detailed, _ = world(FakePorts(taken), port_base="auto", details=True)
    assert [r.cluster() for r in detailed] == [r.cluster() for r in out]
    if busy:
        assert ports_of(out[0].cluster())[2] != P.auto_base("42.0", 2)


@pytest.mark.parametrize("slurm", [
    pytest.param({}, id="no Slurm"),
    pytest.param({"SLURM_JOB_ID": "5", "SLURM_STEP_ID": "0"},
                 id="inside an allocation: mpirun's job id, not its daemons' step"),
])
def test_auto_under_mpirun(slurm) -> None:
    envs = [{"OMPI_COMM_WORLD_RANK": str(r), "OMPI_COMM_WORLD_LOCAL_RANK": str(r % 2),
             "PMIX_NAMESPACE": "900", **slurm} for r in range(4)]
    out, _ = world(FakePorts(), envs=envs, hosts=["a", "a", "b", "b"], port_base="auto")
    base = P.auto_base("PMIX_NAMESPACE=900", P.ROOM)
    assert ports_of(out[3].cluster()) == [base, base + 1, base, base + 1]


def test_with_mpi_a_default_port_in_use_fails_every_rank_naming_it() -> None:
    out, _ = world(FakePorts({"node2": {8889}}))
    assert all(isinstance(r, ResolutionError) for r in out), out
    for e in out:
        assert "rank 3 on node2: port 8889 on node2 (port_base=8888 + local rank 1) is in use" \
            in str(e)
        assert "port_base='auto'" in str(e)


def test_with_mpi_no_free_port_fails_every_rank() -> None:
    everything = set(range(P.AUTO_FIRST, P.AUTO_LAST + 1))
    out, _ = world(FakePorts({"node1": everything}), port_base="auto")
    assert all(isinstance(r, ResolutionError) and "none of 64 ports" in str(r)
               for r in out), out


@pytest.mark.parametrize("bases, says", [
    pytest.param(("auto", "auto", "auto", 8888), "on 3 of 4 ranks (first: rank 0)",
                 id="the last rank gives a number"),
    pytest.param((8888, "auto", "auto", "auto"), "on 3 of 4 ranks (first: rank 1)",
                 id="rank 0 gives a number"),
    pytest.param((8888, 8888, "auto", 8888), "on 1 of 4 ranks (first: rank 2)",
                 id="one rank gives 'auto'"),
])
def test_auto_on_some_ranks_and_a_number_on_others_fails_every_rank(bases, says) -> None:
    out = run_world(step_envs(), list(TWO_NODES), ports=FakePorts(), smi=0,
                    port_base=PerRank(*bases))
    for r in out:
        assert type(r) is ResolutionError, r
        assert str(r) == (f"port_base='auto' {says} but a number on the others; pass the "
                          "same port_base on every rank.")


def test_the_readme_quotes_the_message_of_a_port_in_use() -> None:
    """The docs' "Ports" section (docs/placement.md) shows the error every rank raises: it
    must be this one."""
    from tests.docs.blocks import block
    out = run_world(step_envs(), list(TWO_NODES), ports=FakePorts({"node1": {8888}}), smi=0)
    message = f"{type(out[0]).__name__}: {out[0]}"
    assert " ".join(block("port-in-use").split()) == " ".join(message.split())


@pytest.mark.parametrize("key, tasks, base", [
    pytest.param("7.0", 1, 23256, id="job 7 step 0"),
    pytest.param("7.0", 4, 28146, id="room for 4 tasks moves it"),
    pytest.param("12.3", 0, 24429, id="no task counts as one"),
    pytest.param("PMIX_NAMESPACE=77", 64, 28016, id="an mpirun job"),
])
def test_auto_base_is_the_same_on_every_machine_and_release(key, tasks, base) -> None:
    """Every rank derives the base alone (without MPI), so the hash is fixed: blake2b-64 of
    the key, little-endian, modulo the room left; a change here moves the ports of every job."""
    assert P.auto_base(key, tasks) == base


def test_job_key_prefers_the_slurm_step_unless_told_it_is_an_mpirun() -> None:
    env = {"SLURM_JOB_ID": "12", "SLURM_STEP_ID": "3", "PMIX_NAMESPACE": "77"}
    assert P.job_key(env) == "12.3"
    assert P.job_key(env, mpirun=True) == "PMIX_NAMESPACE=77"


def _launch(local):
    return P.Launch(BY_NAME["pmix"], 0, local)


@pytest.mark.parametrize("port_base, local, busy, raises", [
    pytest.param(8888, 1, {8889}, True, id="own port in use"),
    pytest.param(8888, 1, {8888}, False, id="another rank's port in use: not this rank's"),
    pytest.param(8888, None, {8888}, False, id="local rank unknown: nothing to check"),
    pytest.param(65535, 0, {65535}, True, id="port 65535 is checked"),
    pytest.param(65535, 1, {65535}, False, id="past 65535: the layout refuses it"),
])
def test_pick_port_checks_a_fixed_port_where_the_local_rank_is_known(port_base, local, busy,
                                                                      raises) -> None:
    opts = make_options(port_base=port_base)
    call = lambda: P.pick_port(opts, {}, 2, _launch(local), "node1", 0,  # noqa: E731
                               FakePorts({"node1": busy}).on("node1"))
    if raises:
        with pytest.raises(ResolutionError, match=f"port {port_base + local} on node1"):
            call()
    else:
        assert call() == (None, None, None)


def test_pick_port_names_the_host_where_no_auto_port_is_free() -> None:
    everything = set(range(P.AUTO_FIRST, P.AUTO_LAST + 1))
    with pytest.raises(ResolutionError, match="is free on node7 "):
        P.pick_port(make_options(port_base="auto"), {"SLURM_JOB_ID": "1"}, 2, _launch(0),
                    "node7", 0, FakePorts({"node7": everything}).on("node7"))


def test_auto_base_of_a_key_that_is_not_utf_8() -> None:
    """A variable with bytes that are not UTF-8 (os.environ keeps them as surrogates)."""
    assert P.AUTO_FIRST <= P.auto_base("JOB=\udcff.0", 2) <= P.AUTO_LAST - 1
    assert P.auto_base("JOB=\udcff.0", 2) != P.auto_base("JOB=\udcfe.0", 2)


def test_the_release_of_our_own_servers_port_leaves_it_open() -> None:
    table = FakePorts({"h": {20100}}, ours={"h": {20100}})
    port, release = P.claim(table.on("h"), 20100, "s", "h", 1)
    assert port == 20100 and release() is None
    assert table.on("h").hold(20100) is None  # still in use
