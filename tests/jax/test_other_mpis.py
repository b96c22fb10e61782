"""mpi_resolver.jax.initialize under the other MPIs and launchers, for real: MPICH and Intel MPI
under ``srun --mpi=pmi2`` (cross-checked) and under their own mpiexec over the two emulated
nodes (no Slurm), and Debian's Open MPI under ``srun --mpi=pmi2`` (which it cannot start under).

Each MPI's ranks run tests/jax/jax_probe.py with the Python of that MPI's virtualenv, as a user
has it: one virtualenv holding the MPI, an mpi4py that loads it and JAX (``.venv-mpich``,
``.venv-impi``: scripts/setup_mpis.sh installs JAX 0.10.2 there too, no Keras). They are
launched as tests/cluster/test_mpich.py and test_intel_mpi.py launch them for TensorFlow (the
same launcher arguments and variables, imported from there). A missing or JAX-less virtualenv
fails these tests (never skips).
"""

from __future__ import annotations

import os
import subprocess
from typing import Any, Dict, List, Mapping, Optional, Sequence

import pytest

from tests.cluster import test_intel_mpi as impi_launch
from tests.cluster import test_mpich as mpich_launch
from tests.cluster.test_scenarios import launch
from tests.harness.slurm_cluster import SlurmCluster
from tests.jax.conftest import JAX_ENV
from tests.jax.test_launches import assert_all_together, probe_argv, reports

pytestmark = pytest.mark.cluster

TIMEOUT = 90  # seconds, for every launch (4 JAX processes on 2 cores start in about 5 s)
MPICH_VERSION = "MPICH Version:"
IMPI_VERSION = impi_launch.VERSION  # "Intel(R) MPI Library 2021.18.1"
SETUP = "bash scripts/setup_mpis.sh"


def jax_in(name: str, python: str, mpiexec: str, venv: object, version: str) -> str:
    """Returns ``python`` where its virtualenv holds ``name``'s mpiexec, an mpi4py that loads
    it, and JAX; fails (never skips) otherwise, naming the setup script."""
    mpich_launch.mpi_venv(name, python, mpiexec, venv, version)
    p = subprocess.run([python, "-c", "import jax; print(jax.__version__)"], capture_output=True,
                       text=True, timeout=120, env={**os.environ, "JAX_PLATFORMS": "cpu"})
    if p.returncode != 0:
        pytest.fail(f"{venv} has no JAX: run `{SETUP}` (it installs JAX beside {name})\n"
                    f"{p.stderr[-2000:]}")
    return python


@pytest.fixture(scope="module")
def mpich_jax() -> str:
    """.venv-mpich's Python: MPICH, its mpi4py and JAX."""
    return jax_in("MPICH", mpich_launch.MPICH_PY, mpich_launch.MPIEXEC,
                  mpich_launch.MPICH_VENV, MPICH_VERSION)


@pytest.fixture(scope="module")
def impi_jax() -> str:
    """.venv-impi's Python: Intel MPI, its mpi4py and JAX."""
    return jax_in("Intel MPI", impi_launch.IMPI_PY, impi_launch.MPIEXEC, impi_launch.IMPI_VENV,
                  "Intel(R) MPI Library")


def run_probe(cluster: SlurmCluster, launcher: Sequence[str], python: str,
              options: Dict[str, Any], n: int, env: Optional[Mapping[str, str]] = None,
              status: int = 0) -> List[Dict[str, Any]]:
    """Runs the probe (mode 'package') under ``launcher`` with JAX_ENV and ``env``; asserts
    the exit status and ``n`` reports; returns them in the order of JAX's process index."""
    run = launch(cluster, [*launcher, *probe_argv(python, "package", options)],
                 env={**JAX_ENV, **(env or {})}, timeout=TIMEOUT, parse=False)
    found = reports(run.stdout)
    assert run.returncode == status and len(found) == n, run.context()
    return found


def assert_mpi_numbers(found: List[Dict[str, Any]], version: str, *, slurm: bool) -> None:
    """JAX's index is the rank as the launcher numbers it (PMI_RANK; SLURM_PROCID under srun)
    and as the running MPI (``version``) numbers it; the resolution's source says who."""
    n = len(found)
    assert_all_together(found, n)
    for r in found:
        assert r["mpi_library"] is not None and r["mpi_library"].startswith(version), r
        assert r["comm_rank"] == r["index"] and r["comm_size"] == n, r
        assert r["pmi_rank"] == str(r["index"]), r
        assert r["procid"] == (str(r["index"]) if slurm else None), r
        assert r["source"] == ("slurm" if slurm else "mpi") and r["verified"] is slurm, r
        assert r["collectives"] == "gloo" and r["gpus"] == [], r


def assert_two_per_node(found: List[Dict[str, Any]], port: int) -> None:
    """Ranks 0, 1 on node1 and 2, 3 on node2; the coordinator is rank 0's node at ``port``."""
    assert [r["nodename"] for r in found] == ["node1", "node1", "node2", "node2"], found
    assert all(r["coordinator"] == f"node1:{port}" for r in found), found


