"""A long job's checkpoints in TensorFlow: the last K kept, the newest that restores read back
(a torn one skipped, every worker on the same one), on disk before the save returns (its files
and TensorFlow's `checkpoint` state file fsynced), and the save that never raises into the
training loop; the other workers' part of the save (TensorFlow's collective save needs every
worker) goes to their own memory, never to the shared directory (the TensorFlow edge;
importing this module imports TensorFlow)."""

from __future__ import annotations

import glob
import os
import time
from typing import Any, Callable, List, Mapping, Optional

import tensorflow as tf

from mpi_resolver.core.errors import ResolutionError
from mpi_resolver.core.logs import log_each, log_once, logger
from mpi_resolver.long_jobs.durable import sync_directory, sync_files
from mpi_resolver.long_jobs.journal import Journal, checkpoint_bytes
from mpi_resolver.long_jobs.manifest import manifest_for, write_manifest
from mpi_resolver.long_jobs.resume import restore_newest

__all__ = ["KeepingManager", "Saver", "remove_part", "scratch_manager", "fsync_checkpoint"]

#: ``agree(prefix)``: the chief's restored checkpoint (prefix or '' for none) on every worker.
AgreeOn = Callable[[str], str]


class KeepingManager(tf.train.CheckpointManager):
    """A CheckpointManager that keeps the last ``keep`` checkpoints and, when asked to
    restore, restores the newest one that reads whole: a torn one (its data cut short, its
    index gone) is skipped with one warning naming it, and every worker ends on the chief's
    choice (``agree``)."""

    def __init__(self, checkpoint: Any, directory: str, keep: int, *, chief: bool,
                 agree: AgreeOn) -> None:
        super().__init__(checkpoint, directory, max_to_keep=keep)
        self.chief, self._agree = chief, agree
        self.restored: Optional[str] = None
        self.skipped: List[str] = []  # the warnings of the torn checkpoints passed over

    def restore_or_initialize(self) -> Optional[str]:
        """Returns the prefix restored, None where none restores (step 0).

        Raises:
          ResolutionError: this worker cannot read the checkpoint the chief restored.
        """
        prefix, warnings = restore_newest(self.checkpoints, self._restore_whole,
                                          self.directory)
        chosen = self._agree(prefix or "") or None
        if chosen != prefix:
            self._align(prefix, chosen)
        elif self.chief:
            log_each(warnings)
        self.restored, self.skipped = chosen, warnings
        return chosen

    def _align(self, own: Optional[str], chosen: Optional[str]) -> None:
        """Restores the chief's ``chosen`` checkpoint where this worker found ``own``."""
        said = (f"worker 0 resumes from {chosen or 'step 0 (no checkpoint)'} in "
                f"{self.directory}; this worker found {own or 'none'}")
        if chosen is None:
            raise ResolutionError(
                f"{said}: the workers do not see the same checkpoints. Is {self.directory} "
                "on a file system every node sees (check --checkpoint-dir)?")
        try:
            self._restore_whole(chosen)
        except Exception as e:  # noqa: BLE001
            raise ResolutionError(f"{said}, and cannot read it ({e}): is {self.directory} "
                                  "on a file system every node sees?") from e
        logger.warning("mpi_resolver: %s, and goes with worker 0", said)

    def _restore_whole(self, prefix: str) -> None:
        """Reads every tensor of ``prefix`` first (a torn checkpoint raises before any
        variable changes), then restores it."""
        reader = tf.train.load_checkpoint(prefix)
        for name in reader.get_variable_to_shape_map():
            reader.get_tensor(name)
        self._checkpoint.restore(prefix).expect_partial()


