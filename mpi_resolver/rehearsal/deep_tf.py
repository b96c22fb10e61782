"""`mpi-resolver check --deep`'s edge: TensorFlow's part of each rank, phase by phase, as a
training job runs it (import, MPIClusterResolver, the GPUs TensorFlow lists,
MultiWorkerMirroredStrategy, one all-reduce), and the MPI gathers between the phases
(_deep_check has the pure parts and runs the phases).

TensorFlow is imported only inside the phases, in their worker thread. While the strategy's
constructor waits for the other workers, TensorFlow holds the GIL (measured, 2.21: the main
thread does not run until it returns), so no Python timer can stop that wait. It is bounded
instead by TensorFlow's own registration barrier, given half the time left; and the whole
run, whatever happens, by faulthandler's watchdog (its own thread, no GIL needed), which
prints every thread's stack and ends the process with status 1.
"""

from __future__ import annotations

import faulthandler
import os
import time
from dataclasses import fields
from typing import Any, Callable, List, Optional, Tuple

from mpi_resolver.rehearsal.deep_check import (ALL_REDUCE, GPUS, IMPORT, RESOLVE, SIGNALS, STRATEGY,
                                               DeepFailure, DeepReport, MainThreadPhase,
                                               PhaseRunner, Progress, RankOutcome, gpu_problem,
                                               outcome_of, proxy_hint, run_phases, sum_problem)
from mpi_resolver.core.errors import ExchangeTimeout, ResolutionError
from mpi_resolver.exchange.collectives import Transport, gather_json
from mpi_resolver.placement.layout import Layout
from mpi_resolver.options import Options
from mpi_resolver.resolve.resolution import Resolution
from mpi_resolver.long_jobs.reach import unreached
from mpi_resolver.long_jobs.signals import SIGTERM, WarningSignal
from mpi_resolver.long_jobs.watcher import SignalWatcher

TERM = WarningSignal(SIGTERM, "TERM")
#: Jobs MultiWorkerMirroredStrategy takes.
STRATEGY_JOBS = ("chief", "worker")
_THREADS = 1  # TensorFlow's intra- and inter-op threads: one all-reduce needs no more


