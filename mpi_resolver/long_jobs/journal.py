"""Worker 0's part of the job's story: a ledger record at each restore, save, failed save and
completion (one a save, never one a step), the line said at each save
(``checkpoint ckpt-7 at step 280 (periodic) in 0.21 s``), and a small progress file,
``mpi_resolver.progress.json``, overwritten at most once a second (PROGRESS_EVERY) with the
step reached, which ``status`` and supervise read (the edge for both files; the rest is
pure). A journal that cannot be written says so once and the training goes on.
"""

from __future__ import annotations

import atexit
import json
import os
import time
from typing import Any, Callable, Dict, Mapping, Optional, Sequence, Tuple

from mpi_resolver.core.errors import FormatError
from mpi_resolver.core.logs import log_once
from mpi_resolver.long_jobs import ledger
from mpi_resolver.long_jobs.manifest import read_object
from mpi_resolver.long_jobs.resume import restart_count
from mpi_resolver.long_jobs.stragglers import Slow

__all__ = ["Journal", "PROGRESS", "PROGRESS_EVERY", "KINDS", "save_line", "read_progress",
           "checkpoint_bytes", "planned_steps", "write_ended"]

PROGRESS = "mpi_resolver.progress.json"
#: Seconds between two writes of the progress file: the steps a failure loses are known to
#: within this much training where worker 0 is killed too (it writes its last step when it
#: exits); one small file renamed, no fsync: cheap on a shared file system.
PROGRESS_EVERY = 1.0
#: What a save was made for: the schedule's, the warning signal's, the training's end.
KINDS = ("periodic", "signal", "final")


def planned_steps(value: Any) -> Optional[int]:
    """Returns ``total_steps`` (the steps the training plans; None: not said).

    Raises:
      FormatError: not a whole number > 0.
    """
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise FormatError(f"total_steps: expected the whole number of steps the training "
                          f"plans (> 0), or None, got {value!r}")
    return value


def save_line(name: Optional[str], step: int, kind: str, seconds: Optional[float],
              write: Optional[float] = None) -> str:
    """Returns the line said at a save: ``checkpoint ckpt-7 at step 280 (periodic) in
    0.21 s``; one written in the background (``write`` seconds) says what the training paid
    and the write: ``... (periodic) in 0.004 s, written in the background in 0.21 s``."""
    if write is None:
        took = "" if seconds is None else f" in {seconds:.2f} s"
    else:
        took = ("" if seconds is None else f" in {seconds:.3f} s") + \
            f", written in the background in {write:.2f} s"
    return f"checkpoint {name or '(the save_fn)'} at step {step} ({kind}){took}"


def error_text(error: BaseException) -> str:
    """Returns why a save failed, on one line of 300 characters at most (the error's text, or
    its type's name where it has none)."""
    return " ".join(str(error).split())[:300] or type(error).__name__


def not_saved_line(step: int, why: str) -> str:
    """Returns the warning said when the save at ``step`` failed for ``why``."""
    return f"the checkpoint at step {step} was not saved ({why}); the last one that restores " \
        "is kept"


def checkpoint_bytes(paths: Sequence[str]) -> Optional[int]:
    """Returns the bytes of ``paths`` together, None where none of them is a file."""
    sizes = [os.path.getsize(p) for p in paths if os.path.isfile(p)]
    return sum(sizes) if sizes else None


def write_ended(journal: Optional["Journal"], written: Any, kind: str, background: bool,
                manifest: Callable[[], None],
                checkpoint: Callable[[], Tuple[Optional[str], Optional[int]]]) -> Optional[str]:
    """Records a checkpoint's write that ended (``written``: a background.Written; ``kind``:
    one of KINDS): ``manifest()`` first, whose failure is the save's (the directory made
    read-only meanwhile), then the save's record with ``checkpoint()``'s name and bytes (the
    training paid the stall alone where it was written in the ``background``, else the stall
    and the write); or the warning and the failure's record. Returns why it failed, None
    where it did not."""
    error = written.error
    if error is None:
        try:
            manifest()
        except Exception as e:  # noqa: BLE001 - a full disk, a quota: the save failed
            error = error_text(e)
    if error is not None:
        log_once(not_saved_line(written.step, error))
        if journal is not None:
            journal.save_failed(written.step, written.stall, kind, error)
        return error
    if journal is not None and journal.chief:
        name, nbytes = checkpoint()
        journal.saved(written.step, written.stall if background else
                      written.stall + written.seconds, kind, name, nbytes,
                      write=written.seconds if background else None)
    return None


def read_progress(directory: str) -> Optional[Dict[str, Any]]:
    """Returns the progress file of ``directory`` (job, step, time, from, since), None where
    there is none or it is not one JSON object."""
    return read_object(os.path.join(directory, PROGRESS))


