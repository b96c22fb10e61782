"""Long jobs on JAX: Slurm's warning signal (or SIGTERM) noted by the package's flag-only
handlers, every process stopping and saving at the same step, process 0 requeueing the job
once every process has saved, one exit code for all (75: run again; 143: the job ends), as
SlurmTerminationConfig does for TensorFlow (preemption.termination decides; this is its JAX
edge).

- ``JaxTermination.should_stop()`` (every N steps, on every process, same count): True on
  every process at the same step once any process got a watched signal (one all-gather of a
  flag through JAX's collectives).
- ``JaxTermination.finish(step)``: after the save; the meeting point is JAX's coordination
  service (its key-value store and barriers): returns (exit code, what happened).
- ``keras_callback(termination, save)``: the same for Keras 3's ``fit`` on JAX: at the agreed
  step, ``save(step)`` on every process, then ``SystemExit(code)``.

Importing this module imports JAX (and Keras where keras_callback is called).
"""

from __future__ import annotations

import contextlib
import os
from typing import Any, Callable, Optional, Tuple

import jax
import numpy as np

from mpi_resolver.core.errors import ResolutionError
from mpi_resolver.preemption.signals import SIGTERM, WarningSignal, grace_seconds, parse_signal
from mpi_resolver.preemption.termination import _EVENT, _EXIT, _SAVED, Policy, Termination
from mpi_resolver.preemption.watcher import SignalWatcher

__all__ = ["JaxCoordinator", "JaxTermination", "keras_callback"]


def _client() -> Any:
    """Returns JAX's distributed runtime client (None where JAX runs alone)."""
    from jax._src import distributed

    return distributed.global_state.client


class JaxCoordinator:
    """preemption.termination.Coordinator over JAX's coordination service (key-value store,
    barriers); alone (one process) it answers at once."""

    def __init__(self) -> None:
        self.client = _client() if jax.process_count() > 1 else None
        self.chief = jax.process_index() == 0

    def announce(self, event: str) -> None:
        if self.client is not None:
            with contextlib.suppress(Exception):  # already set: another process was first
                self.client.key_value_set(_EVENT, event)

    def event(self, seconds: float) -> Optional[str]:
        return self._get(_EVENT, seconds)

    def barrier(self, seconds: float, tag: str = "") -> bool:
        if self.client is None:
            return True
        try:
            self.client.wait_at_barrier(_SAVED + tag, int(seconds * 1000))
            return True
        except Exception:  # noqa: BLE001 - JAX's timeout: not every process saved in time
            return False

    def publish(self, text: str, tag: str = "") -> None:
        if self.client is not None:
            with contextlib.suppress(Exception):
                self.client.key_value_set(_EXIT + tag, text)

    def read(self, seconds: float, tag: str = "") -> Optional[str]:
        return self._get(_EXIT + tag, seconds)

    def _get(self, key: str, seconds: float) -> Optional[str]:
        if self.client is None:
            return None
        try:
            value = self.client.blocking_key_value_get(key, int(seconds * 1000))
        except Exception:  # noqa: BLE001 - not set within the time
            return None
        return value.decode() if isinstance(value, bytes) else value


class JaxTermination:
    """Slurm's signal to a coordinated save and exit, for JAX processes (after
    mpi_resolver.jax.initialize). Arguments as SlurmTerminationConfig's: ``signal`` (any
    name --signal takes, e.g. 'USR1' or 'USR1@120'), ``grace_period`` (seconds from the
    signal to Slurm's kill), ``requeue``, ``requeue_on_time_limit``; ``check_every`` steps
    between agreements (each is one small collective).

    Raises:
      FormatError, ResolutionError: a bad argument, naming it.
    """

    def __init__(self, signal: Any = "USR1", grace_period: Any = None, *, requeue: bool = True,
                 requeue_on_time_limit: bool = False, check_every: int = 1) -> None:
        if isinstance(check_every, bool) or not isinstance(check_every, int) or \
                check_every < 1:
            raise ResolutionError(f"check_every={check_every!r}: expected a whole number of "
                                  "steps >= 1.")
        warning = parse_signal(signal)
        policy = Policy(warning, grace_seconds(grace_period, warning), bool(requeue),
                        bool(requeue_on_time_limit))
        self.watcher = SignalWatcher([warning, WarningSignal(SIGTERM, "TERM")])
        self.watcher.install()
        self.termination = Termination(policy, self.watcher, dict(os.environ), JaxCoordinator)
        self.check_every, self._calls = check_every, 0

    def should_stop(self) -> bool:
        """Returns True on every process at the same call once a watched signal reached any
        of them (checked every ``check_every`` calls; every process must call it alike)."""
        self._calls += 1
        if self._calls % self.check_every:
            return False
        from jax.experimental import multihost_utils

        mine = np.array([1 if self.termination.watch() else 0], dtype=np.int32)
        return bool(np.asarray(multihost_utils.process_allgather(mine)).max())

    def finish(self, step: Optional[int] = None, failed: Optional[str] = None
               ) -> Tuple[int, str]:
        """Returns (exit code, what happened) after the save at ``step`` (see
        preemption.termination.Termination.finish); puts the signal handlers back."""
        try:
            return self.termination.finish(step, failed)
        finally:
            self.watcher.uninstall()

    def disarm(self) -> None:
        """Puts the signal handlers back (training is over)."""
        self.watcher.uninstall()


def keras_callback(termination: JaxTermination, save: Callable[[int], None],
                   say: Callable[[str], None] = print, first_step: int = 0) -> Any:
    """Returns a Keras 3 callback for ``fit`` on JAX: after every step, the agreement; at the
    agreed step, ``save(step)`` on every process, the coordinated finish, ``say`` of process
    0's line, and SystemExit with the exit code. ``first_step``: the step fit resumes at."""
    import keras

    class SlurmJaxBackup(keras.callbacks.Callback):
        def __init__(self) -> None:
            super().__init__()
            self.step = first_step

        def on_train_batch_end(self, batch: int, logs: Any = None) -> None:
            self.step += 1
            if not termination.should_stop():
                return
            failed = None
            sync = getattr(self.model, "jax_state_sync", None)  # fit's state -> the variables
            if sync is not None:
                sync()
            try:
                save(self.step)
            except Exception as e:  # noqa: BLE001 - said in the line, the job resumes earlier
                failed = f"{type(e).__name__}: {e}"
            code, what = termination.finish(self.step, failed)
            if jax.process_index() == 0:
                say(what)
            raise SystemExit(code)

    return SlurmJaxBackup()
