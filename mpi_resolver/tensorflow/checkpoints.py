"""A long job's checkpoints in TensorFlow: the last K kept, the newest that restores read back
(a torn one skipped, every worker on the same one), and the save that never raises into the
training loop (the TensorFlow edge; importing this module imports TensorFlow)."""

from __future__ import annotations

import os
import shutil
import time
from typing import Any, Callable, Mapping, Optional

import tensorflow as tf

from mpi_resolver.core.errors import ResolutionError
from mpi_resolver.core.logs import log_each, log_once, logger
from mpi_resolver.long_jobs.manifest import manifest_for, remove_manifest, write_manifest
from mpi_resolver.long_jobs.resume import restore_newest

__all__ = ["KeepingManager", "Saver", "remove_part"]

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
        self.restored = chosen
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
    checkpoints, another worker into a throw-away directory removed after; a failure is
    noted (``failed``), never raised into the training loop."""

    def __init__(self, manager: KeepingManager, scratch: Optional[tf.train.CheckpointManager],
                 *, job: Optional[str], settings: Mapping[str, Any],
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.manager, self.scratch = manager, scratch
        self.job, self.settings, self._clock = job, dict(settings), clock
        self.failed: Optional[str] = None
        self.seconds: Optional[float] = None
        self.step = 0

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

    def claim(self, step: int) -> None:
        """Writes the manifest (the chief; this job's from now on, at ``step``) before the
        first save, so that another job started on the directory meanwhile is told."""
        if self.scratch is None:
            write_manifest(os.path.dirname(self.manager.directory.rstrip("/")),
                           manifest_for(self.job, step, self.settings))

    def _write(self, *args: Any, **kwargs: Any) -> None:
        if self.scratch is None:  # the chief
            self.manager.save(*args, **kwargs)
            self.claim(self.step)
            return
        self.scratch.save(*args, **kwargs)
        shutil.rmtree(os.path.dirname(self.scratch.directory), ignore_errors=True)


def remove_part(checkpoint_dir: str, chief: bool, task_id: int) -> None:
    """Removes this worker's part of ``checkpoint_dir`` (the chief: ``chief/`` and the
    manifest; another worker: ``workertemp_<task_id>/``), as Keras' BackupAndRestore does when
    training completed."""
    part = "chief" if chief else f"workertemp_{task_id}"
    path = os.path.join(checkpoint_dir, part)
    if tf.io.gfile.exists(path):
        tf.io.gfile.rmtree(path)
    if chief:
        remove_manifest(checkpoint_dir)