# ------------------------------------------------------------------------------ MPICH
def test_mpich_srun_pmi2_two_nodes(jax_cluster: SlurmCluster, mpich_jax: str) -> None:
    """MPICH under srun -N2 --ntasks-per-node=2 --mpi=pmi2 (its OFI netmod, as the TF tests
    launch it): Slurm's variables cross-checked by MPICH; JAX's index = SLURM_PROCID =
    PMI_RANK = MPICH's rank; the all-gather is whole."""
    found = run_probe(jax_cluster, ["srun", "-N2", "--ntasks-per-node=2", "--mpi=pmi2"],
                      mpich_jax, {"port_base": 24510}, n=4, env=mpich_launch.PMI2_ENV)
    assert_mpi_numbers(found, MPICH_VERSION, slurm=True)
    assert_two_per_node(found, 24510)


def test_mpich_mpiexec_two_nodes_without_slurm(jax_cluster: SlurmCluster,
                                               mpich_jax: str) -> None:
    """MPICH's mpiexec (Hydra) -f (node1:2, node2:2) -n 4 through the ssh stand-in, no Slurm:
    the package resolves from MPI alone; JAX's index = PMI_RANK = MPICH's rank. JAX's own
    detection, in the same processes, finds no cluster there (no Slurm, no Open MPI)."""
    found = run_probe(jax_cluster, mpich_launch.mpiexec_hosts(jax_cluster, 4), mpich_jax,
                      {"port_base": 24520}, n=4)
    assert_mpi_numbers(found, MPICH_VERSION, slurm=False)
    assert_two_per_node(found, 24520)
    assert all(r["jax_own"]["process_id"] is None for r in found), found  # JAX's: no cluster


# ------------------------------------------------------------------------------ Intel MPI
def test_impi_srun_pmi2_two_nodes(jax_cluster: SlurmCluster, impi_jax: str) -> None:
    """Intel MPI under srun -N2 -n3 --mpi=pmi2 with I_MPI_PMI_LIBRARY (Slurm's libpmi2, as the
    TF tests launch it; Slurm places 2 + 1): cross-checked; JAX's index = SLURM_PROCID =
    PMI_RANK = Intel MPI's rank; the all-gather is whole."""
    found = run_probe(jax_cluster, ["srun", "-N2", "-n3", "--mpi=pmi2"], impi_jax,
                      {"port_base": 24530}, n=3, env=impi_launch.pmi2_env())
    assert_mpi_numbers(found, IMPI_VERSION, slurm=True)
    assert [r["nodename"] for r in found] == ["node1", "node1", "node2"], found
    assert all(r["coordinator"] == "node1:24530" for r in found), found


def test_impi_mpiexec_two_nodes_without_slurm(jax_cluster: SlurmCluster, impi_jax: str) -> None:
    """Intel's mpiexec -bootstrap ssh (the ssh stand-in) -f (node1, node2) -ppn 2 -n 4 -iface
    (the bridge), no Slurm: MPI alone; JAX's index = PMI_RANK = Intel MPI's rank; JAX's own
    detection finds no cluster. (JAX warns there of a "proxy variable", HYDRA_BSTRAP_PROXY_ID:
    any variable named *_proxy; harmless, the all-gather completes.)"""
    launcher = [impi_launch.MPIEXEC, "-bootstrap", "ssh", "-bootstrap-exec",
                jax_cluster.rsh_agent, "-f", impi_launch.hostfile(jax_cluster),
                "-iface", impi_launch.bridge_interface(jax_cluster), "-ppn", "2", "-n", "4"]
    found = run_probe(jax_cluster, launcher, impi_jax, {"port_base": 24540}, n=4)
    assert_mpi_numbers(found, IMPI_VERSION, slurm=False)
    assert_two_per_node(found, 24540)
    assert all(r["jax_own"]["process_id"] is None for r in found), found  # JAX's: no cluster


# ------------------------------------------------------------------------------ Open MPI
def test_openmpi_srun_pmi2_refused_before_jax_or_slurm_alone(jax_cluster: SlurmCluster,
                                                            jax_python: str) -> None:
    """Debian's Open MPI (.venv-jax) under srun -N2 --ntasks-per-node=1 --mpi=pmi2, which it
    cannot start under (DESIGN 5: MPI_Init aborts): by default every task raises
    ResolutionError naming `srun --mpi=pmix` before MPI and before JAX start; with
    source='slurm' JAX starts from Slurm's variables alone (MPI never started), indices as
    Slurm's, the all-gather whole."""
    launcher = ["srun", "-N2", "--ntasks-per-node=1", "--mpi=pmi2"]
    refused = run_probe(jax_cluster, launcher, jax_python, {"port_base": 24550}, n=2,
                        status=3)
    for r in refused:
        assert r["error"] == "ResolutionError" and r["jax_started"] is False, r
        assert "srun --mpi=pmi2" in r["message"] and "Open MPI" in r["message"], r
        assert "`srun --mpi=pmix`" in r["message"], r
    found = run_probe(jax_cluster, launcher, jax_python,
                      {"port_base": 24560, "source": "slurm"}, n=2)
    assert_all_together(found, 2)
    assert [r["nodename"] for r in found] == ["node1", "node2"], found
    assert all(r["coordinator"] == "node1:24560" for r in found), found
    for r in found:
        assert r["procid"] == r["pmi_rank"] == str(r["index"]), r
        assert r["source"] == "slurm" and r["verified"] is False, r
        assert r["mpi_library"] is None, r  # MPI never started
