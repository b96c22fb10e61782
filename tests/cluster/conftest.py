"""Fixtures of the real-launch scenarios: throw-away Slurm clusters, started once per session.

These tests need root, Slurm, Open MPI, mpi4py and TensorFlow. The README promises that they
run, so a machine without root or srun fails them (it does not skip them).
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path
from typing import Dict, Iterator

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
}
GPUS_PER_NODE = 4
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


def _started(nodes) -> Iterator[SlurmCluster]:
    _require_cluster_tools()
    c = SlurmCluster(nodes=nodes, gpus={n: GPUS_PER_NODE for n in nodes})
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
def cluster_n9() -> Iterator[SlurmCluster]:
    """n9 and n10 (names that sort wrongly as strings); started only by the tests using it."""
    yield from _started(("n9", "n10"))