class Saver:
    """The save TensorFlow's handler calls (its ``save_fn``): the chief into the kept
    checkpoints, another worker into a throw-away copy in its own memory, removed after; a
    failure is noted (``failed``), never raised into the training loop. ``resumed`` is the
    step the run started from, ``newest`` the step of this run's last whole save; ``journal``
    (worker 0's ledger records) is set when the handler is built."""

    def __init__(self, manager: KeepingManager, scratch: Optional[tf.train.CheckpointManager],
                 *, job: Optional[str], settings: Mapping[str, Any],
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.manager, self.scratch = manager, scratch
        self.job, self.settings, self._clock = job, dict(settings), clock
        self.failed: Optional[str] = None
        self.seconds: Optional[float] = None
        self.step = 0
        self.resumed = 0
        self.newest: Optional[int] = None
        self.journal: Optional[Journal] = None
        self._prefix: Optional[str] = None  # the chief's last checkpoint written

    @property
    def advanced(self) -> bool:
        """Returns whether a save of this run moved the newest checkpoint past its start."""
        return self.newest is not None and self.newest > self.resumed

    def __call__(self, *args: Any, **kwargs: Any) -> None:
        start = self._clock()
        self.failed = None
        try:
            self._write(*args, **kwargs)
        except Exception as e:  # noqa: BLE001 - disk full, quota, a peer gone: noted
            self.failed = " ".join(str(e).split())[:300] or type(e).__name__
            log_once(f"the checkpoint at step {self.step} was not saved ({self.failed}); the "
                     "last one that restores is kept")
            return
        self.seconds = self._clock() - start
        self.newest = self.step

    def record(self, kind: str, seconds: Optional[float]) -> None:
        """Records the save just made at ``step`` (one of journal.KINDS) in the job's
        ledger, as it ended: whole, or ``failed``; a user's save_fn's without a name."""
        if self.journal is None:
            return
        if self.failed is not None:
            self.journal.save_failed(self.step, seconds, kind, self.failed)
            return
        ours = self._prefix is not None and self.newest == self.step
        prefix = self._prefix if ours else None
        self.journal.saved(self.step, seconds, kind,
                           os.path.basename(prefix) if prefix else None,
                           checkpoint_bytes(glob.glob(prefix + ".*")) if prefix else None)

    def claim(self, step: int, **more: Any) -> None:
        """Writes the manifest (the chief; this job's from now on, at ``step``, with ``more``
        of its fields) before the first save, so that another job started on the directory
        meanwhile is told."""
        if self.scratch is None:
            write_manifest(os.path.dirname(self.manager.directory.rstrip("/")),
                           {**manifest_for(self.job, step, self.settings), **more})

    def _write(self, *args: Any, **kwargs: Any) -> None:
        if self.scratch is None:  # the chief
            prefix = self.manager.save(*args, **kwargs)
            fsync_checkpoint(prefix, self.manager.directory)
            self._prefix = prefix
            self.claim(self.step)
            return
        self.scratch.save(*args, **kwargs)
        tf.io.gfile.rmtree(os.path.dirname(self.scratch.directory.rstrip("/")))


def scratch_manager(checkpoint: Any, task: int) -> tf.train.CheckpointManager:
    """Returns a non-chief worker's throw-away CheckpointManager: in this process's memory
    (TensorFlow's ram:// file system), so that the collective save every worker must take
    part in writes one copy to the shared directory, the chief's, not one a worker."""
    return tf.train.CheckpointManager(checkpoint, f"ram://mpi_resolver/workertemp_{task}/chief",
                                      max_to_keep=1)


def fsync_checkpoint(prefix: Optional[str], directory: str) -> None:
    """Puts checkpoint ``prefix``'s files, TensorFlow's `checkpoint` state file beside them,
    and ``directory`` itself on disk (fsync), where they are local files: a node lost right
    after a save leaves the save whole, or the one before it."""
    if not prefix or "://" in prefix:
        return
    sync_files([*glob.glob(prefix + ".*"), os.path.join(directory, "checkpoint")])
    sync_directory(directory)


def remove_part(checkpoint_dir: str, chief: bool, task_id: int) -> None:
    """Removes this worker's part of ``checkpoint_dir`` (the chief: ``chief/``; another
    worker: ``workertemp_<task_id>/``, where an older release wrote it), as Keras'
    BackupAndRestore does when training completed. The manifest stays (it says the
    training completed) and so does the ledger."""
    part = "chief" if chief else f"workertemp_{task_id}"
    path = os.path.join(checkpoint_dir, part)
    if tf.io.gfile.exists(path):
        tf.io.gfile.rmtree(path)
