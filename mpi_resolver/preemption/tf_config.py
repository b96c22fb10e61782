"""SlurmTerminationConfig: TensorFlow's TerminationConfig for Slurm, and the coordination
service as the workers' meeting point after the save (the TensorFlow edge; importing this
module imports TensorFlow)."""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import sys
import threading
from typing import Any, Iterator, Mapping, Optional, Union

import tensorflow as tf
from tensorflow.python.distribute import multi_worker_util
from tensorflow.python.distribute.failure_handling import failure_handling_util
from tensorflow.python.eager import context

from mpi_resolver.core.logs import log_once, logger
from mpi_resolver.preemption.resume import missing_checkpoint
from mpi_resolver.preemption.signals import (DEFAULT_SIGNAL, SIGTERM, WarningSignal, grace_seconds,
                                             parse_signal)
from mpi_resolver.preemption.termination import (REQUEUE_EXIT_CODE, TERMINATED_EXIT_CODE, Policy,
                                                 Termination, _EVENT, _EXIT, _SAVED)
from mpi_resolver.preemption.watcher import SignalWatcher

__all__ = ["SlurmTerminationConfig", "TfCoordinator"]


class TfCoordinator:
    """Coordinator over TensorFlow's coordination service (its key-value store and
    barriers); alone (``multi`` False) it answers at once."""

    def __init__(self, chief: bool, multi: bool) -> None:
        self.chief, self.multi = chief, multi

    def announce(self, event: str) -> None:
        if self.multi:
            with contextlib.suppress(tf.errors.OpError):  # AlreadyExists: another was first
                context.context().set_config_key_value(_EVENT, event)

    def event(self, seconds: float) -> Optional[str]:
        return self._get(_EVENT, seconds)

    def barrier(self, seconds: float) -> bool:
        if not self.multi:
            return True
        try:
            context.context().wait_at_barrier(_SAVED, int(seconds * 1000))
            return True
        except tf.errors.OpError:
            return False

    def publish(self, text: str) -> None:
        if self.multi:
            with contextlib.suppress(tf.errors.OpError):
                context.context().set_config_key_value(_EXIT, text)

    def read(self, seconds: float) -> Optional[str]:
        return self._get(_EXIT, seconds)

    def _get(self, key: str, seconds: float) -> Optional[str]:
        if not self.multi:
            return None
        try:
            value = context.context().get_config_key_value(key, int(seconds * 1000))
        except tf.errors.OpError:
            return None
        return value.decode() if isinstance(value, bytes) else value


def _chief(resolver: Any, env: Mapping[str, str]) -> bool:
    """Returns True for the worker that requeues: the chief, or worker 0 without one (the
    resolver's task), else rank 0 as Slurm numbers the tasks."""
    if resolver is not None:
        spec = resolver.cluster_spec()
        if spec.jobs and resolver.task_type is not None:
            return multi_worker_util.is_chief(spec, resolver.task_type, resolver.task_id)
    return env.get("SLURM_PROCID", "0").strip() == "0"


@contextlib.contextmanager
def no_gce_probe() -> Iterator[None]:
    """Within: TensorFlow does not ask Google's metadata server whether this is Google Cloud
    (PreemptionCheckpointHandler does when it is built: up to 5 s, through any proxy set)."""
    probe = failure_handling_util.on_gcp
    failure_handling_util.on_gcp = lambda: False
    try:
        yield
    finally:
        failure_handling_util.on_gcp = probe


