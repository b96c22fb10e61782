"""A long job's checkpoints in TensorFlow: the last K kept, the newest that restores read back
(a torn one skipped, every worker on the same one), on disk before the save returns (its files
and TensorFlow's `checkpoint` state file fsynced), a save's state read at once and written
later (in the background: tensorflow/saver); the other workers' part of the save
(TensorFlow's collective save needs every worker) goes to their own memory, never to the
shared directory (the TensorFlow edge; importing this module imports TensorFlow)."""

from __future__ import annotations

import glob
import os
import time
from typing import Any, Callable, List, Optional

import tensorflow as tf

from mpi_resolver.core.errors import ResolutionError
from mpi_resolver.core.logs import log_each, log_once, logger
from mpi_resolver.long_jobs.durable import sync_directory, sync_files
from mpi_resolver.long_jobs.resume import restore_newest
from mpi_resolver.tensorflow import snapshot as snapshots

__all__ = ["KeepingManager", "remove_part", "scratch_manager", "fsync_checkpoint"]

#: ``agree(prefix)``: the chief's restored checkpoint (prefix or '' for none) on every worker.
AgreeOn = Callable[[str], str]


class KeepingManager(tf.train.CheckpointManager):
    """A CheckpointManager that keeps the last ``keep`` checkpoints and, when asked to
    restore, restores the newest one that reads whole: a torn one (its data cut short, its
    index gone) is skipped with one warning naming it, and every worker ends on the chief's
    choice (``agree``); with a node-local ``tier`` (tensorflow.tier.TfTier), its newest step
    where it is the newest whole across the tiers."""

    def __init__(self, checkpoint: Any, directory: str, keep: int, *, chief: bool,
                 agree: AgreeOn, tier: Any = None) -> None:
        super().__init__(checkpoint, directory, max_to_keep=keep)
        self.chief, self._agree, self.tier = chief, agree, tier
        self.restored: Optional[str] = None
        self.from_tier = False  # whether restored is the node-local tier's step
        self.skipped: List[str] = []  # the warnings of the torn checkpoints passed over
        self._buffers = snapshots.HostBuffers()  # the snapshots' copies (empty until used)

    def restore_or_initialize(self) -> Optional[str]:
        """Returns the prefix restored, None where none restores (step 0).

        Raises:
          ResolutionError: this worker cannot read the checkpoint the chief restored.
        """
        if self.tier is not None:  # its newest step, where newer than this directory's
            found = self.tier.restore(lambda: list(self.checkpoints))
            if found is not None:
                step, where = found
                if self.chief:
                    log_once(f"restored step {step} from the node-local tier ({where}); the "
                             f"newest in {self.directory}: {self.latest_checkpoint or 'none'}")
                self.restored, self.skipped = f"{step} (node-local: {where})", []
                self.from_tier = True
                return self.restored
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

    def snapshot(self, copy: bool = True) -> snapshots.Snapshot:
        """Returns the state now, numbered as ``save`` numbers it (the checkpoint's
        save_counter, counted in it), for ``write_snapshot``: its large host tensors copied
        into buffers this manager keeps (snapshot.HostBuffers) where ``copy``, else held (a
        worker that writes nothing)."""
        counter = self._checkpoint.save_counter
        counter.assign_add(1)
        return snapshots.take(self._checkpoint, f"{self._prefix}-{int(counter.numpy())}",
                              self._buffers if copy else None)

    def write_snapshot(self, snap: snapshots.Snapshot) -> str:
        """Writes ``snap`` (from any thread; one at a time) as ``save`` does, and returns its
        prefix: its files on disk first, then TensorFlow's `checkpoint` state file naming
        it (``remove_oldest`` next)."""
        prefix = snapshots.write(snap)
        fsync_checkpoint(prefix, self.directory, state=False)
        self._maybe_delete.pop(prefix, None)  # CheckpointManager.save's bookkeeping
        self._maybe_delete[prefix] = time.time()
        self._latest_checkpoint = prefix
        self._record_state()
        self._sync_state()
        return prefix

    def remove_oldest(self) -> None:
        """Removes the checkpoints beyond ``keep`` after a write_snapshot (in its thread),
        and names those left in TensorFlow's `checkpoint` state file, on disk."""
        self._sweep()
        self._record_state()
        self._sync_state()

    def _sync_state(self) -> None:
        """Puts TensorFlow's `checkpoint` state file and the directory on disk (the
        checkpoint's own files are already)."""
        if "://" not in self.directory:
            sync_files([os.path.join(self.directory, "checkpoint")])
            sync_directory(self.directory)

    def _restore_whole(self, prefix: str) -> None:
        """Reads every tensor of ``prefix`` first (a torn checkpoint raises before any
        variable changes), then restores it."""
        reader = tf.train.load_checkpoint(prefix)
        for name in reader.get_variable_to_shape_map():
            reader.get_tensor(name)
        self._checkpoint.restore(prefix).expect_partial()


def scratch_manager(checkpoint: Any, task: int) -> tf.train.CheckpointManager:
    """Returns a non-chief worker's throw-away CheckpointManager: in this process's memory
    (TensorFlow's ram:// file system), so that the collective save every worker must take
    part in writes one copy to the shared directory, the chief's, not one a worker."""
    return tf.train.CheckpointManager(checkpoint, f"ram://mpi_resolver/workertemp_{task}/chief",
                                      max_to_keep=1)


def fsync_checkpoint(prefix: Optional[str], directory: str, state: bool = True) -> None:
    """Puts checkpoint ``prefix``'s files, TensorFlow's `checkpoint` state file beside them
    (where ``state``), and ``directory`` itself on disk (fsync), where they are local files:
    a node lost right after a save leaves the save whole, or the one before it."""
    if not prefix or "://" in prefix:
        return
    state_file = [os.path.join(directory, "checkpoint")] if state else []
    sync_files([*glob.glob(prefix + ".*"), *state_file])
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
