"""Real `mpirun` runs of the MPI tests and of the command line (no Slurm)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.mpirun
ROOT = Path(__file__).resolve().parent.parent


def mpirun_env():
    env = dict(os.environ)
    env.update({"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
                "OMPI_MCA_rmaps_base_oversubscribe": "1",
                "OMPI_MCA_hwloc_base_binding_policy": "none",
                "PYTHONPATH": str(ROOT) + os.pathsep + env.get("PYTHONPATH", ""),
                "TF_CPP_MIN_LOG_LEVEL": "3", "TF_NUM_INTRAOP_THREADS": "1",
                "TF_NUM_INTEROP_THREADS": "1", "OMP_NUM_THREADS": "1"})
    for key in [k for k in env if k.startswith(("SLURM_", "SLURMD_", "PMI_", "PMIX_"))]:
        del env[key]
    return env


def mpirun(n, args, timeout=300, extra=()):
    return subprocess.run(["mpirun", "-n", str(n), *extra, *args], capture_output=True,
                          text=True, timeout=timeout, env=mpirun_env(), cwd=ROOT)


def test_mpi_parity_and_cross_check_under_mpirun_4():
    """tests/mpi/mpi_parity.py on 4 real MPI ranks: every rank's pytest passes."""
    proc = mpirun(4, [sys.executable, "-m", "pytest", "--with-mpi", "--color=no", "-q",
                      "-p", "no:cacheprovider", "tests/mpi/mpi_parity.py"], timeout=600)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-6000:]
    summaries = re.findall(r"(\d+) passed", out)
    assert len(summaries) == 4 and len(set(summaries)) == 1, out[-3000:]
    assert int(summaries[0]) >= 14
    assert "failed" not in out
