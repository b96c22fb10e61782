"""SlurmTerminationConfig: TensorFlow's TerminationConfig for Slurm, and the coordination
service as the workers' meeting point after the save (the TensorFlow edge; importing this
module imports TensorFlow)."""

from __future__ import annotations

import itertools
import os
import sys
from typing import Any, Dict, Mapping, Optional, Union

import tensorflow as tf
from tensorflow.python.distribute import multi_worker_util
from tensorflow.python.eager import context

from mpi_resolver.core.errors import ResolutionError
from mpi_resolver.core.logs import log_once, logger
from mpi_resolver.long_jobs.interval import job_mtbf, parse_every, parse_keep
from mpi_resolver.long_jobs.job_settings import checkpoint_dir as job_checkpoint_dir
from mpi_resolver.long_jobs.job_settings import job_settings
from mpi_resolver.long_jobs.manifest import check_directory_together, this_job
from mpi_resolver.long_jobs.process_end import EXIT_WITHIN, end_with
from mpi_resolver.long_jobs.resume import missing_checkpoint
from mpi_resolver.long_jobs.schedule import Schedule, job_nodes, plan_agreement
from mpi_resolver.tensorflow.coordinator import TfCoordinator
from mpi_resolver.tensorflow.checkpoints import (KeepingManager, Saver,
                                                    remove_part)
from mpi_resolver.tensorflow.quirks import no_gce_probe, quiet_total_run_calls
from mpi_resolver.long_jobs.signals import SIGTERM, WarningSignal, grace_seconds, parse_signal
from mpi_resolver.long_jobs.termination import (REQUEUE_EXIT_CODE, TERMINATED_EXIT_CODE, Policy,
                                                 Termination)
from mpi_resolver.long_jobs.watcher import SignalWatcher

__all__ = ["SlurmTerminationConfig", "TfCoordinator"]


def _chief(resolver: Any, env: Mapping[str, str]) -> bool:
    """Returns True for the worker that requeues: the chief, or worker 0 without one (the
    resolver's task), else rank 0 as Slurm numbers the tasks."""
    if resolver is not None:
        spec = resolver.cluster_spec()
        if spec.jobs and resolver.task_type is not None:
            return multi_worker_util.is_chief(spec, resolver.task_type, resolver.task_id)
    return env.get("SLURM_PROCID", "0").strip() == "0"


