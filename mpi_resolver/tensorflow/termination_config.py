"""SlurmTerminationConfig: TensorFlow's TerminationConfig for Slurm, and the coordination
service as the workers' meeting point after the save (the TensorFlow edge; importing this
module imports TensorFlow)."""

from __future__ import annotations

import os
import sys
from typing import Any, Dict, Optional, Union

import tensorflow as tf
from tensorflow.python.eager import context

from mpi_resolver.core.errors import ResolutionError
from mpi_resolver.core.logs import log_once, logger
from mpi_resolver.long_jobs.interval import job_mtbf, parse_every, parse_keep
from mpi_resolver.long_jobs.job_settings import checkpoint_dir as job_checkpoint_dir
from mpi_resolver.long_jobs.job_settings import job_settings
from mpi_resolver.long_jobs.manifest import settings_of
from mpi_resolver.long_jobs.journal import planned_steps
from mpi_resolver.long_jobs.process_end import (EXIT_WITHIN, end_with,
                                                exit_on_configuration_error, settings_checked)
from mpi_resolver.long_jobs.signals import SIGTERM, WarningSignal, grace_seconds, parse_signal
from mpi_resolver.long_jobs.step_watchdog import paused_watchdogs
from mpi_resolver.long_jobs.tier_settings import tier_settings
from mpi_resolver.long_jobs.termination import (REQUEUE_EXIT_CODE, TERMINATED_EXIT_CODE, Policy,
                                                Termination)
from mpi_resolver.long_jobs.watcher import SignalWatcher
from mpi_resolver.tensorflow.saver import Saver
from mpi_resolver.tensorflow.coordinator import TfCoordinator
from mpi_resolver.tensorflow.handler_setup import build, complete, is_chief, worker_place

__all__ = ["SlurmTerminationConfig", "TfCoordinator"]


