"""The cross-check of Slurm against MPI, and placement, as tables of fake jobs (no real MPI).

Each case builds every rank's RankRecord as the real exchange would deliver it, then runs the
pure resolution for one rank.
"""

from __future__ import annotations

import pytest

from mpi_resolver._errors import MismatchError, ResolutionError
from tests.unit.envs import BLOCK
from tests.unit.jobs import run_job, run_world, srun_env

pytestmark = pytest.mark.unit


def test_fully_qualified_host_names_are_the_same_host():
    envs = [srun_env(r, ["node1", "node2"], [3, 1], BLOCK) for r in range(4)]
    res = run_job(envs, [h + ".cluster.example.org" for h in BLOCK], rank=3)
    assert res.verified and res.layout.addresses[3] == "node2:8888"


MISMATCH_CASES = [
    # (name, per-rank env changes, MPI size seen, expected words in the cause)
    ("srun without the --mpi plugin the MPI speaks: each task is an MPI world of one",
     {}, 1, "srun without the --mpi plugin this MPI speaks"),
    ("mpirun inside salloc: Slurm's variables describe the launcher daemons",
     {"mpirun": True}, None, "inside a Slurm allocation"),
    ("a Slurm step with fewer tasks than the MPI world",
     {"SLURM_STEP_NUM_TASKS": "2", "SLURM_STEP_TASKS_PER_NODE": "1,1"}, None,
     "fewer tasks|smaller than the MPI world"),
    ("MPI not wired to the step: ranks come from different steps",
     {"SLURM_STEP_ID": "rank-dependent"}, None, "not wired to the step"),
    ("MPI numbers ranks differently from SLURM_PROCID",
     {"SLURM_PROCID": "reversed"}, None, "numbers the ranks differently"),
    ("a rank runs on another host than Slurm says",
     {"SLURMD_NODENAME": "node9"}, None, "other hosts"),
]


@pytest.mark.parametrize("name,change,mpi_size,cause", MISMATCH_CASES,
                         ids=[c[0] for c in MISMATCH_CASES])
def test_mismatch_raises_with_table_and_cause(name, change, mpi_size, cause):
    envs = [srun_env(r, ["node1", "node2"], [3, 1], BLOCK) for r in range(4)]
    for r, env in enumerate(envs):
        if change.get("mpirun"):
            daemon = 0 if BLOCK[r] == "node1" else 1
            env.update(SLURM_PROCID=str(daemon), SLURM_STEP_NUM_TASKS="2",
                       SLURM_STEP_TASKS_PER_NODE="1,1", OMPI_COMM_WORLD_RANK=str(r),
                       OMPI_COMM_WORLD_SIZE="4", OMPI_COMM_WORLD_LOCAL_RANK="0")
            continue
        for key, value in change.items():
            if value == "rank-dependent":
                value = str(r % 2)
            elif value == "reversed":
                value = str(3 - r)
            env[key] = value
    for rank in range(4):
        kwargs = {"verify": True}
        with pytest.raises(MismatchError, match=cause) as info:
            run_job(envs, BLOCK, rank=rank, mpi_size=mpi_size, **kwargs)
        text = str(info.value)
        assert "Slurm says" in text and "MPI says" in text and "Likely cause" in text
        assert info.value.rows, "the error carries its per-rank rows"


def test_nodes_with_different_gpu_counts_use_their_own_count():
    """The rule: each node's own GPU list; gpus_per_task = min over nodes of GPUs // tasks."""
    placement = ["node1", "node1", "node2", "node2"]
    envs = [srun_env(r, ["node1", "node2"], [2, 2], placement,
                     CUDA_VISIBLE_DEVICES="0,1,2,3" if placement[r] == "node1" else "0,1")
            for r in range(4)]
    got = [run_job(envs, placement, rank=r) for r in range(4)]
    assert [g.visible_devices for g in got] == ["0", "1", "0", "1"]
    assert got[0].gpus.per_task == 1
    for rank in range(4):  # node2 cannot give 2 tasks 2 GPUs each: every rank says so
        with pytest.raises(ResolutionError, match="node2, which has 2"):
            run_job(envs, placement, rank=rank, gpus_per_task=2)


def test_gpu_probe_runs_once_per_node_and_its_failure_reaches_every_rank():
    placement = ["node1", "node1", "node2", "node2"]
    envs = [srun_env(r, ["node1", "node2"], [2, 2], placement) for r in range(4)]
    calls = []

    def probe():
        calls.append(1)
        raise ResolutionError("nvidia-smi was not found on PATH; set gpus_per_node")

    results = run_world(envs, placement, probe=probe)
    assert len(calls) == 2  # local rank 0 of each node
    for result in results:
        assert isinstance(result, ResolutionError), result
        assert "rank 0 on node1: nvidia-smi" in str(result)


