"""The save TensorFlow's handler calls (its ``save_fn``), written at once or in the background:
the chief into the kept checkpoints, another worker into a throw-away copy in its own memory;
a periodic save, where ``writes`` is given, pays only the snapshot of the state and its write
runs in the background (long_jobs/background), recorded once it ends; the signal's save and
the final one wait for the write in flight, then write at once; a failure is noted, never
raised into the training loop (the TensorFlow edge; importing this module imports
TensorFlow)."""

from __future__ import annotations

import dataclasses
import glob
import os
import time
from typing import Any, Callable, Mapping, Optional, Tuple

import tensorflow as tf

from mpi_resolver.core.logs import log_once
from mpi_resolver.long_jobs.background import BackgroundWrites, Written, write_now
from mpi_resolver.long_jobs.journal import (Journal, checkpoint_bytes, error_text,
                                             not_saved_line, write_ended)
from mpi_resolver.long_jobs.manifest import manifest_for, write_manifest
from mpi_resolver.tensorflow.checkpoints import KeepingManager, fsync_checkpoint
from mpi_resolver.tensorflow.tier import TfTier, TierWritten

__all__ = ["Saver"]


class Saver:
    """The handler's ``save_fn``. ``resumed`` is the step the run started from, ``newest``
    the step of this run's last whole save (the chief: on disk); ``journal`` (worker 0's
    ledger records) is set when the handler is built; ``deferred`` is set by the handler
    around a periodic save, which ``writes`` (where given) then writes in the background."""

    def __init__(self, manager: KeepingManager, scratch: Optional[tf.train.CheckpointManager],
                 *, job: Optional[str], settings: Mapping[str, Any],
                 writes: Optional[BackgroundWrites] = None, tier: Optional[TfTier] = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.manager, self.scratch, self.writes, self.tier = manager, scratch, writes, tier
        self.job, self.settings, self._clock = job, dict(settings), clock
        self.failed: Optional[str] = None
        self.seconds: Optional[float] = None
        self.step = 0
        self.resumed = 0
        self.newest: Optional[int] = None
        #: The step of the newest checkpoint in the checkpoint directory (the chief's knows;
        #: a node-local tier's saves are not there): the run's start where it restored one.
        self.shared: Optional[int] = None
        self.key = ""  # the handler's own keys' start (handler_setup.build)
        self.journal: Optional[Journal] = None
        self.deferred = False
        self._prefix: Optional[str] = None  # the chief's last checkpoint written
        self._kind = "periodic"  # the kind of the save written in the background
        self._recorded = False  # a tier's save written at once, recorded as it ended
        #: Told how each background write ended (whole or not): the schedule's back-off.
        self.on_written: Callable[[bool], None] = lambda whole: None

    @property
    def advanced(self) -> bool:
        """Returns whether a save of this run moved the newest checkpoint past its start."""
        return self.newest is not None and self.newest > self.resumed

    def started(self, step: int, key: str, shared: bool) -> None:
        """Notes the run's start at ``step`` (restored from the checkpoint directory where
        ``shared``, else from a node-local tier), and its handler's keys' start ``key``."""
        self.resumed, self.key = step, key
        if shared:
            self.shared = step

    def __call__(self, *args: Any, **kwargs: Any) -> None:
        periodic = self.deferred and not (args or kwargs)
        tiered = periodic and self.tier is not None
        background = periodic and self.writes is not None
        start = self._clock()  # the wait for the write in flight is this save's cost
        self.settle()  # the write in flight first: one at a time, the newest last
        self.failed = None
        try:
            if tiered:
                background = self._tier_save(start)
            elif background:
                self._snapshot(start)
            else:
                self._write(*args, **kwargs)
        except Exception as e:  # noqa: BLE001 - disk full, quota, a peer gone: noted
            self.failed = error_text(e)
            log_once(not_saved_line(self.step, self.failed))
            return
        self.seconds = self._clock() - start
        if not tiered and (not background or self.scratch is not None):
            self.newest = self.shared = self.step  # the chief's in the background: once whole

    def record(self, kind: str, seconds: Optional[float]) -> None:
        """Records the save just made at ``step`` (one of journal.KINDS) in the job's
        ledger, as it ended: whole, or ``failed``; a user's save_fn's without a name; one
        written in the background once its write ends (``collect``, ``settle``)."""
        if self.journal is None or self._recorded:
            self._recorded = False
            return
        if self.failed is not None:
            self.journal.save_failed(self.step, seconds, kind, self.failed)
            return
        if self.writes is not None and self.writes.pending:  # recorded once its write ends
            self._kind = kind
            return
        ours = self._prefix is not None and self.newest == self.step
        self._saved(self.step, seconds, kind, self._prefix if ours else None)

    def collect(self) -> None:
        """Records the background write that ended since the last step, if one did."""
        if self.writes is not None:
            self._ended(self.writes.done())

    def settle(self) -> None:
        """Waits for the background write in flight, if one is, and records it: before a
        save that must be on disk when it returns, and at the end of the training."""
        if self.writes is not None:
            self._ended(self.writes.wait())

    def claim(self, step: int, **more: Any) -> None:
        """Writes the manifest (the chief; this job's from now on, at ``step``, with ``more``
        of its fields) before the first save, so that another job started on the directory
        meanwhile is told."""
        if self.scratch is None:
            write_manifest(os.path.dirname(self.manager.directory.rstrip("/")),
                           {**manifest_for(self.job, step, self.settings), **more})

    def _snapshot(self, start: float) -> None:
        """Reads the state now (every worker: a value synchronized on read needs all) and,
        the chief, starts its write in the background, the training's cost counted from
        ``start``."""
        assert self.writes is not None
        # numbered alike on every worker; another worker's part read, nothing written
        snap = self.manager.snapshot(copy=self.scratch is None)
        if self.scratch is not None:
            return
        self.writes.start(self.step, self._clock() - start,
                          lambda: self.manager.write_snapshot(snap), self.manager.remove_oldest)

    def _tier_save(self, start: float) -> bool:
        """Reads the state now (every worker) and writes it to the node-local tier, and to
        the shared directory where its turn comes (the chief): in the background where the
        saver writes so and the tier lets a thread write (LocalSaves.threads_ok), else at
        once and recorded now. Returns whether it was written in the background."""
        assert self.tier is not None
        step, tier = self.step, self.tier
        snap = self.manager.snapshot(copy=True)
        shared = tier.plan() and self.scratch is None

        def job() -> TierWritten:
            return tier.write(step, snap, (lambda: self.manager.write_snapshot(snap))
                              if shared else None)

        then = self.manager.remove_oldest if shared else None
        stall = self._clock() - start
        if self.writes is not None and tier.local.threads_ok():
            self.writes.start(step, stall, job, then)
            return True
        self._ended(write_now(step, stall, job, then, self._clock), background=False)
        self._recorded = True
        return False

    def _ended(self, written: Optional[Written], background: bool = True) -> None:
        """Notes and records a background write that ended (``background``: else one
        written at once, its write's time the training's too)."""
        if written is None:
            return
        prefix, name = written.result, None
        if self.tier is not None and written.error is not None:
            self.tier.ended(written.step, written.error)
        if isinstance(prefix, TierWritten):
            written, prefix, name = self._tier_ended(written)
        failed = write_ended(self.journal, written, self._kind, background,
                             manifest=lambda: self.claim(written.step),
                             checkpoint=lambda: name or _named(prefix))
        if failed is None:
            self.newest, self._prefix = written.step, prefix or self._prefix
            if prefix:
                self.shared = written.step
        self.on_written(failed is None)

    def _tier_ended(self, written: Written) -> Tuple[Written, Optional[str], Any]:
        """Returns a tier's save as a write that ended: failed where neither the tier nor
        the shared directory took it whole, the shared checkpoint's prefix where one was
        written, else the tier's name for it and its bytes."""
        assert self.tier is not None
        why, prefix = written.result
        self.tier.ended(written.step, why)
        if why is not None and prefix is None:
            return dataclasses.replace(written, error=why), None, None
        local = None if prefix else (f"{written.step} (node-local)", self.tier.local.last_bytes)
        return written, prefix, local

    def _saved(self, step: int, seconds: Optional[float], kind: str,
               prefix: Optional[str]) -> None:
        """Records the whole save at ``step`` (checkpoint ``prefix``: its name and bytes;
        None: a user's save_fn's) in the job's ledger."""
        if self.journal is not None:
            self.journal.saved(step, seconds, kind, *_named(prefix))

    def _write(self, *args: Any, **kwargs: Any) -> None:
        if self.scratch is None:  # the chief
            prefix = self.manager.save(*args, **kwargs)
            fsync_checkpoint(prefix, self.manager.directory)
            self._prefix = prefix
            self.claim(self.step)
            return
        self.scratch.save(*args, **kwargs)
        tf.io.gfile.rmtree(os.path.dirname(self.scratch.directory.rstrip("/")))


def _named(prefix: Optional[str]) -> Tuple[Optional[str], Optional[int]]:
    """Returns the name and bytes of the checkpoint ``prefix`` (None: a user's save_fn's,
    neither known)."""
    if prefix is None:
        return None, None
    return os.path.basename(prefix), checkpoint_bytes(glob.glob(prefix + ".*"))
