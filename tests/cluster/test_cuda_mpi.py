"""A CUDA-aware MPI on the GRES cluster (node1 with 4 GPUs, node2 with 2): a stand-in that,
like Open MPI or MPICH built with CUDA, loads libcuda.so inside MPI_Init, and records what
CUDA_VISIBLE_DEVICES was at that moment. Where Slurm's variables give a rank's GPUs, the
resolver sets the variable before MPI starts; where MPI's answer then differs (node1, evened
out to node2's count), it says so instead of leaving CUDA with GPUs outside the allocation."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Dict, List

import pytest

from tests.cluster.conftest import PY
from tests.cluster.test_scenarios import launch
from tests.harness.slurm_cluster import SlurmCluster

#: MPI_Init/MPI_Init_thread that record CUDA_VISIBLE_DEVICES, load STANDIN_LIBCUDA, then MPI's.
SHIM = r"""
#define _GNU_SOURCE
#include <dlfcn.h>
#include <mpi.h>
#include <stdlib.h>
static void start_cuda(void) {
  const char *cvd = getenv("CUDA_VISIBLE_DEVICES");
  setenv("STANDIN_CVD_AT_INIT", cvd ? cvd : "(unset)", 1);
  const char *lib = getenv("STANDIN_LIBCUDA");
  if (lib) dlopen(lib, RTLD_NOW | RTLD_GLOBAL);
}
int MPI_Init_thread(int *argc, char ***argv, int required, int *provided) {
  start_cuda();
  return PMPI_Init_thread(argc, argv, required, provided);
}
int MPI_Init(int *argc, char ***argv) {
  start_cuda();
  return PMPI_Init(argc, argv);
}
"""
#: One JSON line per rank: its GPUs after the resolver (or its error), and what MPI_Init saw.
PROGRAM = """
import ctypes, json, os
out = {"rank": int(os.environ["SLURM_PROCID"])}
try:
    from mpi_resolver import MPIClusterResolver
    MPIClusterResolver().cluster_spec()
    out["gpus"] = os.environ.get("CUDA_VISIBLE_DEVICES")
except Exception as e:
    out["error"] = str(e)
libc = ctypes.CDLL(None)
libc.getenv.restype = ctypes.c_char_p
seen = libc.getenv(b"STANDIN_CVD_AT_INIT")
out["at_mpi_init"] = seen.decode() if seen else None
os.write(1, (json.dumps(out) + "\\n").encode())
"""


@pytest.fixture(scope="module")
def cuda_mpi(gres_cluster: SlurmCluster) -> str:
    """Returns a shell prefix that runs a command with the stand-in CUDA-aware MPI preloaded
    (built with Debian's mpicc against the Open MPI mpi4py uses) and a stand-in libcuda.so.1
    (the C maths library under CUDA's driver's name)."""
    directory = Path(gres_cluster.workdir) / "cuda-mpi"
    directory.mkdir(exist_ok=True)
    (directory / "shim.c").write_text(SHIM)
    subprocess.run(["mpicc", "-shared", "-fPIC", "-o", str(directory / "libcudampi.so"),
                    str(directory / "shim.c")], check=True, timeout=120)
    shutil.copy("/lib/x86_64-linux-gnu/libm.so.6", directory / "libcuda.so.1")
    return (f"export LD_PRELOAD={directory}/libcudampi.so "
            f"STANDIN_LIBCUDA={directory}/libcuda.so.1; exec \"$@\"")


def _ranks(stdout: str) -> List[Dict]:
    return sorted((json.loads(x) for x in stdout.splitlines() if x.startswith("{")),
                  key=lambda line: line["rank"])


def test_gpus_set_before_a_cuda_aware_mpi_init(gres_cluster: SlurmCluster, gres_rank_env,
                                               cuda_mpi) -> None:
    """--gres=gpu:4, four tasks on node1: MPI_Init (and CUDA with it) sees each rank's own
    GPU, and the resolver carries on without error."""
    run = launch(gres_cluster, ["srun", "--mpi=pmix", "-w", "node1", "-n4", "--gres=gpu:4",
                                "bash", "-c", cuda_mpi, "-", PY, "-c", PROGRAM],
                 env=gres_rank_env, parse=False)
    assert run.returncode == 0, run.context()
    lines = _ranks(run.stdout)
    assert [line.get("error") for line in lines] == [None] * 4, run.context()
    assert [line["at_mpi_init"] for line in lines] == ["0", "1", "2", "3"], run.context()
    assert [line["gpus"] for line in lines] == ["0", "1", "2", "3"], run.context()


def test_gpus_that_mpi_changes_after_a_cuda_aware_init_are_an_error(
        gres_cluster: SlurmCluster, gres_rank_env, cuda_mpi) -> None:
    """--gpus=6 with two tasks on each node: Slurm's variables give node1's ranks two GPUs
    each, and MPI_Init starts CUDA with those; the exchange then evens every worker out at
    node2's one GPU, which CUDA can no longer see: node1's ranks raise the error that names
    the fix, node2's carry on with what MPI_Init saw."""
    run = launch(gres_cluster, ["srun", "--mpi=pmix", "-N2", "--ntasks-per-node=2",
                                "--gpus=6", "bash", "-c", cuda_mpi, "-", PY, "-c", PROGRAM],
                 env=gres_rank_env, parse=False)
    assert run.returncode == 0, run.context()
    lines = _ranks(run.stdout)
    assert [line["at_mpi_init"] for line in lines] == ["0,1", "2,3", "0", "1"], run.context()
    for line in lines[:2]:
        assert "CUDA is already loaded in this process" in line.get("error", ""), run.context()
        assert "mpi-resolver exec" in line["error"]
    assert [line.get("gpus") for line in lines[2:]] == ["0", "1"], run.context()