class SlurmTerminationConfig(tf.distribute.experimental.TerminationConfig):
    """TensorFlow's TerminationConfig for Slurm: PreemptionCheckpointHandler saves one
    coordinated checkpoint when Slurm's warning signal or SIGTERM comes; then worker 0
    requeues the job (``scontrol requeue``) once every worker has saved, and every worker
    exits with REQUEUE_EXIT_CODE (75), or TERMINATED_EXIT_CODE (143) where SIGTERM ends the
    job. With ``checkpoint_every``, ``handler()``'s handler also saves periodically, for the
    endings nobody announces. Create it after the strategy, in the main thread: its signal
    handlers only note that a signal came; the save happens at the next step. ``disarm()``
    once training is over puts the signals' previous handlers back. Where the script does
    not pass ``signal``, ``checkpoint_every``, ``keep``, ``node_mtbf_hours`` or
    ``checkpoint_async``, the batch script's MPI_RESOLVER_SIGNAL, _CHECKPOINT_EVERY, _KEEP,
    _NODE_MTBF_HOURS or _CHECKPOINT_ASYNC gives it
    (docs/api.md), else the default.

    Args:
      cluster_resolver: the job's resolver (which worker requeues); the handler's where
        ``handler()`` builds it. None: Slurm's task 0.
      signal: the warning signal, as ``#SBATCH --signal`` names it: 'USR1' (default),
        'USR2', 'URG', a number, and '@SECONDS' for the grace period ('USR1@120').
      grace_period: seconds between the warning signal and the end (``--signal``'s
        @SECONDS; Slurm does not tell the job). Bounds the workers' waits after the save,
        and a save that leaves too little of it is a warning with both numbers.
        TensorFlow's own grace_period stays 0: the checkpoint is saved at once.
      requeue: worker 0 requeues the job after the save on the warning signal.
      requeue_on_time_limit: also after the save on the time limit's SIGTERM (never after
        scancel, nor after Slurm's own requeue or preemption).
      save_fn: as TensorFlow's (how to save; default: the handler's checkpoints).
      total_steps: the steps the training plans, for ``mpi-resolver status``'s expected end
        (the job's ledger keeps it); None: not said.
      checkpoint_every: also save every N steps (an int or '100'), every duration of the
        chief's clock ('90s', '10m', '2h'), or 'auto' (Young's interval from the first
        save's time and the job's failure rate); None (default): on the signal only.
      keep: checkpoints kept (default 2: a torn newest one leaves one to resume from).
      node_mtbf_hours: a node's mean time between failures, for 'auto' (default
        interval.DEFAULT_NODE_MTBF_HOURS, from Meta's Llama 3 report).
      checkpoint_async: the periodic saves pay only the snapshot of the state (its
        tensors read), and the write runs in the background; the signal's save and the
        final one wait for it, then write at once (default True; False: every save at once;
        a state TensorFlow cannot read ahead is saved at once, said once).
      local_dir: a node-local directory (else MPI_RESOLVER_LOCAL_DIR; '%N' names the node,
        '%n' its index, '%j' the job, '%u' the user) where the periodic saves go, each
        worker's copy of the state also kept by its partner on the next node; every
        ``shared_every``-th save (else MPI_RESOLVER_SHARED_EVERY, default 10) goes to the
        checkpoint directory too; a restore takes the newest step whole across the tiers.
        None: the checkpoint directory alone.

    Raises:
      FormatError: a signal that Slurm's --signal does not take or that cannot be watched;
        a checkpoint_every, keep, node_mtbf_hours or checkpoint_async not of the forms above;
        total_steps not a whole number > 0; a local_dir that is not an absolute path or has
        a pattern it does not take, a shared_every that is not a whole number >= 1.
      ResolutionError: not created in the main thread.
    """

    REQUEUE_EXIT_CODE = REQUEUE_EXIT_CODE
    TERMINATED_EXIT_CODE = TERMINATED_EXIT_CODE

    def __init__(self, cluster_resolver: Any = None,
                 signal: Union[str, int, None] = None,
                 grace_period: Optional[float] = None, *, requeue: bool = True,
                 requeue_on_time_limit: bool = False, save_fn: Any = None,
                 checkpoint_every: Union[str, int, None] = None, keep: Optional[int] = None,
                 node_mtbf_hours: Optional[float] = None,
                 total_steps: Optional[int] = None,
                 checkpoint_async: Optional[bool] = None, local_dir: Optional[str] = None,
                 shared_every: Optional[int] = None) -> None:
        exit_on_configuration_error()  # a refused setting ends the process with 78
        with settings_checked():  # an argument's too
            self.total_steps = planned_steps(total_steps)
            given = job_settings(os.environ, signal=signal, checkpoint_every=checkpoint_every,
                                 keep=keep, node_mtbf_hours=node_mtbf_hours,
                                 checkpoint_async=checkpoint_async)
            warning = parse_signal(given.signal)
            grace = grace_seconds(grace_period, warning)
            self.every = parse_every(given.checkpoint_every)
            self.keep = parse_keep(given.keep)
            job_mtbf(1, given.node_mtbf_hours)  # its check
            self.tiers = tier_settings(os.environ, local_dir, shared_every)
        self.node_mtbf_hours = given.node_mtbf_hours
        self.checkpoint_async = given.checkpoint_async
        self.cluster_resolver = cluster_resolver
        self.saver: Optional[Saver] = None
        self._built: Optional[tuple] = None  # (handler, directory, task id) once handler() ran
        self._user_save_fn = save_fn
        self.watcher = SignalWatcher([warning, WarningSignal(SIGTERM, "TERM")])
        self.watcher.install()
        self.termination = Termination(
            Policy(warning, grace, bool(requeue), bool(requeue_on_time_limit)), self.watcher,
            dict(os.environ), self._coordinator)
        super().__init__(termination_watcher_fn=self.termination.watch, exit_fn=self._exit,
                         grace_period=0, save_fn=save_fn)

    @property
    def policy(self) -> Policy:
        """Returns the signal, grace period and requeue choices."""
        return self.termination.policy

    def _coordinator(self) -> TfCoordinator:
        """Returns the workers' meeting point: TensorFlow's coordination service where the
        strategy started one, except with a 'ps' job (ParameterServerStrategy: the chief
        alone saves and decides, and the other tasks do not take part)."""
        resolver = self.cluster_resolver
        ps = resolver is not None and "ps" in resolver.cluster_spec().jobs
        multi = context.context().coordination_service is not None and not ps
        return TfCoordinator(is_chief(resolver, os.environ), multi, *worker_place(resolver))

    def _exit(self) -> None:
        """After the save: worker 0's decision, its one line, then SystemExit(code), which
        the training script's own except and finally blocks see. From here on the watched
        signals are ignored (more come: the requeue's SIGTERM, srun's copy of it), and the
        process ends with ``code`` within EXIT_WITHIN seconds, skipping at-exit handlers and
        TensorFlow's teardown (measured: seconds, and a hang past KillWait after a requeue)."""
        saver, chief = self.saver, True
        try:
            chief = self.termination.coordinator().chief
            if saver is not None and self._built is not None:
                saver.record("signal", getattr(self._built[0], "_checkpoint_time", None))
            with paused_watchdogs():
                code, what = self.termination.finish(
                    saver.step if saver else None, saver.failed if saver else None,
                    saver.advanced if saver else True)
        except Exception as e:  # noqa: BLE001 - the exit must come whatever went wrong
            code = self.termination.default_code(self.policy.warning.name)
            what = f"the exit after the save went wrong ({type(e).__name__}: {e})"
        if chief:
            logger.warning("mpi_resolver: %s; exit code %d", what, code)
        self.watcher.ignore()
        end_with(code, EXIT_WITHIN)
        sys.exit(code)

    def complete(self, remove: bool = True) -> None:
        """Training is over: every worker calls it after its last step (main thread). The
        final step is saved where the checkpoint directory's newest is older; every worker
        says its training ended, and each node's local directory goes (a node-local tier's);
        then worker 0 records in the manifest that the job's training
        completed, and the checkpoints go where ``remove`` (the manifest, which says so, and
        the ledger stay). A failure after it (the final evaluation, the teardown) trains
        nothing again: supervise ends the job with 0, and a run of this job started again
        ends 0 at once; another job on the directory starts afresh. The signals' handlers
        are put back, so that SIGTERM ends the process again. Without a handler: disarm()
        alone."""
        try:
            if self._built is not None and self.saver is not None:
                handler, directory, task = self._built
                complete(self, handler, directory, task, remove=remove)
        finally:
            self.disarm()

    def remove_checkpoints(self) -> None:
        """complete()'s older name: completes the training, then the checkpoints go.

        Raises:
          ResolutionError: no handler was built (``handler()`` names the directory).
        """
        if self._built is None:
            raise ResolutionError("remove_checkpoints() removes the checkpoints of the "
                                  "directory handler() was given: build the handler first.")
        self.complete()

    def disarm(self) -> None:
        """Puts back the handlers the config replaced, so that SIGTERM ends the process
        again (evaluation, saving the model, the backup's removal); main thread. A signal
        that came while armed is still in ``watcher``."""
        self.watcher.uninstall()

    def take_back_from_tensorflow(self) -> None:
        """Installs the handlers again where TensorFlow's own took them (the strategy takes
        SIGTERM when it is built); main thread."""
        self.watcher.reclaim(lambda d: d.tensorflow)

    def handler(self, cluster_resolver: Any, checkpoint: Any,
                checkpoint_dir: Optional[str] = None) -> Any:
        """Returns TensorFlow's PreemptionCheckpointHandler for ``checkpoint`` (a
        tf.train.Checkpoint) with this config (a SlurmCheckpointHandler: its ``run`` also
        saves periodically where ``checkpoint_every`` asks), which restores the newest
        checkpoint that reads whole when it is built (a torn one skipped with a warning; every
        worker on worker 0's). Its files stay in ``checkpoint_dir`` (a directory every node
        sees): the chief's last ``keep`` checkpoints in ``checkpoint_dir/chief``, as Keras 2's
        BackupAndRestore lays them out, and the manifest (which job wrote them, at which step)
        in ``checkpoint_dir``; the other workers' part of each save (TensorFlow's save is
        collective) stays in their own memory. Not given: MPI_RESOLVER_CHECKPOINT_DIR. Where
        the manifest says this job's training completed, every worker ends with 0 at once.

        Raises:
          FormatError: no directory given and MPI_RESOLVER_CHECKPOINT_DIR not set.
          ConfigurationError: another job that has not ended wrote ``checkpoint_dir``, or it
            cannot be written (uncaught: exit 78).
          ResolutionError: a worker cannot read the checkpoint worker 0 restored.
          SystemExit: this job's training completed already (0).
        """
        checkpoint_dir = job_checkpoint_dir(checkpoint_dir, os.environ, "checkpoint_dir")
        if self.cluster_resolver is None:
            self.cluster_resolver = cluster_resolver
        if not self.watcher.installed:  # disarmed by an earlier fit in this process
            self.watcher.install()
        self.take_back_from_tensorflow()
        handler = build(self, cluster_resolver, checkpoint, checkpoint_dir)
        self._say_schedule(handler)
        self._built = (handler, checkpoint_dir, getattr(cluster_resolver, "task_id", None) or 0)
        return handler

    def use_saver(self, saver: Saver) -> None:
        """Makes ``saver`` the handler's save (TensorFlow's handler takes ``save_fn`` when it
        is built), unless the script gave its own save_fn."""
        self.saver = saver
        self.save_fn = self._user_save_fn or saver

    def coordinator_now(self) -> TfCoordinator:
        """Returns the termination's coordinator (built on first use)."""
        coord = self.termination.coordinator()
        assert isinstance(coord, TfCoordinator)  # what _coordinator makes
        return coord

    def settings(self) -> Dict[str, Any]:
        """Returns the settings the manifest records (supervise reads the requeue choices
        there)."""
        return settings_of(self.every, self.keep, self.checkpoint_async, self.policy)

    def _say_schedule(self, handler: Any) -> None:
        if self.coordinator_now().chief and self.every is not None and \
                self.every.steps is not None:
            log_once(f"periodic checkpoints every {self.every.steps} steps; the last "
                     f"{self.keep} kept")
