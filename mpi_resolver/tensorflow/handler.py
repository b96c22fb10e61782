"""TensorFlow's PreemptionCheckpointHandler with periodic saves and no polling delay: where it
checks for a save (at the start of every ``run`` of a custom loop, after every batch of
Keras 2's ``fit``), a signal that came is claimed at once (TensorFlow's own thread looks once
a second) and the schedule says whether every worker saves now; the chief prints the interval
it chose (the TensorFlow edge; importing this module imports TensorFlow)."""

from __future__ import annotations

from typing import Any, Callable, Optional

import tensorflow as tf

from mpi_resolver.core.logs import log_once
from mpi_resolver.long_jobs.interval import Every
from mpi_resolver.long_jobs.schedule import Schedule
from mpi_resolver.long_jobs.slow_ranks import SlowRanks
from mpi_resolver.long_jobs.step_watchdog import paused_watchdogs
from mpi_resolver.tensorflow.saver import Saver

__all__ = ["SlurmCheckpointHandler"]


class SlurmCheckpointHandler(tf.distribute.experimental.PreemptionCheckpointHandler):
    """PreemptionCheckpointHandler (a signal: one coordinated save, then the exit) that also
    saves every ``every`` (steps, a duration of the chief's clock, or 'auto'), each worker at
    the same step; ``make_schedule(start, every)`` builds the run's schedule at its first
    check. A periodic save that fails is a warning and training goes on."""

    def __init__(self, cluster_resolver: Any, manager: Any, *, termination_config: Any,
                 saver: Saver, every: Optional[Every],
                 make_schedule: Callable[[int, Every], Schedule]) -> None:
        self._saver, self._every, self._make_schedule = saver, every, make_schedule
        self.schedule: Optional[Schedule] = None
        self.slow: Optional[SlowRanks] = None  # handler_setup.build sets the run's rounds
        self._claimed = False
        super().__init__(cluster_resolver, manager, termination_config=termination_config)

    def run(self, distributed_train_function: Any, *args: Any, **kwargs: Any) -> Any:
        """TensorFlow's run; where the step fails (a peer lost), the step reached goes to
        the job's progress file first (the steps the failure loses, exact)."""
        try:
            return super().run(distributed_train_function, *args, **kwargs)
        except BaseException:
            if self._saver.journal is not None:
                self._saver.journal.flush()
            raise

    def _check_preemption_and_maybe_checkpoint(self, *args: Any, **kwargs: Any) -> None:
        """TensorFlow's check (the signal's save, then the exit), after the periodic save
        that is due with the state of ``_run_counter`` steps, and after claiming a signal
        that came since the last check, and after the slow-rank round that is due; the step
        watchdog does not watch the saves."""
        done = int(self._run_counter)
        self._saver.step = done
        self._saver.collect()  # a background write that ended: recorded
        if self._saver.journal is not None:
            self._saver.journal.progress(done)
        if self.slow is not None:
            self.slow.step_done(done)
        if self._every is not None:
            self._periodic(done, self._every)
        if not self._claimed and self._termination_watcher_fn():
            self._claimed = True
            if not self._received_own_sigterm.is_set():
                self._maybe_set_received_own_sigterm()
        with paused_watchdogs():  # the signal's save, where it comes now, and the exit
            super()._check_preemption_and_maybe_checkpoint(*args, **kwargs)

    def _periodic(self, step: int, every: Every) -> None:
        """Saves the state after ``step`` steps where the schedule says so; the schedule
        learns the whole save's time as TensorFlow measured it (a user's save_fn's too), or
        that it failed."""
        if self.schedule is None:
            self.schedule = self._make_schedule(step, every)
            self._saver.on_written = self.schedule.written  # a background write's outcome
        if not self.schedule.due(step) or self._received_checkpoint_step.is_set():
            return  # not due, or the signal's save comes now or next: one save is enough
        self._saver.deferred = True  # written in the background, where the saver can
        try:
            with paused_watchdogs():
                self._save_checkpoint()  # TensorFlow's: the run count into it, then ours
        finally:
            self._saver.deferred = False
        plans = len(self.schedule.plans)
        took = float(getattr(self, "_checkpoint_time", 0.0) or 0.0)
        self._saver.record("periodic", took)
        if self._saver.failed is not None:
            self.schedule.failed(step, took)
        else:
            writes = self._saver.writes
            self.schedule.saved(step, took, writes.last_seconds if writes else None,
                                pending=writes is not None and writes.pending)
        if self.schedule.chief and len(self.schedule.plans) > plans:
            log_once(self.schedule.plans[-1].line(self.schedule.every))