class TfRehearsal:
    """TensorFlow's part of one rank, as phases for PhaseRunner: ``load``, ``resolve`` (and the
    GPU check), ``strategy``, ``all_reduce`` (its first all-reduce); with ``signal`` (Slurm's
    warning signal), ``watch`` installs the package's watcher of it and SIGTERM after the
    strategy, as SlurmTerminationConfig is, and ``reach`` checks after the all-reduce that
    both still reach it. ``make_resolver()`` and ``list_gpus()`` (the number of GPUs
    TensorFlow lists) stand in for TensorFlow's in tests."""

    def __init__(self, opts: Options, collective: str, deadline: float, comm: Any, *,
                 make_resolver: Optional[Callable[[], Any]] = None,
                 list_gpus: Optional[Callable[[], int]] = None,
                 signal: Optional[WarningSignal] = None) -> None:
        self.opts, self.collective, self.deadline, self.comm = opts, collective, deadline, comm
        self.make_resolver = make_resolver or self._resolver
        self.list_gpus = list_gpus or (lambda: len(self.tf.config.list_physical_devices("GPU")))
        self.tf: Any = None
        self.resolver: Any = None
        self.strategy_: Any = None
        self.watcher = None if signal is None else SignalWatcher([signal, TERM])

    def phases(self) -> List[Any]:
        """Returns the phases in their order."""
        if self.watcher is None:
            return [self.load, self.resolve, self.strategy, self.all_reduce]
        return [self.load, self.resolve, self.strategy, MainThreadPhase(self.watch),
                self.all_reduce, MainThreadPhase(self.reach)]

    def load(self, progress: Progress) -> None:
        progress.begin(IMPORT)
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # before TensorFlow is imported
        import tensorflow as tf

        tf.config.threading.set_intra_op_parallelism_threads(_THREADS)
        tf.config.threading.set_inter_op_parallelism_threads(_THREADS)
        self.tf, progress.version = tf, tf.__version__
        progress.done()

    def resolve(self, progress: Progress) -> None:
        """Creates the resolver (it sets CUDA_VISIBLE_DEVICES before CUDA starts); checks the
        GPUs TensorFlow then lists against the ones it gave this rank."""
        progress.begin(RESOLVE)
        self.resolver = self.make_resolver()
        progress.done()
        progress.begin(GPUS)
        progress.gpus = self.list_gpus()
        problem = gpu_problem(progress.gpus, len(self.resolver.resolution.own_gpus),
                              os.environ.get("CUDA_VISIBLE_DEVICES"))
        if problem is not None:
            raise problem
        progress.done()

    def _resolver(self) -> Any:
        """Returns MPIClusterResolver with the command line's options (every field of
        Options is an argument of the resolver's) on the TensorFlow part's communicator."""
        from mpi_resolver.resolve.tf_resolver import MPIClusterResolver

        options = {f.name: getattr(self.opts, f.name) for f in fields(self.opts)}
        return MPIClusterResolver(comm=self.comm, **options)

    def strategy(self, progress: Progress) -> None:
        """Builds the strategy as examples/train.py does."""
        progress.begin(STRATEGY)
        tf = self.tf
        if not registration_bounded():
            os.write(2, (f"mpi-resolver: note: TensorFlow {tf.__version__} cannot bound the "
                         "wait for the other workers: a rank stuck there is ended after "
                         f"{3 * self.opts.timeout + 30:g} s, with every thread's stack, "
                         "instead of the table.\n").encode())
        bound_registration(self.resolver.cluster_spec(), (self.deadline - time.monotonic()) / 2)
        how = tf.distribute.experimental.CommunicationImplementation
        options = tf.distribute.experimental.CommunicationOptions(
            implementation=getattr(how, self.collective.upper()),
            timeout_seconds=self.opts.timeout)
        self.strategy_ = tf.distribute.MultiWorkerMirroredStrategy(
            cluster_resolver=self.resolver, communication_options=options)
        progress.replicas = self.strategy_.num_replicas_in_sync
        progress.done()

    def all_reduce(self, progress: Progress) -> None:
        """Runs one all-reduce over the strategy; checks its sum."""
        progress.begin(ALL_REDUCE)
        problem = sum_problem(replica_sums(self.tf, self.strategy_), progress.replicas or 0)
        if problem is not None:
            raise problem
        progress.done()

    def watch(self, progress: Progress) -> None:
        """Installs the watcher (main thread), after the strategy as a training script does."""
        assert self.watcher is not None
        self.watcher.install()

    def reach(self, progress: Progress) -> None:
        """Checks that the watched signals still reach the watcher (main thread)."""
        assert self.watcher is not None
        progress.begin(SIGNALS)
        try:
            problem = unreached(self.watcher)
        finally:
            self.watcher.uninstall()
        if problem is not None:
            raise DeepFailure(*problem)
        progress.done()


def replica_sums(tf: Any, strategy: Any) -> List[float]:
    """Returns each local replica's result of one all-reduce (SUM) of its global replica id
    + 1, under ``strategy``."""

    def replica_fn() -> Any:
        ctx = tf.distribute.get_replica_context()
        one = tf.cast(ctx.replica_id_in_sync_group, tf.float32) + 1.0
        return ctx.all_reduce(tf.distribute.ReduceOp.SUM, one)

    step = tf.function(lambda: strategy.run(replica_fn))
    return [float(v) for v in strategy.experimental_local_results(step())]


def registration_bounded() -> bool:
    """Returns True where TensorFlow's coordination service can bound the wait for the other
    workers (its config has cluster_register_with_barrier: 2.21 has, 2.15 has not)."""
    from tensorflow.core.protobuf import config_pb2

    config = config_pb2.ConfigProto().experimental.coordination_config
    return "cluster_register_with_barrier" in config.DESCRIPTOR.fields_by_name


def bound_registration(spec: Any, seconds: float) -> None:
    """Configures TensorFlow's coordination service as the strategy would (a standalone
    service led by its coordination leader, for the chief and worker jobs), with the workers'
    registration a barrier that gives up after ``seconds`` (at least 1) instead of waiting an
    hour; does nothing where TensorFlow has neither the parts nor the field (older versions),
    or the service is configured already."""
    try:
        from tensorflow.python.distribute import multi_worker_util
        from tensorflow.python.eager import context

        ctx = context.context()
        if ctx.coordination_service is not None:
            return
        ctx.configure_coordination_service(
            "standalone", service_leader=multi_worker_util.coordination_leader(spec),
            cluster_register_timeout_in_ms=int(max(seconds, 1.0) * 1000))
        config: Any = ctx.coordination_service
        for job in STRATEGY_JOBS:
            if job in spec.jobs:
                config.coordinated_job_list.add(name=job, num_tasks=spec.num_tasks(job))
        if "cluster_register_with_barrier" in config.DESCRIPTOR.fields_by_name:
            config.cluster_register_with_barrier = True
    except (ImportError, AttributeError):  # pragma: no cover - other TensorFlow versions
        return


