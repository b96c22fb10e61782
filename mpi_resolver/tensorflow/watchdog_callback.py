"""StepWatchdogCallback: the step watchdog under Keras 2's ``model.fit`` (the TensorFlow edge;
importing this module imports TensorFlow and Keras 2)."""

from __future__ import annotations

from typing import Any

from mpi_resolver.tensorflow.keras_callback import keras2
from mpi_resolver.long_jobs.step_watchdog import StepWatchdog

__all__ = ["StepWatchdogCallback"]


class StepWatchdogCallback(keras2().callbacks.Callback):  # type: ignore[misc]
    """Arms a StepWatchdog for ``fit``'s training: a batch counts as a step, evaluation
    (validation_data) is not watched, and the watchdog is disarmed when ``fit`` returns.

    Args: StepWatchdog's (``factor``, ``minimum``, ``warmup``, ...); the task in the line is
    the strategy's cluster resolver's unless ``resolver`` or ``name`` is given.

    Raises:
      FormatError: a bad setting (StepWatchdog's).
    """

    def __init__(self, factor: object = None, minimum: object = None, **options: Any) -> None:
        super().__init__()
        self.watchdog = StepWatchdog(factor, minimum, **options)

    def on_train_begin(self, logs: Any = None) -> None:
        """Arms the watchdog (the task named from the strategy's resolver)."""
        if self.watchdog.resolver is None:
            strategy = getattr(self.model, "distribute_strategy", None)
            self.watchdog.resolver = getattr(strategy, "cluster_resolver", None)
        self.watchdog.start()

    def on_train_batch_end(self, batch: int, logs: Any = None) -> None:
        """A step ended."""
        self.watchdog.tick()

    def on_test_begin(self, logs: Any = None) -> None:
        """Evaluation is not watched."""
        self.watchdog.pause()

    def on_test_end(self, logs: Any = None) -> None:
        """Training's step clock starts again."""
        self.watchdog.resume()

    def on_train_end(self, logs: Any = None) -> None:
        """Disarms the watchdog."""
        self.watchdog.stop()
