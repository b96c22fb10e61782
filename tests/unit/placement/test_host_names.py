"""When two host names are one host: the rule placement, the cross-check and the CLI share."""

from __future__ import annotations

import pytest

from mpi_resolver.core.errors import MismatchError
from mpi_resolver.placement.host_names import HostIndex, same_host
from mpi_resolver.options import make_options
from mpi_resolver.resolve.resolution import resolve_job
from tests.unit.jobs import run_job, srun_env

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("a, b, same", [
    pytest.param("node1", "node1", True, id="the same name"),
    pytest.param("node1", "NODE1", True, id="case does not matter"),
    pytest.param("node1", "node1.cluster.org", True, id="short name and its qualified form"),
    pytest.param("node1.cluster.org", "node1", True, id="either way round"),
    pytest.param("node1", "node2", False, id="two names"),
    pytest.param("hpc.n1", "hpc.n2", False, id="sharing a first label is not enough"),
    pytest.param("node1.a.org", "node1.b.org", False, id="two qualified names differ"),
    pytest.param("10.0.0.1", "10.0.0.2", False, id="IP addresses are never shortened"),
    pytest.param("10", "10.0.0.1", False, id="an address is no qualified name"),
    pytest.param("nid000001", "nid00001", False, id="zero-padding differs"),
    pytest.param("rack1-n01", "rack1-n01.ib", True, id="dashes and a short suffix"),
])
def test_same_host(a, b, same):
    assert same_host(a, b) is same
    assert same_host(b, a) is same


@pytest.mark.parametrize("names, name, found", [
    pytest.param(["node1", "node2"], "node2.cluster.org", "node2", id="qualified to short"),
    pytest.param(["node1.cluster.org"], "node1", "node1.cluster.org", id="short to qualified"),
    pytest.param(["hpc.n1", "hpc.n2"], "hpc.n2", "hpc.n2", id="dotted names exactly"),
    pytest.param(["hpc.n1", "hpc.n2"], "hpc", None,
                 id="a short name two qualified names share is ambiguous"),
    pytest.param(["10.0.0.1", "10.0.0.2"], "10.0.0.3", None, id="an address not listed"),
    pytest.param(["n1", "n1", "n1.x"], "n1.x", "n1.x", id="duplicates do not matter"),
])
def test_host_index(names, name, found):
    assert HostIndex(names).find(name) == found


# The job: SLURM_STEP_NODELIST='hpc.n[1-2]', 1 task on hpc.n1 and 2 on hpc.n2.
DOTTED = {"SLURM_PROCID": "1", "SLURM_STEP_NUM_TASKS": "3", "SLURM_STEP_NODELIST": "hpc.n[1-2]",
          "SLURM_STEP_TASKS_PER_NODE": "1,2", "SLURMD_NODENAME": "hpc.n2", "SLURM_NODEID": "1",
          "SLURM_LOCALID": "0", "SLURM_GTIDS": "1,2"}
IPS = {"SLURM_PROCID": "2", "SLURM_STEP_NUM_TASKS": "3",
       "SLURM_STEP_NODELIST": "10.0.0.1,10.0.0.2", "SLURM_STEP_TASKS_PER_NODE": "2,1",
       "SLURMD_NODENAME": "10.0.0.2", "SLURM_LOCALID": "0", "SLURM_GTIDS": "2"}


@pytest.mark.parametrize("env, spec", [
    pytest.param(DOTTED, ["hpc.n1:8888", "hpc.n2:8888", "hpc.n2:8889"],
                 id="hpc.n1 and hpc.n2 are two hosts"),
    pytest.param(IPS, ["10.0.0.1:8888", "10.0.0.1:8889", "10.0.0.2:8888"],
                 id="IP-address node names are two hosts"),
])
def test_source_slurm_resolves_dotted_and_address_node_names(env, spec):
    opts = make_options(source="slurm", gpus_per_node=0)
    res = resolve_job(opts, env)
    assert res.cluster() == {"worker": spec}


def test_a_contradiction_between_dotted_names_is_still_found():
    env = dict(DOTTED, SLURM_GTIDS="0,1,2")  # claims every rank on hpc.n2
    opts = make_options(source="slurm", gpus_per_node=0)
    with pytest.raises(MismatchError, match="SLURM_GTIDS=0,1,2 on hpc.n2"):
        resolve_job(opts, env)


@pytest.mark.parametrize("slurm_names, mpi_names, agree", [
    pytest.param(["hpc.n1", "hpc.n2"], ["hpc.n1", "hpc.n2"], True, id="dotted names agree"),
    pytest.param(["hpc.n1", "hpc.n2"], ["hpc.n2", "hpc.n1"], False,
                 id="dotted names swapped: a host mismatch, not one host"),
    pytest.param(["node1", "node2"], ["node1.cluster.org", "node2.cluster.org"], True,
                 id="MPI reports qualified names of Slurm's short ones"),
])
def test_cross_check_compares_hosts_with_the_same_rule(slurm_names, mpi_names, agree):
    placement = [slurm_names[0], slurm_names[1]]
    envs = [srun_env(r, slurm_names, [1, 1], placement) for r in range(2)]
    if agree:
        res = run_job(envs, mpi_names, rank=1, verify=True, gpus_per_node=0)
        assert res.cluster() == {"worker": [f"{slurm_names[0]}:8888", f"{slurm_names[1]}:8888"]}
        return
    with pytest.raises(MismatchError) as excinfo:
        run_job(envs, mpi_names, rank=1, verify=True, gpus_per_node=0)
    assert {d.check for d in excinfo.value.rows} == {"host"}