def check_jobs(layout: Layout) -> None:
    """Raises ResolutionError where the ClusterSpec has jobs the strategy does not take."""
    other = sorted(set(layout.cluster) - set(STRATEGY_JOBS))
    if other:
        raise ResolutionError(
            f"check --deep rehearses MultiWorkerMirroredStrategy, whose ClusterSpec has "
            f"'chief' and 'worker' jobs only; this one has {', '.join(map(repr, other))}. "
            "check --connect checks its connections.")


class Gather:
    """The phases' ``sync`` over MPI: every rank's outcome, gathered (two collectives);
    remembers this rank's last outcome."""

    def __init__(self, transport: Transport) -> None:
        self.transport = transport
        self.own: Optional[RankOutcome] = None

    def __call__(self, own: RankOutcome) -> List[RankOutcome]:
        self.own = own
        return [RankOutcome.from_json(d) for d in gather_json(self.transport, own.as_json())]


def run_deep(res: Resolution, opts: Options, collective: str,
             signal: Optional[WarningSignal] = None) -> DeepReport:
    """Returns this rank's report of --deep: every rank's outcome, gathered over MPI where
    the resolution started it, else this rank's own; within ``opts.timeout`` seconds and the
    gathers' few more (faulthandler ends the process, status 1, at three timeouts and 30 s).

    Raises:
      ResolutionError: jobs the strategy does not take; ExchangeTimeout: a rank did not
        arrive to set up the gathers.
    """
    check_jobs(res.layout)
    start = time.monotonic()
    faulthandler.dump_traceback_later(3 * opts.timeout + 30, exit=True)
    try:
        return _run(res, opts, collective, start, signal)
    finally:
        faulthandler.cancel_dump_traceback_later()


def _run(res: Resolution, opts: Options, collective: str, start: float,
         signal: Optional[WarningSignal]) -> DeepReport:
    from mpi_resolver.exchange.transport import mpi_initialized

    host = res.layout.host_of(res.rank)[0]
    progress, deadline = Progress(start), start + opts.timeout
    hint = proxy_hint(os.environ, sorted({h for h in res.layout.placement}))

    def outcome(result: Any) -> RankOutcome:
        return outcome_of(result, progress, res.rank, host, opts.timeout, hint)

    gather, comm = _mpi_parts(opts.timeout) if mpi_initialized() else (None, None)
    rehearsal = TfRehearsal(opts, collective, deadline, comm, signal=signal)
    runner = PhaseRunner(progress)
    phases = rehearsal.phases()
    note, sync = None, gather or (lambda own: [own])
    try:
        everyone = run_phases(phases, runner, deadline, sync, outcome)
    except ExchangeTimeout as e:  # a rank did not come to a gather
        assert gather is not None  # only the gathers raise it
        everyone, note = [gather.own or outcome(None)], str(e)
    if gather is not None and note is None:
        gather.transport.close()
    signals = None if signal is None else f"{signal.full_name} and SIGTERM"
    return DeepReport(everyone, res.num_tasks, collective, opts.timeout,
                      time.monotonic() - start, gathered=note is None and gather is not None,
                      note=note, left_running=runner.left_running, signals=signals,
                      lost=note is not None)


def _mpi_parts(timeout: float) -> Tuple[Gather, Any]:
    """Returns (the gather between phases, the communicator of the TensorFlow part's
    resolver): two duplicates of COMM_WORLD, so that the worker thread's collectives (which
    may be left pending) never meet the main thread's or the command line's."""
    from mpi_resolver.exchange.transport import MpiTransport, _wait, world

    comm = world()[0]
    work, request = comm.Idup()
    transport = MpiTransport(comm, 2 * timeout + 10)  # raises ExchangeTimeout, naming ranks
    if not _wait(request, time.monotonic() + timeout):
        raise ExchangeTimeout("check --deep: the ranks' communicator could not be made "
                              f"within {timeout:g} s (the MPI network may be stalled).")
    return Gather(transport), work

