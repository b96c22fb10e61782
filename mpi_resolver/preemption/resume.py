"""Where a run of a requeued job starts: Slurm's restart count, and the warning where a
restarted job finds no checkpoint to resume from (pure)."""

from __future__ import annotations

from typing import Mapping, Optional

from mpi_resolver.core.values import whole_number

__all__ = ["restart_count", "missing_checkpoint"]


def restart_count(env: Mapping[str, str]) -> int:
    """Returns SLURM_RESTART_COUNT (how often Slurm requeued this job; 0 where unset, as on
    a job's first run, or not a number)."""
    return whole_number(env.get("SLURM_RESTART_COUNT")) or 0


def missing_checkpoint(env: Mapping[str, str], directory: str,
                       found: Optional[str]) -> Optional[str]:
    """Returns the warning where Slurm restarted this job but ``directory`` holds no
    checkpoint (``found``: the latest one, None if none), else None."""
    restarts = restart_count(env)
    if restarts < 1 or found is not None:
        return None
    array, task = env.get("SLURM_ARRAY_JOB_ID"), env.get("SLURM_ARRAY_TASK_ID")
    job = f"{array}_{task}" if array and task else env.get("SLURM_JOB_ID", "?")
    return (f"job {job} runs for the {_ordinal(restarts + 1)} time (SLURM_RESTART_COUNT="
            f"{restarts}), but {directory} holds no checkpoint: training starts from step 0. "
            "Was the directory removed, or does this run name another one than the first "
            "(a node-local path such as /tmp, a path with the job's step or run in it)?")


def _ordinal(n: int) -> str:
    suffix = "th" if n % 100 in (11, 12, 13) else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"
