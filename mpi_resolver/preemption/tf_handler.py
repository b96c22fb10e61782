"""TensorFlow's PreemptionCheckpointHandler with periodic saves: after every ``run`` the
schedule says whether every worker saves now, and the chief prints the interval it chose (the
TensorFlow edge; importing this module imports TensorFlow)."""

from __future__ import annotations

from typing import Any, Callable, Optional

import tensorflow as tf

from mpi_resolver.core.logs import log_once
from mpi_resolver.preemption.interval import Every
from mpi_resolver.preemption.schedule import Schedule
from mpi_resolver.preemption.tf_checkpoints import Saver

__all__ = ["SlurmCheckpointHandler"]


class SlurmCheckpointHandler(tf.distribute.experimental.PreemptionCheckpointHandler):
    """PreemptionCheckpointHandler (a signal: one coordinated save, then the exit) that also
    saves every ``every`` (steps, a duration of the chief's clock, or 'auto'), each worker at
    the same step; ``make_schedule(start, every)`` builds the run's schedule at its first
    step. A periodic save that fails is a warning and training goes on."""

    def __init__(self, cluster_resolver: Any, manager: Any, *, termination_config: Any,
                 saver: Saver, every: Optional[Every],
                 make_schedule: Callable[[int, Every], Schedule]) -> None:
        self._saver, self._every, self._make_schedule = saver, every, make_schedule
        self.schedule: Optional[Schedule] = None
        super().__init__(cluster_resolver, manager, termination_config=termination_config)

    def run(self, distributed_train_function: Any, *args: Any, **kwargs: Any) -> Any:
        """Runs one step as TensorFlow's handler does, after the save that is due before it
        (the periodic one, as TensorFlow saves on a signal: at the start of the next step,
        when the training script has counted the last); returns the step's result."""
        done = int(self._run_counter)
        self._saver.step = done
        if self._every is not None:
            self._periodic(done, self._every)
        return super().run(distributed_train_function, *args, **kwargs)

    def _periodic(self, step: int, every: Every) -> None:
        """Saves the state after ``step`` steps where the schedule says so."""
        if self.schedule is None:
            self.schedule = self._make_schedule(step, every)
        if not self.schedule.due(step):
            return
        self._saver.step = step
        self._save_checkpoint()  # TensorFlow's: the run count into the checkpoint, then ours
        plans = len(self.schedule.plans)
        self.schedule.saved(step, self._saver.seconds or 0.0)
        if self.schedule.chief and len(self.schedule.plans) > plans:
            log_once(self.schedule.plans[-1].line(self.schedule.every))
