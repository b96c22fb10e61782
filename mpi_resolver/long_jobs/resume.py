"""Where a run of a requeued or restarted job starts: Slurm's restart count, the warning where
a restarted job finds no checkpoint to resume from, and the newest checkpoint that restores,
torn ones skipped (pure)."""

from __future__ import annotations

import os
from typing import Callable, List, Mapping, Optional, Sequence, Tuple, Type

from mpi_resolver.core.values import whole_number

__all__ = ["restart_count", "missing_checkpoint", "restore_newest"]


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


def restore_newest(prefixes: Sequence[str], restore: Callable[[str], None],
                   directory: str,
                   fatal: Tuple[Type[BaseException], ...] = ()) -> Tuple[Optional[str], List[str]]:
    """Restores the newest of ``prefixes`` (oldest first, as CheckpointManager lists them)
    that restores: ``restore(prefix)`` raises where a checkpoint is torn (its data file cut
    short, its index missing). Returns (the prefix restored, None where none did; the
    warnings: one for each torn checkpoint skipped, or one naming every one where none
    restores).

    Raises:
      ``fatal``: what ``restore`` raised of those types (a checkpoint that is whole but does
        not fit the state: never skipped to an older one).
    """
    failed: List[Tuple[str, str]] = []
    for prefix in reversed(list(prefixes)):
        try:
            restore(prefix)
        except fatal:
            raise
        except Exception as e:  # noqa: BLE001 - any failure to read means: do not trust it
            failed.append((os.path.basename(prefix), first_line(e)))
            continue
        return prefix, [f"checkpoint {name} in {directory} does not restore ({why}): skipped; "
                        f"resuming from {os.path.basename(prefix)}" for name, why in failed]
    if not failed:
        return None, []
    names = "; ".join(f"{name}: {why}" for name, why in failed)
    return None, [f"no checkpoint in {directory} restores ({names}): training starts from "
                  "step 0"]


def first_line(error: BaseException) -> str:
    """Returns the first line of ``error``'s message, with its type where it has none."""
    text = str(error).strip().splitlines()
    return text[0][:200] if text else type(error).__name__