class SlurmTerminationConfig(tf.distribute.experimental.TerminationConfig):
    """TensorFlow's TerminationConfig for Slurm: PreemptionCheckpointHandler saves one
    coordinated checkpoint when Slurm's warning signal or SIGTERM comes; then worker 0
    requeues the job (``scontrol requeue``) once every worker has saved, and every worker
    exits with REQUEUE_EXIT_CODE (75), or TERMINATED_EXIT_CODE (143) where SIGTERM ends the
    job. With ``checkpoint_every``, ``handler()``'s handler also saves periodically, for the
    endings nobody announces. Create it after the strategy, in the main thread: its signal
    handlers only note that a signal came; the save happens at the next step. ``disarm()``
    once training is over puts the signals' previous handlers back. Where the script does
    not pass ``signal``, ``checkpoint_every``, ``keep`` or ``node_mtbf_hours``, the batch
    script's MPI_RESOLVER_SIGNAL, _CHECKPOINT_EVERY, _KEEP or _NODE_MTBF_HOURS gives it
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
      checkpoint_every: also save every N steps (an int or '100'), every duration of the
        chief's clock ('90s', '10m', '2h'), or 'auto' (Young's interval from the first
        save's time and the job's failure rate); None (default): on the signal only.
      keep: checkpoints kept (default 2: a torn newest one leaves one to resume from).
      node_mtbf_hours: a node's mean time between failures, for 'auto' (default
        interval.DEFAULT_NODE_MTBF_HOURS, from Meta's Llama 3 report).

    Raises:
      FormatError: a signal that Slurm's --signal does not take or that cannot be watched;
        a checkpoint_every, keep or node_mtbf_hours not of the forms above.
      ResolutionError: not created in the main thread.
    """

    REQUEUE_EXIT_CODE = REQUEUE_EXIT_CODE
    TERMINATED_EXIT_CODE = TERMINATED_EXIT_CODE

    def __init__(self, cluster_resolver: Any = None,
                 signal: Union[str, int, None] = None,
                 grace_period: Optional[float] = None, *, requeue: bool = True,
                 requeue_on_time_limit: bool = False, save_fn: Any = None,
                 checkpoint_every: Union[str, int, None] = None, keep: Optional[int] = None,
                 node_mtbf_hours: Optional[float] = None) -> None:
        given = job_settings(os.environ, signal=signal, checkpoint_every=checkpoint_every,
                             keep=keep, node_mtbf_hours=node_mtbf_hours)
        warning = parse_signal(given.signal)
        grace = grace_seconds(grace_period, warning)
        self.every = parse_every(given.checkpoint_every)
        self.keep = parse_keep(given.keep)
        self.node_mtbf_hours = given.node_mtbf_hours
        job_mtbf(1, given.node_mtbf_hours)  # its check
        self.cluster_resolver = cluster_resolver
        self.saver: Optional[Saver] = None
        self._built: Optional[tuple] = None  # (directory, chief, task id) once handler() ran
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
        return TfCoordinator(_chief(resolver, os.environ), multi)

    def _exit(self) -> None:
        """After the save: worker 0's decision, its one line, then SystemExit(code), which
        the training script's own except and finally blocks see. From here on the watched
        signals are ignored (more come: the requeue's SIGTERM, srun's copy of it), and the
        process ends with ``code`` within EXIT_WITHIN seconds, skipping at-exit handlers and
        TensorFlow's teardown (measured: seconds, and a hang past KillWait after a requeue)."""
        saver, chief = self.saver, True
        try:
            chief = self.termination.coordinator().chief
            code, what = self.termination.finish(
                saver.step if saver else None, saver.failed if saver else None)
        except Exception as e:  # noqa: BLE001 - the exit must come whatever went wrong
            code = self.termination.default_code(self.policy.warning.name)
            what = f"the exit after the save went wrong ({type(e).__name__}: {e})"
        if chief:
            logger.warning("mpi_resolver: %s; exit code %d", what, code)
        self.watcher.ignore()
        end_with(code, EXIT_WITHIN)
        sys.exit(code)

    def remove_checkpoints(self) -> None:
        """Removes this worker's part of the handler's checkpoint directory once training
        completed (the chief: its checkpoints and the manifest; another worker: its scratch
        directory), so that the same command run again starts afresh. Not after an
        interruption: the next run resumes from them.

        Raises:
          ResolutionError: no handler was built (``handler()`` names the directory).
        """
        if self._built is None:
            raise ResolutionError("remove_checkpoints() removes the checkpoints of the "
                                  "directory handler() was given: build the handler first.")
        remove_part(*self._built)

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
        sees): the chief's last ``keep`` checkpoints in ``checkpoint_dir/chief``, the other
        workers' parts (written, then removed, at every save) in
        ``checkpoint_dir/workertemp_<id>``, as Keras 2's BackupAndRestore lays them out, and
        the manifest (which job wrote them, at which step) in ``checkpoint_dir``. Not given:
        MPI_RESOLVER_CHECKPOINT_DIR.

        Raises:
          FormatError: no directory given and MPI_RESOLVER_CHECKPOINT_DIR not set.
          ResolutionError: another job that has not ended wrote ``checkpoint_dir``; a worker
            cannot read the checkpoint worker 0 restored.
        """
        from mpi_resolver.tensorflow.handler import SlurmCheckpointHandler

        checkpoint_dir = job_checkpoint_dir(checkpoint_dir, os.environ, "checkpoint_dir")
        if self.cluster_resolver is None:
            self.cluster_resolver = cluster_resolver
        if not self.watcher.installed:  # disarmed by an earlier fit in this process
            self.watcher.install()
        self.take_back_from_tensorflow()
        chief, job, coord = _chief(cluster_resolver, os.environ), this_job(os.environ), \
            self.coordinator_now()
        key = f"mpi_resolver_{next(_HANDLERS)}"  # every worker builds its handlers in turn
        check_directory_together(coord, key, checkpoint_dir, job)
        directory = chief_directory(checkpoint_dir)
        warning = missing_checkpoint(os.environ, directory, tf.train.latest_checkpoint(directory))
        if warning and chief:  # one line for the job
            log_once(warning)
        manager = KeepingManager(checkpoint, directory, self.keep, chief=chief, agree=lambda p: (
            coord.agree(f"{key}_restored", p, "which checkpoint it restored")))
        self._built = (checkpoint_dir, chief, getattr(cluster_resolver, "task_id", None) or 0)
        self.saver = Saver(manager, None if chief else _scratch(checkpoint, checkpoint_dir,
                                                                cluster_resolver),
                           job=job, settings=self._settings())
        self.save_fn = self._user_save_fn or self.saver
        self._say_schedule(chief)
        quiet_total_run_calls()
        with no_gce_probe():
            handler = SlurmCheckpointHandler(
                cluster_resolver, manager, termination_config=self, saver=self.saver,
                every=self.every, make_schedule=lambda start, every: Schedule(
                    every, start, chief=coord.chief, agree=plan_agreement(coord, key),
                    nodes=_nodes(cluster_resolver), node_mtbf_hours=self.node_mtbf_hours))
        self.saver.claim(int(handler._run_counter))  # the directory is this job's from now
        return handler

    def coordinator_now(self) -> TfCoordinator:
        """Returns the termination's coordinator (built on first use)."""
        coord = self.termination.coordinator()
        assert isinstance(coord, TfCoordinator)  # what _coordinator makes
        return coord

    def _settings(self) -> Dict[str, Any]:
        return {"checkpoint_every": self.every.describe() if self.every else None,
                "keep": self.keep, "signal": self.policy.warning.name}

    def _say_schedule(self, chief: bool) -> None:
        if chief and self.every is not None and self.every.steps is not None:
            log_once(f"periodic checkpoints every {self.every.steps} steps; the last "
                     f"{self.keep} kept")


#: Numbers the handlers this process builds (a second fit): each has its own keys.
_HANDLERS = itertools.count()


def _scratch(checkpoint: Any, checkpoint_dir: str, resolver: Any) -> Any:
    """Returns a non-chief worker's throw-away CheckpointManager (workertemp_<id>)."""
    task = getattr(resolver, "task_id", None) or 0
    where = os.path.join(checkpoint_dir, f"workertemp_{task}", "chief")
    return tf.train.CheckpointManager(checkpoint, where, max_to_keep=1)


def _nodes(resolver: Any) -> int:
    """Returns the job's nodes: the ClusterSpec's distinct hosts, else as job_nodes says."""
    hosts: set = set()
    if resolver is not None:
        spec = resolver.cluster_spec()
        hosts = {a.rsplit(":", 1)[0] for j in spec.jobs for a in spec.job_tasks(j)}
    return job_nodes(os.environ, len(hosts))


def chief_directory(checkpoint_dir: str) -> str:
    """Returns where the chief's checkpoint goes in ``checkpoint_dir``."""
    return os.path.join(checkpoint_dir, "chief")