class SlurmTerminationConfig(tf.distribute.experimental.TerminationConfig):
    """TensorFlow's TerminationConfig for Slurm: PreemptionCheckpointHandler saves one
    coordinated checkpoint when Slurm's warning signal or SIGTERM comes; then worker 0
    requeues the job (``scontrol requeue``) once every worker has saved, and every worker
    exits with REQUEUE_EXIT_CODE (75), or TERMINATED_EXIT_CODE (143) where SIGTERM ends the
    job. Create it after the strategy, in the main thread: its signal handlers only note
    that a signal came; the save happens at the next step.

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
      save_fn: as TensorFlow's (how to save; default: the handler's CheckpointManager).

    Raises:
      FormatError: a signal that Slurm's --signal does not take or that cannot be watched.
      ResolutionError: not created in the main thread.
    """

    REQUEUE_EXIT_CODE = REQUEUE_EXIT_CODE
    TERMINATED_EXIT_CODE = TERMINATED_EXIT_CODE

    def __init__(self, cluster_resolver: Any = None,
                 signal: Union[str, int] = DEFAULT_SIGNAL,
                 grace_period: Optional[float] = None, *, requeue: bool = True,
                 requeue_on_time_limit: bool = False, save_fn: Any = None) -> None:
        warning = parse_signal(signal)
        grace = grace_seconds(grace_period, warning)
        self.cluster_resolver = cluster_resolver
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
        code, what = self.termination.finish()
        if self.termination.coordinator().chief:
            logger.warning("mpi_resolver: %s; exit code %d", what, code)
        self.watcher.ignore()
        end_with(code, EXIT_WITHIN)
        sys.exit(code)

    def take_back_from_tensorflow(self) -> None:
        """Installs the handlers again where TensorFlow's own took them (the strategy takes
        SIGTERM when it is built); main thread."""
        self.watcher.reclaim(lambda d: d.tensorflow)

    def handler(self, cluster_resolver: Any, checkpoint: Any, checkpoint_dir: str) -> Any:
        """Returns TensorFlow's PreemptionCheckpointHandler for ``checkpoint`` (a
        tf.train.Checkpoint) with this config, which restores the latest checkpoint when it
        is built. Its files stay in ``checkpoint_dir`` (a directory every node sees): the
        chief's checkpoint in ``checkpoint_dir/chief``, the other workers' parts (written,
        then removed, at every save) in ``checkpoint_dir/workertemp_<id>``, as Keras 2's
        BackupAndRestore lays them out; given the directory itself, TensorFlow would write
        those beside it. Built without TensorFlow's probe of Google's metadata server, after
        taking SIGTERM back from TensorFlow. Warns where Slurm restarted the job and there is
        no checkpoint to resume from."""
        if self.cluster_resolver is None:
            self.cluster_resolver = cluster_resolver
        self.take_back_from_tensorflow()
        directory = chief_directory(checkpoint_dir)
        warning = missing_checkpoint(os.environ, directory, tf.train.latest_checkpoint(directory))
        if warning and _chief(cluster_resolver, os.environ):  # one line for the job
            log_once(warning)
        _quiet_total_run_calls()
        with no_gce_probe():
            return tf.distribute.experimental.PreemptionCheckpointHandler(
                cluster_resolver, checkpoint, directory, termination_config=self)


#: Seconds the process may take to end after the save, its script's cleanup included.
EXIT_WITHIN = 10.0


def end_with(code: int, seconds: float) -> None:
    """Makes this process end with exit status ``code``: at the first at-exit handler (after
    the script's own code), or after ``seconds`` whatever it is doing then."""
    def now() -> None:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)

    atexit.register(now)  # the last registered: the first to run
    timer = threading.Timer(seconds, now)
    timer.daemon = True
    timer.start()


def chief_directory(checkpoint_dir: str) -> str:
    """Returns where the chief's checkpoint goes in ``checkpoint_dir``."""
    return os.path.join(checkpoint_dir, "chief")


class _DropTotalRunCalls(logging.Filter):
    """Drops TensorFlow's deprecation warning for total_run_calls, which its own save reads
    (the step is in the checkpoint's own variable)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "total_run_calls" not in record.getMessage()


def _quiet_total_run_calls() -> None:
    log = tf.get_logger()
    if not any(isinstance(f, _DropTotalRunCalls) for f in log.filters):
        log.addFilter(_DropTotalRunCalls())
