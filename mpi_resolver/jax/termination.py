"""Slurm's warning signal (or SIGTERM) to a stop at one step on every JAX process, and the
exit after the save: the package's flag-only handlers and exit rules
(long_jobs.termination decides: 75 run again, 143 stop; process 0 requeues, or supervise
does), with JAX's collectives for the agreement and JAX's coordination service as the meeting
point (.coordinator). Importing this module imports JAX.
"""

from __future__ import annotations

import contextlib
import os
from typing import Any, Optional, Tuple

import numpy as np

from mpi_resolver.jax.coordinator import JaxCoordinator
from mpi_resolver.long_jobs.job_settings import check_every_steps, long_job_settings
from mpi_resolver.long_jobs.signals import SIGTERM, WarningSignal, parse_signal
from mpi_resolver.long_jobs.termination import Policy, Termination
from mpi_resolver.long_jobs.watcher import SignalWatcher

__all__ = ["JaxTermination", "disconnect"]


class JaxTermination:
    """Slurm's signal to a coordinated stop, for JAX processes (after
    mpi_resolver.jax.initialize; created in the main thread). Arguments as
    SlurmTerminationConfig's: ``signal`` (any name --signal takes, 'USR1' or 'USR1@120';
    not given: MPI_RESOLVER_SIGNAL, else USR1), ``grace_period`` (seconds from the signal to
    Slurm's kill), ``requeue``, ``requeue_on_time_limit``; ``check_every`` steps between
    agreements (each is one small collective).

    Raises:
      FormatError, ResolutionError: a bad argument or variable, naming it; not created in the
        main thread.
    """

    def __init__(self, signal: Any = None, grace_period: Any = None, *, requeue: bool = True,
                 requeue_on_time_limit: bool = False, check_every: int = 1) -> None:
        check_every = check_every_steps(check_every)
        given = long_job_settings(signal=signal, grace_period=grace_period)
        warning = parse_signal(given.signal)
        policy = Policy(warning, given.grace_period, bool(requeue),
                        bool(requeue_on_time_limit))
        self.watcher = SignalWatcher([warning, WarningSignal(SIGTERM, "TERM")])
        self.watcher.install()
        self.termination = Termination(policy, self.watcher, dict(os.environ), JaxCoordinator)
        self.check_every, self._calls = check_every, 0

    @property
    def policy(self) -> Policy:
        """Returns the signal, grace period and requeue choices."""
        return self.termination.policy

    @property
    def coordinator(self) -> JaxCoordinator:
        """Returns the processes' meeting point (built on first use)."""
        coord = self.termination.coordinator()
        assert isinstance(coord, JaxCoordinator)  # what this class makes
        return coord

    def should_stop(self) -> bool:
        """Returns True on every process at the same call once a watched signal reached any
        of them (checked every ``check_every`` calls; every process must call it alike)."""
        self._calls += 1
        if self._calls % self.check_every:
            return False
        from jax.experimental import multihost_utils

        mine = np.array([1 if self.termination.watch() else 0], dtype=np.int32)
        return bool(np.asarray(multihost_utils.process_allgather(mine)).max())

    def finish(self, step: Optional[int] = None, failed: Optional[str] = None,
               advanced: bool = True) -> Tuple[int, str]:
        """Returns (exit code, what happened) after the save at ``step`` (see
        long_jobs.termination.Termination.finish). From then on the watched signals are
        ignored: more come (the requeue's SIGTERM), and the process must end with the code."""
        try:
            return self.termination.finish(step, failed, advanced)
        finally:
            self.watcher.ignore()

    def disarm(self) -> None:
        """Puts the signals' previous handlers back (training is over)."""
        self.watcher.uninstall()


def disconnect() -> None:
    """Leaves JAX's coordination service with every other process (``jax.distributed.
    shutdown``: a barrier, then process 0 stops the service last). Measured: where process 0
    ended first, another process still running JAX aborted with a native trace (its heartbeat
    to the service failed); never raises (the exit comes anyway: process_end)."""
    import jax

    with contextlib.suppress(Exception):
        jax.distributed.shutdown()
