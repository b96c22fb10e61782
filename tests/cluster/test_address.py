"""The address workers dial, for real on the two-node cluster (each node its own network
namespace, eth0 on the nodes' bridge): --address iface:eth0 puts each node's own eth0
address in the ClusterSpec and two workers train over it; '{host}-alias' uses the second
names the harness adds for each node; --connect dials what the ClusterSpec says."""

from __future__ import annotations

import json

from tests.cluster.conftest import PY
from tests.cluster.test_scenarios import launch
from tests.cluster.test_training import EPOCHS, STEPS, TRAIN, final_accuracies, task_env
from tests.harness.slurm_cluster import SlurmCluster

JOB = ("srun", "--mpi=pmix", "-N2", "--ntasks-per-node=1")
SHOW = (PY, "-m", "mpi_resolver", "show", "--json", "--gpus-per-node", "0")


def _spec(run) -> dict:
    assert run.returncode == 0, run.context()
    return json.loads(run.stdout)["cluster"]


def test_iface_and_alias_addresses_in_the_cluster_spec(cluster: SlurmCluster) -> None:
    eth0 = [cluster.address("node1"), cluster.address("node2")]
    assert _spec(launch(cluster, [*JOB, *SHOW, "--address", "iface:eth0"], parse=False)) == {
        "worker": [f"{eth0[0]}:8888", f"{eth0[1]}:8888"]}
    assert _spec(launch(cluster, [*JOB, *SHOW, "--address", "{host}-alias"],
                        parse=False)) == {"worker": ["node1-alias:8888", "node2-alias:8888"]}


def test_connect_dials_the_chosen_addresses(cluster: SlurmCluster) -> None:
    run = launch(cluster, [*JOB, PY, "-m", "mpi_resolver", "check", "--connect", "--timeout",
                           "3", "--gpus-per-node", "0", "--address", "{host}-alias"],
                 parse=False)
    assert run.returncode == 0, run.context()
    assert "node2-alias:8888" in run.stdout and "CONNECT OK" in run.stdout, run.context()


def test_an_interface_no_node_has_fails_naming_it(cluster: SlurmCluster) -> None:
    run = launch(cluster, [*JOB, *SHOW, "--address", "iface:ib7"], parse=False)
    assert run.returncode == 2, run.context()
    assert "address='iface:ib7': node1 has no IPv4 address on interface 'ib7'" in \
        run.stderr, run.context()
    assert "eth0" in run.stderr  # the interfaces it has


def test_iface_without_mpi_is_an_error_that_says_so(cluster: SlurmCluster) -> None:
    run = launch(cluster, [*JOB, *SHOW, "--address", "iface:eth0", "--source", "slurm"],
                 parse=False)
    assert run.returncode == 2, run.context()
    assert "address='iface:eth0' needs MPI" in run.stderr, run.context()


def test_two_workers_train_over_the_eth0_addresses(cluster: SlurmCluster) -> None:
    r = cluster.run([*JOB, "--kill-on-bad-exit=1", PY, str(TRAIN), "--epochs", str(EPOCHS),
                     "--steps-per-epoch", str(STEPS), "--port-base", "24410", "--address",
                     "iface:eth0"], env=task_env(cluster), timeout=120)
    assert r.returncode == 0, f"{r.stdout}\n{r.stderr[-4000:]}"
    assert f"worker:0 at {cluster.address('node1')}:24410" in r.stdout, r.stdout
    assert len(final_accuracies(r.stdout)) == 1, r.stdout


def test_ip_and_fqdn_as_the_nodes_resolve_their_names(cluster: SlurmCluster) -> None:
    """ip: each name as the resolver gives it (the harness's hosts lines); fqdn: the nodes'
    names have no domain here, which is an error that says so."""
    assert _spec(launch(cluster, [*JOB, *SHOW, "--address", "ip"], parse=False)) == {
        "worker": [f"{cluster.address('node1')}:8888", f"{cluster.address('node2')}:8888"]}
    run = launch(cluster, [*JOB, *SHOW, "--address", "fqdn"], parse=False)
    assert run.returncode == 2, run.context()
    assert "address='fqdn': the name service gives no fully qualified name for 'node1'" in \
        run.stderr, run.context()
