"""Run under a real `mpirun -n 4 python -m pytest --with-mpi` (tests/test_mpirun.py does).

source='mpi' against TensorFlow's resolver given the equivalent Slurm variables, and the
cross-check against Slurm variables that do or do not describe the MPI world.
"""

from __future__ import annotations

import logging
import os
import socket
from unittest import mock

import pytest

pytestmark = pytest.mark.mpi(min_size=2)

MPI = pytest.importorskip("mpi4py.MPI")
tf = pytest.importorskip("tensorflow")

from mpi_resolver import MismatchError, MPIClusterResolver  # noqa: E402
from tests.mpi.counting import CountingComm  # noqa: E402
from tests.parity_cases import observe  # noqa: E402

COMM = MPI.COMM_WORLD
RANK, SIZE = COMM.Get_rank(), COMM.Get_size()
HOST = socket.gethostname()
LAUNCHER_VARS = [k for k in os.environ if k.startswith(("OMPI_COMM_WORLD", "PMIX_RANK"))]


def _equivalent_slurm_env():
    return {"SLURM_PROCID": str(RANK), "SLURM_STEP_NUM_TASKS": str(SIZE),
            "SLURM_STEP_NODELIST": HOST, "SLURM_STEP_TASKS_PER_NODE": str(SIZE)}


CASES = [
    ("workers, CUDA_VISIBLE_DEVICES lists one GPU per rank", {}, "per-rank"),
    ("ps and workers, port base 2222", {"jobs": {"ps": 1, "worker": SIZE - 1},
                                        "port_base": 2222}, "per-rank"),
    ("chief, workers and evaluator", {"jobs": {"chief": 1, "worker": SIZE - 2,
                                               "evaluator": 1}}, "per-rank"),
    ("two GPUs per task given", {"gpus_per_node": 2 * SIZE, "gpus_per_task": 2}, None),
    ("GPUs per node given, tasks share them", {"gpus_per_node": SIZE}, None),
    ("no auto_set_gpu", {"gpus_per_node": SIZE, "auto_set_gpu": False}, None),
]


@pytest.mark.parametrize("name,kwargs,cvd", CASES, ids=[c[0] for c in CASES])
def test_source_mpi_matches_tensorflow(name, kwargs, cvd):
    base = {k: v for k, v in os.environ.items()}
    if cvd == "per-rank":
        base["CUDA_VISIBLE_DEVICES"] = ",".join(str(i) for i in range(SIZE))
    expected = observe(tf.distribute.cluster_resolver.SlurmClusterResolver,
                       dict(base, **_equivalent_slurm_env()), kwargs)
    actual = observe(MPIClusterResolver, base, dict(kwargs, source="mpi"))
    assert actual == expected
    everyone = COMM.allgather(actual["cluster_spec"])
    assert all(spec == everyone[0] for spec in everyone)


def test_auto_without_slurm_uses_mpi():
    resolver = MPIClusterResolver(gpus_per_node=0)
    assert resolver.resolution.source == "mpi"
    spec = resolver.cluster_spec().as_dict()
    assert spec["worker"][RANK] == f"{HOST}:{8888 + RANK}"
    assert os.environ["CUDA_VISIBLE_DEVICES"] == ""


def _as_srun_task(extra):
    """Patches os.environ to look like `srun --mpi=pmix` set it (MPI is already running)."""
    env = {k: v for k, v in os.environ.items() if k not in LAUNCHER_VARS}
    env.update({"PMIX_RANK": str(RANK), "SLURM_LOCALID": str(RANK), "SLURMD_NODENAME": HOST,
                "SLURM_JOB_ID": "7", "SLURM_STEP_ID": "0"})
    env.update(_equivalent_slurm_env())
    env.update(extra)
    return mock.patch.dict(os.environ, env, clear=True)


def test_cross_check_passes_when_slurm_describes_the_world():
    with _as_srun_task({}):
        resolver = MPIClusterResolver(gpus_per_node=0, verify=True)
        assert resolver.resolution.verified and resolver.resolution.source == "slurm"
        assert resolver.cluster_spec().as_dict()["worker"][RANK] == f"{HOST}:{8888 + RANK}"


