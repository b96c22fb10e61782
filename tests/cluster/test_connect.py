"""`mpi-resolver check --connect` for real on the two-node cluster (each node its own network
namespace): a clean job passes; a port dropped by a firewall rule inside node2's namespace
(Debian's nftables) fails within the timeout, naming that host:port, with MPI (rank 0's
table, exit 1) and without (--source slurm: each rank its own failures)."""

from __future__ import annotations

import contextlib
import json
import subprocess
import time
from typing import Iterator


from tests.cluster.conftest import PY
from tests.cluster.test_scenarios import launch
from tests.docs.blocks import assert_sample, block, command, runs_like
from tests.harness.slurm_cluster import SlurmCluster

CHECK = (PY, "-m", "mpi_resolver", "check", "--connect", "--timeout", "3")
JOB = ("srun", "--mpi=pmix", "-N2", "--ntasks-per-node=2")


@contextlib.contextmanager
def dropped(cluster: SlurmCluster, node: str, port: int, source: str) -> Iterator[None]:
    """Drops TCP to ``port`` from ``source``'s address inside ``node``'s namespace while the
    block runs (nftables; the table is deleted after)."""
    ns = ["ip", "netns", "exec", cluster._netns(node)]
    rule = (f"table inet mpir_test {{\n chain input {{\n"  # nft 1.0.6 wants the newlines
            f"  type filter hook input priority 0; policy accept;\n"
            f"  ip saddr {cluster.address(source)} tcp dport {port} drop\n }}\n}}\n")
    subprocess.run([*ns, "nft", "-f", "-"], input=rule, text=True, check=True, timeout=30)
    try:
        yield
    finally:
        subprocess.run([*ns, "nft", "delete", "table", "inet", "mpir_test"], check=True,
                       timeout=30)


def test_connect_passes_on_a_clean_job(cluster: SlurmCluster) -> None:
    runs_like(command("commands", "srun --mpi=pmix mpi-resolver check --connect"), [*JOB, *CHECK])
    run = launch(cluster, [*JOB, *CHECK], parse=False)
    assert run.returncode == 0, run.context()
    assert "CONNECT OK: the job's 4 connection(s) among 4 rank(s), every pair of nodes" in \
        run.stdout, run.context()
    assert_sample(block("connect-ok"), run.stdout)


def test_a_dropped_port_fails_within_the_timeout_naming_it(cluster: SlurmCluster) -> None:
    """node2 drops node1's packets to 8889 (rank 3's port): node1's ranks time out on it;
    rank 0 prints one table, every rank exits 1, well within the --timeout bound."""
    with dropped(cluster, "node2", 8889, "node1"):
        start = time.monotonic()
        run = launch(cluster, [*JOB, *CHECK], parse=False)
        took = time.monotonic() - start
    assert run.returncode == 1, run.context()
    assert run.stdout.count("CONNECT FAILED") == 1, run.context()
    table = run.stdout[run.stdout.index("CONNECT FAILED"):]
    assert "node2:8889" in table and "timed out" in table, run.context()
    assert "firewall" in table, run.context()  # the likely fix
    assert "node2:8888" not in table, run.context()  # the other port of node2 answered
    assert_sample(block("connect-failed"), run.stdout)
    assert took < 60, f"took {took:.0f} s"


def test_check_json_carries_the_connect_failures(cluster: SlurmCluster) -> None:
    with dropped(cluster, "node2", 8889, "node1"):
        run = launch(cluster, [*JOB, *CHECK, "--json"], parse=False)
    assert run.returncode == 1, run.context()
    found = json.loads(run.stdout)["connect"]
    assert found["ok"] is False and found["gathered"] is True, run.context()
    assert {(f[1], f[3], f[4]) for f in found["failures"]} == {("node1", "node2:8889",
                                                                 "timed out")}, run.context()


def test_without_mpi_each_rank_reports_its_own(cluster: SlurmCluster) -> None:
    """--source slurm: no MPI, so no gather: the ranks on node1 each print their failure."""
    with dropped(cluster, "node2", 8889, "node1"):
        run = launch(cluster, [*JOB, *CHECK, "--source", "slurm"], parse=False)
    assert run.returncode == 1, run.context()
    assert "this rank's" in run.stdout and "node2:8889" in run.stdout, run.context()
    assert "Not cross-checked: Slurm's variables alone (--source slurm)." in run.stdout
    assert "CONNECT OK" in run.stdout or run.stdout.count("CONNECT FAILED") >= 1


# ------------------------------------------------------------------------------- proxies
DEAD_PROXY = "http://127.0.0.1:9"  # nothing listens there: gRPC through it would hang


def test_a_proxy_variable_fails_plain_check_and_no_proxy_clears_it(cluster: SlurmCluster
                                                                     ) -> None:
    """Measured with TensorFlow 2.21 (DESIGN.md): http_proxy at a dead port hangs two
    workers; no_proxy=node1,node2 lets them train. `check` (no --connect) says so first."""
    check = (PY, "-m", "mpi_resolver", "check", "--gpus-per-node", "0")
    run = launch(cluster, [*JOB, *check], env={"http_proxy": DEAD_PROXY}, parse=False)
    assert run.returncode == 1, run.context()
    assert f"warning: http_proxy={DEAD_PROXY} is set: TensorFlow's gRPC would send worker " \
        "traffic to node1, node2 through that proxy" in run.stdout, run.context()
    assert "PROXY: check fails" in run.stdout, run.context()
    assert_sample(block("proxy-warning"), run.stdout)
    cleared = launch(cluster, [*JOB, *check], parse=False,
                     env={"http_proxy": DEAD_PROXY, "no_proxy": "node1,node2"})
    assert cleared.returncode == 0, cleared.context()
    assert "proxy" not in cleared.stdout, cleared.context()
    upper = launch(cluster, [*JOB, *check], env={"HTTP_PROXY": DEAD_PROXY}, parse=False)
    assert upper.returncode == 0 and "PROXY" not in upper.stdout, upper.context()