class Journal:
    """The ledger's records of worker 0 (``chief``; the others write nothing) for ``job`` in
    ``directory``; ``env``: the step's environment (its node list and requeue count)."""

    def __init__(self, directory: str, job: Optional[str], chief: bool,
                 env: Mapping[str, str], *, clock: Callable[[], float] = time.time,
                 say: Callable[[str], None] = log_once) -> None:
        self.directory, self.job, self.chief = directory, job, chief
        self._clock, self._say = clock, say
        self._requeues = restart_count(env)
        self._nodes = env.get("SLURM_JOB_NODELIST") or env.get("SLURM_NODELIST")
        self._from = 0
        self._since: Optional[float] = None
        self._written: Optional[float] = None
        self._pending: Optional[int] = None  # a step reached but not written yet
        self._broken = False
        if chief:  # a worker that ends on an error (a peer lost) still tells its last step
            atexit.register(self.flush)

    def restored(self, step: int, checkpoint: Optional[str], skipped: Sequence[str] = (),
                 plan: Optional[int] = None) -> None:
        """Records the run's start of training: the ``step`` it resumed from (0: none),
        the ``checkpoint`` restored, the torn ones ``skipped``, the steps planned."""
        self._from, self._since = step, self._clock()
        self._record({"event": "restore", "step": step, "checkpoint": checkpoint,
                      "skipped": list(skipped), "plan": plan, "nodes": self._nodes,
                      "requeues": self._requeues})
        self.progress(step, force=True)

    def saved(self, step: int, seconds: Optional[float], kind: str,
              checkpoint: Optional[str] = None, nbytes: Optional[int] = None,
              write: Optional[float] = None) -> None:
        """Records a whole save at ``step`` (``seconds`` of the training; ``write``: the
        seconds of its write in the background, where it was) and says its line."""
        fields = {"event": "save", "step": step, "seconds": seconds, "kind": kind,
                  "checkpoint": checkpoint, "bytes": nbytes}
        self._record(fields if write is None else {**fields, "write": write})
        if self.chief:
            self._say(save_line(checkpoint, step, kind, seconds, write))
        self.progress(step, force=True)

    def save_failed(self, step: int, seconds: Optional[float], kind: str, why: str) -> None:
        """Records a save at ``step`` that failed, and why."""
        self._record({"event": "save_failed", "step": step, "seconds": seconds,
                      "kind": kind, "error": why})

    def slow(self, slow: Slow) -> None:
        """Records a slow rank found (long_jobs.slow_ranks) and says its line."""
        self._record({"event": "slow", "rank": slow.rank, "node": slow.node,
                      "seconds": slow.seconds, "peers": slow.peers, "rounds": slow.rounds,
                      "window": slow.window})
        if self.chief:
            self._say(slow.line())

    def completed(self, step: int) -> None:
        """Records that the job's training completed at ``step``."""
        self.progress(step, force=True)
        self._record({"event": "completed", "step": step})

    def progress(self, step: int, force: bool = False) -> None:
        """Writes the progress file (``step`` reached now) where PROGRESS_EVERY seconds went
        by since the last write, or ``force``."""
        if not self.chief or self._broken:
            return
        now = self._clock()
        if not force and self._written is not None and now - self._written < PROGRESS_EVERY:
            self._pending = step
            return
        self._written, self._pending = now, None
        body = {"job": self.job, "step": step, "time": now, "from": self._from,
                "since": self._since}
        path = os.path.join(self.directory, PROGRESS)
        try:
            with open(path + ".part", "w", encoding="utf-8") as f:
                json.dump(body, f, sort_keys=True)
            os.replace(path + ".part", path)
        except OSError as e:
            self._fail(path, e)

    def flush(self) -> None:
        """Writes the progress file where a step reached is not in it yet (at the process's
        exit: the steps a failure loses are then exact where worker 0 survives it); not where
        the directory is gone (removed after the training, a test's)."""
        if self._pending is not None and os.path.isdir(self.directory):
            self.progress(self._pending, force=True)

    def _record(self, fields: Mapping[str, Any]) -> None:
        if not self.chief or self._broken:
            return
        record = {**fields, "job": self.job, "time": self._clock(),
                  "format": ledger.FORMAT}
        try:
            ledger.append(self.directory, record)
        except OSError as e:
            self._fail(os.path.join(self.directory, ledger.LEDGER), e)

    def _fail(self, path: str, e: OSError) -> None:
        self._broken = True
        self._say(f"{path} cannot be written ({e.strerror or e}): the job's ledger and "
                  "progress stop here; the training goes on")