MISMATCHES = [
    ("Slurm step smaller than the MPI world",
     {"SLURM_STEP_NUM_TASKS": "2", "SLURM_STEP_TASKS_PER_NODE": "2",
      "SLURM_PROCID": str(RANK % 2)}, "fewer tasks than the MPI world|smaller than the MPI"),
    ("Slurm task ids numbered differently",
     {"SLURM_PROCID": str(SIZE - 1 - RANK)}, "numbers the ranks differently"),
    ("ranks from different Slurm steps",
     {"SLURM_STEP_ID": str(RANK % 2)}, "not wired to the step"),
    ("Slurm puts the ranks on another node",
     {"SLURMD_NODENAME": "elsewhere", "SLURM_STEP_NODELIST": "elsewhere"}, "other hosts"),
]


@pytest.mark.parametrize("name,extra,cause", MISMATCHES, ids=[m[0] for m in MISMATCHES])
def test_cross_check_raises_on_every_rank(name, extra, cause):
    with _as_srun_task(extra):
        with pytest.raises(MismatchError, match=cause) as info:
            MPIClusterResolver(gpus_per_node=0)
    assert "rank" in str(info.value) and "Slurm says" in str(info.value)
    assert info.value.rows
    flags = COMM.allgather(True)  # every rank got here: every rank raised
    assert flags == [True] * SIZE


def test_mpirun_inside_allocation_uses_mpi_and_says_so(caplog):
    daemon = {"SLURM_PROCID": "0", "SLURM_STEP_NUM_TASKS": "1", "SLURM_STEP_NODELIST": HOST,
              "SLURM_STEP_TASKS_PER_NODE": "1", "SLURM_JOB_ID": "7", "SLURM_STEP_ID": "0"}
    with mock.patch.dict(os.environ, daemon), caplog.at_level(logging.WARNING, "mpi_resolver"):
        resolver = MPIClusterResolver(gpus_per_node=0)
        assert resolver.resolution.source == "mpi"
        assert resolver.cluster_spec().as_dict()["worker"][RANK] == f"{HOST}:{8888 + RANK}"
        with pytest.raises(MismatchError, match="inside a Slurm allocation"):
            MPIClusterResolver(gpus_per_node=0, verify=True)
    assert "describe its launcher daemons" in caplog.text


def test_few_collectives_on_a_duplicate_and_nvidia_smi_once_per_node(tmp_path_factory):
    """source='mpi' on one node: the exchange's fixed steps (_exchange.py), all on its own
    duplicate of the communicator; the ranks of the node swap records point to point."""
    from tests.conftest import write_fake_nvidia_smi

    smi = write_fake_nvidia_smi(tmp_path_factory.mktemp(f"smi{RANK}"), SIZE)
    calls = tmp_path_factory.mktemp(f"calls{RANK}") / "calls"
    script = os.path.join(smi, "nvidia-smi")
    with open(script) as f:
        body = f.read()
    with open(script, "w") as f:
        f.write(body.replace("#!/bin/sh\n", f"#!/bin/sh\necho x >> {calls}\n"))
    env = {k: v for k, v in os.environ.items() if k != "CUDA_VISIBLE_DEVICES"}
    env["PATH"] = smi + os.pathsep + env.get("PATH", "")
    counting = CountingComm(COMM)
    with mock.patch.dict(os.environ, env, clear=True):
        resolver = MPIClusterResolver(comm=counting)
        resolver.cluster_spec()
        resolver.master()
        resolver.cluster_spec()
        assert os.environ["CUDA_VISIBLE_DEVICES"] == str(RANK)
    assert counting.collectives == ["Idup", "Iallreduce", "Iallgather", "Iallgatherv",
                                    "Iallreduce"]
    assert counting.messages.count("Isend") == counting.messages.count("Irecv") == SIZE - 1
    probes = COMM.allgather(calls.exists() and len(calls.read_text().split()))
    assert sum(p or 0 for p in probes) == 1  # one node: nvidia-smi ran once, on local rank 0
