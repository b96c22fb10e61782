"""mpi_resolver.jax.initialize for real: JAX processes on the throw-away Slurm cluster (srun
--mpi=pmix over two emulated nodes, mpirun without Slurm, a renumbered rank), JAX on CPU with
gloo collectives, every rank's all-gather checked.

Each rank runs tests/jax/jax_probe.py with .venv-jax's Python; it reports, beside the package's
answer, what JAX's own detection would have chosen in the same process (``jax_own``).
"""

from __future__ import annotations

import json
import re
import shlex
from typing import Any, Dict, List, Sequence

import pytest

from tests.cluster.test_scenarios import launch
from tests.harness import chunked
from tests.harness.slurm_cluster import SlurmCluster
from tests.jax.conftest import JAX_ENV, PROBE

pytestmark = pytest.mark.cluster

TIMEOUT = 90  # seconds, for every launch (4 JAX processes on 2 cores start in about 5 s)
RENUMBER = ('SLURM_PROCID=$(( (SLURM_PROCID + 1) % SLURM_STEP_NUM_TASKS )) '
            'exec "$0" "$@"')


def probe_argv(python: str, mode: str, options: Dict[str, Any]) -> List[str]:
    return [python, PROBE, mode, json.dumps(options)]


def reports(stdout: str) -> List[Dict[str, Any]]:
    """Returns the ranks' JAXPROBE records, in the order of JAX's process index (or of
    SLURM_PROCID / the MPI rank where JAX did not start)."""
    try:
        found = chunked.read(stdout, "JAXPROBE ")
    except chunked.TornRecord as e:
        raise AssertionError(f"{e}\n{stdout[-3000:]}") from None

    def key(r: Dict[str, Any]) -> int:
        for name in ("index", "procid", "mpi_rank"):
            if r.get(name) is not None:
                return int(r[name])
        return -1
    return sorted(found, key=key)


def run_probe(cluster: SlurmCluster, launcher: Sequence[str], python: str, mode: str,
              options: Dict[str, Any], n: int, status: int = 0) -> List[Dict[str, Any]]:
    """Runs the probe under ``launcher``; asserts the exit status and ``n`` reports."""
    run = launch(cluster, [*launcher, *probe_argv(python, mode, options)], env=JAX_ENV,
                 timeout=TIMEOUT, parse=False)
    found = reports(run.stdout)
    assert run.returncode == status and len(found) == n, run.context()
    return found


def assert_all_together(found: List[Dict[str, Any]], n: int) -> None:
    """Every process has JAX index = its rank and gathered every index, in order."""
    assert [r["index"] for r in found] == list(range(n)), found
    assert all(r["count"] == n and r["gathered"] == list(range(n)) for r in found), found


def test_srun_pmix_two_nodes_four_processes_indices_as_slurm(jax_cluster: SlurmCluster,
                                                             jax_python: str) -> None:
    """srun -N2 --ntasks-per-node=2 --mpi=pmix: 4 JAX processes, jax.process_index() ==
    SLURM_PROCID, Slurm cross-checked with MPI, coordinator = task 0's node at port_base,
    gloo (CPU-only nodes), an all-gather across processes returns [0, 1, 2, 3] everywhere."""
    found = run_probe(jax_cluster, ["srun", "-N2", "--ntasks-per-node=2", "--mpi=pmix"],
                      jax_python, "package", {"port_base": 24410}, n=4)
    assert_all_together(found, 4)
    assert [int(r["procid"]) for r in found] == [0, 1, 2, 3], found
    assert [r["nodename"] for r in found] == ["node1", "node1", "node2", "node2"], found
    for r in found:
        assert r["verified"] and r["source"] == "slurm", r
        assert r["coordinator"] == "node1:24410", r
        assert r["collectives"] == "gloo" and r["ids"] is None and r["gpus"] == [], r
        assert r["visible"] == "all", r  # JAX's own rule ([SLURM_LOCALID]) stayed off


