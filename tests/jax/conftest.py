"""Fixtures of the JAX edge's tests: .venv-jax's Python, and throw-away Slurm clusters of their
own (CPU-only nodes; GRES GPU nodes).

Every test here is marked ``jax``; those that start a cluster or mpirun are marked ``cluster``
too. The tests run from the suite's own pytest (.venv, without JAX): the pure part is
imported there; anything that needs JAX runs in .venv-jax's Python (scripts/setup_jax.sh) as a
subprocess or as the ranks of a job. A missing .venv-jax fails these tests (never skips).
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Dict, Iterator

import pytest

from tests.cluster.conftest import RANK_ENV, _started
from tests.harness.slurm_cluster import SlurmCluster

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
PROBE = str(HERE / "jax_probe.py")
SETUP = "bash scripts/setup_jax.sh"
#: GRES GPUs of jax_gres_cluster (Slurm allocates and binds them; no real GPU behind them).
GRES_GPUS = {"node1": 4, "node2": 2}
#: Variables for every JAX rank: this checkout first, one thread each (2 cores), quiet logs.
JAX_ENV: Dict[str, str] = {**RANK_ENV, "XLA_FLAGS": "--xla_cpu_multi_thread_eigen=false",
                           "JAX_PLATFORMS": "cpu", "TF_CPP_MIN_LOG_LEVEL": "3",
                           "KERAS_BACKEND": "jax"}


def jax_venv() -> Path:
    """Returns the virtualenv scripts/setup_jax.sh makes (same variable, same default)."""
    path = Path(os.environ.get("MPI_RESOLVER_JAX_VENV", ".venv-jax"))
    return path if path.is_absolute() else ROOT / path


JAX_PY = str(jax_venv() / "bin" / "python")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "jax: the JAX edge (mpi_resolver.jax; .venv-jax)")


def pytest_collection_modifyitems(config: pytest.Config, items: list) -> None:
    """Marks every test under tests/jax with pytest.mark.jax."""
    for item in items:
        if Path(str(item.fspath)).resolve().is_relative_to(HERE):
            item.add_marker(pytest.mark.jax)


@pytest.fixture(scope="session")
def jax_python() -> str:
    """Returns .venv-jax's Python; fails (never skips) where it is missing or has no JAX."""
    if not os.access(JAX_PY, os.X_OK):
        pytest.fail(f"{JAX_PY} is missing: run `{SETUP}` (JAX, Keras 3 and mpi4py for "
                    "tests/jax)")
    p = subprocess.run([JAX_PY, "-c", "import jax, keras, mpi4py"], capture_output=True,
                       text=True, timeout=120, env={**os.environ, "KERAS_BACKEND": "jax"})
    if p.returncode != 0:
        pytest.fail(f"{JAX_PY} cannot import jax, keras, mpi4py: run `{SETUP}`\n{p.stderr}")
    return JAX_PY


@pytest.fixture(scope="session")
def jax_cluster(jax_python: str) -> Iterator[SlurmCluster]:
    """node1 and node2, CPU-only (no GRES, no nvidia-smi), 16 CPUs declared each."""
    yield from _started(("node1", "node2"), gpus={}, cpus_per_node=16)


@pytest.fixture(scope="session")
def jax_gres_cluster(jax_python: str) -> Iterator[SlurmCluster]:
    """node1 with 4 and node2 with 2 GPUs that Slurm allocates and binds (GRES on device
    files: CUDA_VISIBLE_DEVICES, SLURMD_TRES_BIND ... per task), no nvidia-smi."""
    yield from _started(("node1", "node2"), gpus={}, gres=GRES_GPUS)
