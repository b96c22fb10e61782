"""Keras 3 ``fit`` on JAX as a long job: the model's state (its weights, the optimizer's
moments and step count) restored from a LongJob's newest checkpoint before ``fit``, and a
callback that hands every step to ``LongJob.step_done`` (the periodic saves, the save on
Slurm's signal at one step on every process, the exit code). Importing this module imports
JAX; Keras is imported where a callback is built.
"""

from __future__ import annotations

from typing import Any, Dict

from mpi_resolver.jax.long_jobs import LongJob

__all__ = ["model_state", "restore_model", "keras_callback"]

#: The parts of Keras' state tree a checkpoint holds (the metrics' are rebuilt by fit).
_PARTS = ("trainable_variables", "non_trainable_variables", "optimizer_variables")


def model_state(model: Any) -> Dict[str, Any]:
    """Returns ``model``'s weights and its optimizer's variables (Keras' state tree), the
    values fit holds brought back into the variables first."""
    sync = getattr(model, "jax_state_sync", None)
    if sync is not None:
        sync()
    tree = model.get_state_tree()
    return {part: tree[part] for part in _PARTS if part in tree}


def restore_model(job: LongJob, model: Any) -> int:
    """Restores ``model`` (compiled) from ``job``'s newest checkpoint that reads whole, its
    optimizer's state included; returns the step to go on from (0: nothing restored).

    Raises:
      ResolutionError: as LongJob.restore (the checkpoint does not fit this model, ...).
    """
    optimizer = getattr(model, "optimizer", None)
    if optimizer is not None and not optimizer.built:
        optimizer.build(model.trainable_variables)
    step, tree = job.restore(model_state(model))
    if step:
        model.set_state_tree(tree)
    return step


def keras_callback(job: LongJob, first_step: int = 0) -> Any:
    """Returns a Keras 3 callback for ``fit`` on JAX: after every batch,
    ``job.step_done(step, the model's state)``; ``first_step``: the step fit resumes at
    (restore_model's). At the signal's step it raises SystemExit with the exit code."""
    import keras

    class SlurmJaxCheckpoints(keras.callbacks.Callback):
        def __init__(self) -> None:
            super().__init__()
            self.step = first_step

        def on_train_batch_end(self, batch: int, logs: Any = None) -> None:
            self.step += 1
            job.step_done(self.step, lambda: model_state(self.model))

    return SlurmJaxCheckpoints()