def test_register_makes_jax_own_detection_method(jax_cluster: SlurmCluster,
                                                 jax_python: str) -> None:
    """register() then jax.distributed.initialize(cluster_detection_method='mpi_resolver'):
    JAX's own initialize gets the package's answer (indices as Slurm's, port_base's port)."""
    found = run_probe(jax_cluster, ["srun", "-N2", "--ntasks-per-node=1", "--mpi=pmix"],
                      jax_python, "register", {"port_base": 24420}, n=2)
    assert_all_together(found, 2)
    assert all(r["registered"] for r in found), found
    assert [int(r["procid"]) for r in found] == [0, 1], found


def test_mpirun_without_slurm_two_hosts(jax_cluster: SlurmCluster, jax_python: str) -> None:
    """mpirun --hostfile (node1, node2; 2 slots each) -n 4, no Slurm: the package resolves
    from MPI alone; JAX's index = MPI's rank; the all-gather is whole."""
    found = run_probe(jax_cluster, ["mpirun", "--hostfile", jax_cluster.hostfile(2), "-n", "4"],
                      jax_python, "package", {"port_base": 24430}, n=4)
    assert_all_together(found, 4)
    assert [int(r["mpi_rank"]) for r in found] == [0, 1, 2, 3], found
    assert all(r["procid"] is None and r["source"] == "mpi" for r in found), found
    assert {r["nodename"] for r in found} == {"node1", "node2"}, found
    assert all(r["coordinator"] == f"{found[0]['nodename']}:24430" for r in found), found


def test_renumbered_rank_is_a_mismatch_before_jax_starts(jax_cluster: SlurmCluster,
                                                         jax_python: str) -> None:
    """srun through a wrapper that renumbers SLURM_PROCID (k -> k+1 mod 4): every rank raises
    MismatchError naming the ranks, and no rank's JAX runtime has started. JAX's own
    detection, in the same processes, would have started with those wrong indices."""
    found = run_probe(jax_cluster, ["srun", "-N2", "--ntasks-per-node=2", "--mpi=pmix",
                                    "sh", "-c", RENUMBER],
                      jax_python, "package", {"port_base": 24440}, n=4, status=3)
    for r in found:
        assert r["error"] == "MismatchError", r
        assert "Slurm and MPI disagree" in r["message"], r
        assert re.search(r"SLURM_PROCID=\d+\s+rank \d+", r["message"]), r
        assert r["jax_started"] is False, r
        assert r["jax_own"]["process_id"] == int(r["procid"]), r  # JAX would take it as is


def test_two_steps_on_one_node_auto_ports_where_jax_own_collides(jax_cluster: SlurmCluster,
                                                                 jax_python: str) -> None:
    """Two JAX steps of one allocation at once on node1, port_base='auto': each step's
    coordinator gets a port of its own and both all-gathers complete. JAX's own detection
    derives its port from SLURM_JOB_ID alone: it gives both steps the same coordinator."""
    step = shlex.join(["srun", "--exact", "-n2", "--mpi=pmix",
                       *probe_argv(jax_python, "package", {"port_base": "auto"})])
    found = run_probe(jax_cluster, ["salloc", "-N1", "-w", "node1", "-n4", "sh", "-c",
                                    f"{step} & {step} & wait", "sh"], jax_python,
                      "package", {}, n=4)
    by_coordinator: Dict[str, List[Dict[str, Any]]] = {}
    for r in found:
        by_coordinator.setdefault(r["coordinator"], []).append(r)
    assert len(by_coordinator) == 2, found  # one coordinator per step, on node1
    for coordinator, step_reports in by_coordinator.items():
        assert coordinator.startswith("node1:"), found
        assert sorted(r["index"] for r in step_reports) == [0, 1], found
        assert all(r["gathered"] == [0, 1] for r in step_reports), found
    assert len({r["jax_own"]["coordinator"] for r in found}) == 1, found  # JAX's: one port
