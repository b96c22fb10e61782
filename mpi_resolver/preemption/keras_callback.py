"""SlurmBackupAndRestore: Keras 2's BackupAndRestore that saves on Slurm's signal under
``model.fit`` (the TensorFlow edge; importing this module imports TensorFlow and Keras 2).

Keras 2's own ``BackupAndRestore(save_before_preemption=True)`` does nothing off Google Cloud
(tf_keras' ``support_on_demand_checkpoint_callback`` is true only there). This one builds
TensorFlow's PreemptionCheckpointHandler itself, with SlurmTerminationConfig, and hands it
to Keras' training state as Google Cloud's would be: ``fit`` then checks for the signal
after every batch, saves one coordinated checkpoint, and resumes at the next batch.
"""

from __future__ import annotations

from typing import Any, Optional

import tensorflow as tf

from mpi_resolver.core.errors import MissingDependencyError
from mpi_resolver.preemption.tf_config import SlurmTerminationConfig

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
    Slurm's warning signal (or SIGTERM) comes, worker 0 requeues the job, and the next run's
    ``fit`` resumes at the batch after it. Create it after the strategy, in the main thread.

    Args:
      backup_dir: the directory every node sees (as BackupAndRestore's).
      termination_config: a SlurmTerminationConfig; default one with the arguments below.
      signal, grace_period, requeue, requeue_on_time_limit: SlurmTerminationConfig's.
      save_freq: also save every N batches, or at every 'epoch' (default False: only on
        the signal).
      delete_checkpoint: remove the backup when ``fit`` completes (as BackupAndRestore).
    """

    def __init__(self, backup_dir: str,
                 termination_config: Optional[SlurmTerminationConfig] = None, *,
                 signal: Any = "USR1", grace_period: Optional[float] = None,
                 requeue: bool = True, requeue_on_time_limit: bool = False,
                 save_freq: Any = False, delete_checkpoint: bool = True) -> None:
        # save_before_preemption=True passes the constructor's check; it is turned off before
        # Keras' training state sees it (its own preemption handler is Google Cloud's).
        super().__init__(backup_dir, save_freq=save_freq, delete_checkpoint=delete_checkpoint,
                         save_before_preemption=True)
        self.save_before_preemption = False
        self.termination_config = termination_config or SlurmTerminationConfig(
            signal=signal, grace_period=grace_period, requeue=requeue,
            requeue_on_time_limit=requeue_on_time_limit)
        self.preemption_handler: Any = None

    def on_train_begin(self, logs: Any = None) -> None:
        """Restores the backup (Keras' training state), then builds the preemption handler
        on the same checkpoint and directory and gives it to the training state."""
        super().on_train_begin(logs)
        state = self._training_state
        manager = state.read_checkpoint_manager  # in backup_dir/chief, as handler() puts it
        resolver = getattr(self.model.distribute_strategy, "cluster_resolver", None)
        self.preemption_handler = self.termination_config.handler(
            resolver, manager.checkpoint, self.backup_dir)
        state.preemption_handler = self.preemption_handler
        state._enable_save_before_preemption = True  # what Google Cloud's check would set
        self.model._preemption_handler = self.preemption_handler

    def on_train_end(self, logs: Any = None) -> None:
        """Removes the backup (as BackupAndRestore does), then puts the signals' handlers
        back: from here on SIGTERM ends the process (evaluation, saving the model)."""
        try:
            super().on_train_end(logs)
        finally:
            self.termination_config.disarm()
