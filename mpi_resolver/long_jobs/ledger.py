"""The job's ledger: one JSON record a line, appended and fsynced, in the job's checkpoint
directory beside the manifest, kept when the checkpoints are removed. supervise writes a
record when a run starts and when it ends (its cause, task, node, progress and what followed),
so that what one run learnt (no progress, a node that failed) survives a requeue, when a new
supervise takes over (pure, but for ``append`` and ``read``, the file edge).
"""

from __future__ import annotations

import json
import os
from dataclasses import MISSING, asdict, dataclass, fields
from typing import Any, Dict, Iterable, List, Mapping, Optional, Tuple

from mpi_resolver.long_jobs.causes import Cause
from mpi_resolver.long_jobs.policy import Came

__all__ = ["LEDGER", "FORMAT", "RunEnded", "append", "read", "read_counted", "runs",
           "stalled_before", "cut", "cut_short", "blamed"]

#: What came to supervise when the scheduler cut a run short.
_CUT_CAME = (Came.WARNING.value, Came.TIME_LIMIT.value)

LEDGER = "mpi_resolver.ledger.jsonl"
#: The records' format: each new record says it ("format"); those of the first release, which
#: wrote only supervise's run_start and run_end, have none and read the same.
FORMAT = 1


@dataclass(frozen=True)
class RunEnded:
    """The ledger's record of a run's end: which job and run, how it ended (the cause's
    words, the launcher's words, the task's node and whether the failure is blamed on it,
    the status), the newest checkpoint's step before and after it, its progress and the
    action that followed, what came to supervise (policy.Came's words; the warning
    signal's name), and the step the run reached and when (worker 0's progress file).
    """

    job: Optional[str]
    run: int
    cause: str
    what: str
    node: Optional[str]
    blamed: bool
    status: int
    step_before: Optional[int]
    step_after: Optional[int]
    progress: str
    action: str
    seconds: float = 0.0
    event: str = "run_end"
    came: str = "nothing"
    warning: str = "USR1"
    reached: Optional[int] = None
    reached_at: Optional[float] = None

    def record(self) -> Dict[str, Any]:
        """Returns the record as the ledger's line holds it."""
        return asdict(self)

    @classmethod
    def of(cls, record: Mapping[str, Any]) -> Optional["RunEnded"]:
        """Returns the record read back (a field added since the first release may be
        absent), None where it is not a whole run_end record."""
        needed = {f.name for f in fields(cls) if f.default is MISSING}
        if record.get("event") != "run_end" or not needed <= set(record):
            return None
        return cls(**{f.name: record[f.name] for f in fields(cls) if f.name in record})


def append(directory: str, record: Mapping[str, Any]) -> None:
    """Appends ``record`` as one line to ``directory``'s ledger, on disk before it returns
    (fsync): a crash right after leaves the line whole or absent, never half of it."""
    line = json.dumps(dict(record), sort_keys=True) + "\n"
    fd = os.open(os.path.join(directory, LEDGER), os.O_WRONLY | os.O_APPEND | os.O_CREAT,
                 0o644)
    try:
        os.write(fd, line.encode())
        os.fsync(fd)
    finally:
        os.close(fd)


def read(directory: str) -> List[Dict[str, Any]]:
    """Returns ``directory``'s ledger records, oldest first; a line that is not one JSON
    object (a torn last line) is passed over; none where there is no ledger."""
    try:
        return read_counted(directory)[0]
    except OSError:
        return []


def read_counted(directory: str) -> Tuple[List[Dict[str, Any]], int]:
    """Returns (``directory``'s ledger records, oldest first; the lines passed over, not one
    JSON object: a torn last line).

    Raises:
      OSError: the ledger cannot be read.
    """
    with open(os.path.join(directory, LEDGER), encoding="utf-8", errors="replace") as f:
        lines = f.read().splitlines()
    out = []
    for line in lines:
        try:
            record = json.loads(line)
        except ValueError:
            record = None
        if isinstance(record, dict):
            out.append(record)
    return out, len(lines) - len(out)


def runs(records: Iterable[Mapping[str, Any]], job: Optional[str]) -> List[RunEnded]:
    """Returns the ends of ``job``'s runs among ``records``, oldest first."""
    ended = (RunEnded.of(r) for r in records)
    return [r for r in ended if r is not None and r.job == job]


def cut(came: str, cause: str) -> bool:
    """Returns whether a run that ended as ``came`` (a Came's value) for ``cause`` (a
    Cause's) was cut short by the scheduler (its warning signal, the time limit): no failure
    of the job's own."""
    return came in _CUT_CAME or cause == Cause.WARNED.value


def cut_short(run: RunEnded) -> bool:
    """Returns whether the scheduler cut ``run`` short (``cut``)."""
    return cut(run.came, run.cause)


def stalled_before(ended: List[RunEnded], cut_now: bool = False) -> Optional[RunEnded]:
    """Returns the earlier run that, with a run now that made no progress, stops the job
    (None: none does): the last run that started, where it made none. For a run the
    scheduler cut (``cut_now``), only one it cut as well (two in a row: the job's time never
    reaches a save); for any other, the runs the scheduler cut without progress are passed
    over (not the job's failures), so that failures around them still count."""
    started = [r for r in ended if r.cause != Cause.NOT_STARTED.value]
    if not cut_now:
        started = [r for r in started if not (cut_short(r) and r.progress == "stalled")]
    last = started[-1] if started else None
    if last is None or last.progress != "stalled" or (cut_now and not cut_short(last)):
        return None
    return last


def blamed(ended: Iterable[RunEnded]) -> List[str]:
    """Returns the node each run's failure was blamed on, oldest first."""
    return [r.node for r in ended if r.blamed and r.node]
