"""Fixtures of the real-launch scenarios: throw-away Slurm clusters, started once per session.

These tests need root, Slurm, Open MPI, mpi4py and TensorFlow. The README promises that they
run, so a machine without root or srun fails them (it does not skip them).
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path
from typing import Dict, Iterator, Mapping, Optional, Sequence

import pytest

from tests.harness.slurm_cluster import SlurmCluster

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
#: The Python every rank runs: the test process's own, with this checkout first on the path.
PY = sys.executable
PROBE = str(HERE / "probe.py")
#: Variables for every rank: this checkout, quiet TensorFlow, one thread per rank (2 cores).
RANK_ENV: Dict[str, str] = {
    "PYTHONPATH": str(ROOT),
    "TF_CPP_MIN_LOG_LEVEL": "3",
    "OMP_NUM_THREADS": "1",
    "TF_NUM_INTRAOP_THREADS": "1",
    "TF_NUM_INTEROP_THREADS": "1",
    "PYTHONDONTWRITEBYTECODE": "1",
    # MPICH's UCX would try shared memory between the emulated nodes (one real host, other
    # namespaces: "mm ep failed to connect to remote FIFO ... Shared memory error", a hang
    # seen about once in ten runs): TCP only, as between real nodes.
    "UCX_TLS": "tcp,self",
    "UCX_WARN_UNUSED_ENV_VARS": "n",
}
GPUS_PER_NODE = 4
#: GPUs that Slurm itself allocates and binds (GRES) in ``gres_cluster``: nodes that differ.
GRES_GPUS: Dict[str, int] = {"node1": 4, "node2": 2}
_TOOLS = ("srun", "sbatch", "salloc", "mpirun", "slurmctld", "slurmd", "munged")


def pytest_collection_modifyitems(config, items):
    """Marks every test under tests/cluster with pytest.mark.cluster."""
    for item in items:
        if Path(str(item.fspath)).resolve().is_relative_to(HERE):
            item.add_marker(pytest.mark.cluster)


def _require_cluster_tools() -> None:
    """Fails (never skips) where the throw-away cluster cannot run."""
    if os.geteuid() != 0:
        pytest.fail("tests/cluster need root (network namespaces, slurmd); run them as root")
    path = os.environ.get("PATH", "") + ":/usr/sbin:/sbin"
    missing = [t for t in _TOOLS if shutil.which(t, path=path) is None]
    if missing:
        pytest.fail(f"tests/cluster need {', '.join(missing)}: install slurm-wlm munge "
                    "openmpi-bin libpmix2 (bash scripts/setup.sh)")


def _started(nodes: Sequence[str], gpus: Optional[Mapping[str, int]] = None,
             gres: Optional[Mapping[str, int]] = None, kill_wait: int = 5,
             cpus_per_node: int = 8,
             memory_mb: Optional[int] = None) -> Iterator[SlurmCluster]:
    """Starts a cluster (fake nvidia-smi with GPUS_PER_NODE GPUs on every node unless ``gpus``
    says otherwise; Slurm GRES GPUs per ``gres``; each node's memory enforced where
    ``memory_mb`` is given); stops it after the session."""
    _require_cluster_tools()
    if gpus is None:
        gpus = {n: GPUS_PER_NODE for n in nodes}
    c = SlurmCluster(nodes=nodes, gpus=gpus, gres=gres, kill_wait=kill_wait,
                     cpus_per_node=cpus_per_node, memory_mb=memory_mb)
    try:
        c.start()
        yield c
    finally:
        c.stop()


@pytest.fixture(scope="session")
def cluster() -> Iterator[SlurmCluster]:
    """node1 and node2, 4 fake GPUs each (fake nvidia-smi per node)."""
    yield from _started(("node1", "node2"))


@pytest.fixture(scope="session")
def gres_cluster() -> Iterator[SlurmCluster]:
    """node1 with 4 and node2 with 2 GPUs that Slurm allocates and binds itself (GRES: it sets
    CUDA_VISIBLE_DEVICES, SLURMD_TRES_BIND, SLURM_GPUS_ON_NODE ... per task), plus a fake
    nvidia-smi with the same counts, so that tests can assert it was NOT called."""
    yield from _started(("node1", "node2"), gpus=GRES_GPUS, gres=GRES_GPUS)


@pytest.fixture(scope="session")
def gres_rank_env(gres_cluster: SlurmCluster) -> Dict[str, str]:
    """gres_cluster's probe ranks' variables: this checkout first on the path."""
    return {"PYTHONPATH": str(ROOT)}


@pytest.fixture(scope="session")
def gres_cli_env(gres_cluster: SlurmCluster) -> Dict[str, str]:
    """gres_cluster's command-line variables: a `tensorflow` that fails to import comes first
    (the command line must not import TensorFlow)."""
    return hiding(gres_cluster, "tensorflow", "the mpi_resolver command line imported TensorFlow")


@pytest.fixture(scope="session")
def longjob_cluster() -> Iterator[SlurmCluster]:
    """node1 and node2 with Slurm's default KillWait (30 s between SIGTERM and SIGKILL), which
    a save on SIGTERM must fit in, as on a real cluster (the others have 5 s: quicker ends);
    64 CPUs declared a node, so that every long job and the signal table's jobs run at once
    (one CPU a node each) instead of waiting for each other."""
    yield from _started(("node1", "node2"), gpus={}, kill_wait=30, cpus_per_node=64)


@pytest.fixture(scope="session")
def cpu_cluster() -> Iterator[SlurmCluster]:
    """cpu1 and cpu2: no GRES, no nvidia-smi (CPU-only nodes); started only by its tests."""
    yield from _started(("cpu1", "cpu2"), gpus={})


@pytest.fixture(scope="session")
def cluster_n9() -> Iterator[SlurmCluster]:
    """n9 and n10 (names that sort wrongly as strings); started only by the tests using it."""
    yield from _started(("n9", "n10"))


def hiding(cluster: SlurmCluster, module: str, why: str) -> Dict[str, str]:
    """Returns the ranks' PYTHONPATH with a ``module`` first on it that fails to import with
    ``why`` (e.g. the command line must not import tensorflow)."""
    directory = os.path.join(cluster.workdir, f"no-{module}")
    os.makedirs(os.path.join(directory, module), exist_ok=True)
    with open(os.path.join(directory, module, "__init__.py"), "w") as f:
        f.write(f"raise ImportError({why!r})\n")
    return {"PYTHONPATH": directory + os.pathsep + str(ROOT)}
