"""The one-line notes on how a job's ranks use their GPUs: shared lists, and the summary line
of `mpi-resolver show` (pure)."""

from __future__ import annotations

from typing import Optional, Sequence, Tuple

from mpi_resolver.gpus.lists import Gpus

KINDS = ("divided", "own", "shared", "none", "unknown")


def shared_note(host: str, shared: Sequence[Tuple[Gpus, int, int, int]],
                per_gpu: Optional[int]) -> str:
    """Returns the note for the lists of ``host`` that its ranks share: (list, ranks that see
    it, GPUs each takes, ranks it is spread over (0: not spread))."""
    ranks = sum(n for _, n, _, _ in shared)
    lists = " / ".join(",".join(gpus) for gpus, _, _, _ in shared)
    if per_gpu and per_gpu > 1:
        return (f"GPUs are shared: {ranks} tasks on {host} use GPU(s) {lists}, "
                f"{per_gpu} tasks per GPU as Slurm bound them (--ntasks-per-gpu / "
                f"--gpu-bind=single:{per_gpu}).")
    count = len({g for gpus, _, _, _ in shared for g in gpus})
    if any(spread for _, _, _, spread in shared):
        each = shared[0][2]
        return (f"GPUs are shared: {count} GPU(s) ({lists}) on {host} for {ranks} tasks that "
                f"see them, fewer than one each: each task takes {each}, spread over them, so "
                f"that every task of the job has {each} (MultiWorkerMirroredStrategy needs "
                "the same number on every worker; uneven_gpus=True lets each keep all).")
    return (f"GPUs are shared: {count} GPU(s) ({lists}) on {host} for {ranks} tasks that see "
            "them, fewer than one each, so each of those tasks uses all of them "
            "(TensorFlow's resolver crashes here). Ask Slurm for --gpus-per-task=1, or run at "
            "most one task per GPU, if sharing is not intended.")


_PHRASES = {
    "divided": "each node's GPUs divided among its tasks in rank order",
    "own": "each task keeps the GPUs Slurm bound to it",
    "shared": "tasks share GPUs (fewer GPUs than the tasks that see them)",
    "none": "no GPUs",
    "unknown": "other tasks' GPUs unknown without MPI (each keeps what Slurm bound to it)",
}


def describe(kinds: Sequence[str], bind: Optional[str]) -> str:
    """Returns one line saying how the job's ranks got their GPUs (kinds as Share.kind, plus
    'unknown'; ``bind`` as SlurmGpus.bind)."""
    text = "; ".join(_PHRASES[k] for k in KINDS if k in kinds)
    return text + (f" (Slurm: SLURMD_TRES_BIND=gpu:{bind})" if bind else "")
