"""SlurmBackupAndRestore: Keras 2's BackupAndRestore that saves on Slurm's signal under
``model.fit`` (the TensorFlow edge; importing this module imports TensorFlow and Keras 2).

Keras 2's own ``BackupAndRestore(save_before_preemption=True)`` does nothing off Google Cloud
(tf_keras' ``support_on_demand_checkpoint_callback`` is true only there). This one builds
TensorFlow's PreemptionCheckpointHandler itself, with SlurmTerminationConfig, and hands it
to Keras' training state as Google Cloud's would be: ``fit`` then checks for the signal
after every batch, saves one coordinated checkpoint, and resumes at the next batch.
"""

from __future__ import annotations

import os
import sys
from typing import Any, Optional

import tensorflow as tf

from mpi_resolver.core.errors import MissingDependencyError
from mpi_resolver.long_jobs.job_settings import checkpoint_dir
from mpi_resolver.tensorflow.termination_config import SlurmTerminationConfig

__all__ = ["SlurmBackupAndRestore", "keras2"]


def keras2() -> Any:
    """Returns Keras 2: tf.keras up to TensorFlow 2.15, the tf_keras package after.

    Raises:
      MissingDependencyError: TensorFlow 2.16 or later without tf_keras.
    """
    major, minor = (int(v) for v in tf.__version__.split(".")[:2])
    if (major, minor) < (2, 16):
        return tf.keras
    try:
        import tf_keras
    except ImportError as e:
        raise MissingDependencyError(
            f"SlurmBackupAndRestore is a Keras 2 callback, for model.fit under "
            f"MultiWorkerMirroredStrategy ({e}): pip install 'tf-keras~={major}.{minor}.0' "
            "and set TF_USE_LEGACY_KERAS=1 before importing TensorFlow.") from e
    return tf_keras


class SlurmBackupAndRestore(keras2().callbacks.BackupAndRestore):  # type: ignore[misc]
    """Keras 2's BackupAndRestore with Slurm's signal: under ``model.fit`` with
    MultiWorkerMirroredStrategy, every worker saves one checkpoint at the same batch when
    Slurm's warning signal (or SIGTERM) comes, the job is requeued (by supervise, or worker
    0), and the next run's ``fit`` resumes at the batch after it; with ``checkpoint_every``,
    also periodically, for the endings nobody announces. The next run resumes from the newest
    checkpoint that reads whole (a torn one skipped with a warning). Create it after the
    strategy, in the main thread.

    Args:
      backup_dir: the directory every node sees (as BackupAndRestore's); not given:
        MPI_RESOLVER_CHECKPOINT_DIR.
      termination_config: a SlurmTerminationConfig; default one with the arguments below.
      signal, grace_period, requeue, requeue_on_time_limit: SlurmTerminationConfig's.
      checkpoint_every, keep, node_mtbf_hours: SlurmTerminationConfig's.
      delete_checkpoint: remove the backup when ``fit`` completes (as BackupAndRestore).
    """

    def __init__(self, backup_dir: Optional[str] = None,
                 termination_config: Optional[SlurmTerminationConfig] = None, *,
                 signal: Any = None, grace_period: Optional[float] = None,
                 requeue: bool = True, requeue_on_time_limit: bool = False,
                 checkpoint_every: Any = None, keep: Optional[int] = None,
                 node_mtbf_hours: Optional[float] = None,
                 delete_checkpoint: bool = True) -> None:
        backup_dir = checkpoint_dir(backup_dir, os.environ, "backup_dir")
        # save_before_preemption=True passes the constructor's check; Keras' own preemption
        # handler (Google Cloud's) is never built: on_train_begin builds the training state.
        super().__init__(backup_dir, save_freq=False, delete_checkpoint=delete_checkpoint,
                         save_before_preemption=True)
        self.save_before_preemption = False
        self.termination_config = termination_config or SlurmTerminationConfig(
            signal=signal, grace_period=grace_period, requeue=requeue,
            requeue_on_time_limit=requeue_on_time_limit, checkpoint_every=checkpoint_every,
            keep=keep, node_mtbf_hours=node_mtbf_hours)
        self.preemption_handler: Any = None

    def on_train_begin(self, logs: Any = None) -> None:
        """Builds Keras' training state (the optimizer first, as Keras does) without its
        restore, then the preemption handler on the same checkpoint, which restores the newest
        checkpoint that reads whole and saves the last ``keep`` where Keras' state looks."""
        model = self.model
        optimizer: Any = getattr(model, "optimizer", None)
        if model.built and callable(getattr(optimizer, "build", None)) and \
                not getattr(optimizer, "_built", False):
            optimizer.build(model.trainable_variables)
        module = sys.modules[keras2().callbacks.BackupAndRestore.__module__]
        state = module.worker_training_state.WorkerTrainingState(model, self.backup_dir,
                                                                 False, False)
        model._training_state = self._training_state = state
        resolver = getattr(model.distribute_strategy, "cluster_resolver", None)
        self.preemption_handler = self.termination_config.handler(
            resolver, state.read_checkpoint_manager.checkpoint, self.backup_dir)
        saver = self.termination_config.saver
        assert saver is not None  # handler() made it
        kept = saver.manager
        if state.write_checkpoint_manager is state.read_checkpoint_manager:  # the chief
            state.write_checkpoint_manager = kept
        state.read_checkpoint_manager = kept
        state.preemption_handler = self.preemption_handler
        state._enable_save_before_preemption = True  # what Google Cloud's check would set
        model._preemption_handler = self.preemption_handler

    def on_train_end(self, logs: Any = None) -> None:
        """Completes the training on every worker (SlurmTerminationConfig.complete: the
        final step saved, every worker's end, the manifest's "completed"), then removes the
        backup where ``delete_checkpoint`` (as BackupAndRestore does; the manifest stays,
        saying the training completed) and puts the signals' handlers back: from here on
        SIGTERM ends the process (evaluation, saving the model)."""
        try:
            self.termination_config.complete(remove=bool(self.delete_checkpoint))
        finally:
            self.model._training_state = None
            self._training_state = None
