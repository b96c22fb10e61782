"""What SlurmTerminationConfig's handler() sets up before training, and what complete() does
after it (the TensorFlow edge; importing this module imports TensorFlow): the checkpoint
directory agreed by every worker (another job's refused, a completed job's training not run
again), the kept checkpoints and the saver, the handler with its periodic schedule; and the
completion in two phases, every worker's end of training, then the manifest's "completed" at
the final step, after which the checkpoints go.
"""

from __future__ import annotations

import itertools
import os
from typing import Any, Mapping, Optional, Tuple

import tensorflow as tf
from tensorflow.python.distribute import multi_worker_util

from mpi_resolver.core.logs import log_once, logger
from mpi_resolver.long_jobs.background import BackgroundWrites
from mpi_resolver.long_jobs.journal import Journal
from mpi_resolver.long_jobs.local_saves import LocalSaves
from mpi_resolver.long_jobs.manifest import (check_directory_together, finished_together,
                                             claim_directory, completed, manifest_for,
                                             this_job)
from mpi_resolver.long_jobs.process_end import settle_at_exit
from mpi_resolver.long_jobs.resume import missing_checkpoint
from mpi_resolver.long_jobs.schedule import Schedule, job_nodes, plan_agreement
from mpi_resolver.long_jobs.slow_ranks import SlowRanks, node_name, round_seconds
from mpi_resolver.long_jobs.step_watchdog import paused_watchdogs
from mpi_resolver.tensorflow.checkpoints import KeepingManager, remove_part, scratch_manager
from mpi_resolver.tensorflow.saver import Saver
from mpi_resolver.tensorflow.snapshot import unsupported
from mpi_resolver.tensorflow.tier import TfTier
from mpi_resolver.tensorflow.coordinator import AGREE_WITHIN
from mpi_resolver.tensorflow.quirks import no_gce_probe, quiet_total_run_calls

__all__ = ["is_chief", "worker_place", "chief_directory", "build", "complete"]

#: Numbers the handlers this process builds (a second fit): each has its own keys.
_HANDLERS = itertools.count()


def is_chief(resolver: Any, env: Mapping[str, str]) -> bool:
    """Returns True for the worker that requeues: the chief, or worker 0 without one (the
    resolver's task), else rank 0 as Slurm numbers the tasks."""
    if resolver is not None:
        spec = resolver.cluster_spec()
        if spec.jobs and resolver.task_type is not None:
            return multi_worker_util.is_chief(spec, resolver.task_type, resolver.task_id)
    return env.get("SLURM_PROCID", "0").strip() == "0"


def worker_place(resolver: Any) -> Tuple[int, int]:
    """Returns this worker's place among the cluster's workers (the chief's first) and
    their count: (0, 1) without a cluster."""
    spec = resolver.cluster_spec() if resolver is not None else None
    if spec is None or not spec.jobs or resolver.task_type is None:
        return 0, 1
    return (multi_worker_util.id_in_cluster(spec, resolver.task_type, resolver.task_id),
            multi_worker_util.worker_count(spec, resolver.task_type))


def chief_directory(checkpoint_dir: str) -> str:
    """Returns where the chief's checkpoint goes in ``checkpoint_dir``."""
    return os.path.join(checkpoint_dir, "chief")


def _nodes(resolver: Any) -> int:
    """Returns the job's nodes: the ClusterSpec's distinct hosts, else as job_nodes says."""
    hosts: set = set()
    if resolver is not None:
        spec = resolver.cluster_spec()
        hosts = {a.rsplit(":", 1)[0] for j in spec.jobs for a in spec.job_tasks(j)}
    return job_nodes(os.environ, len(hosts))


def _directory_agreed(coord: Any, key: str, checkpoint_dir: str, job: Optional[str],
                      chief: bool) -> None:
    """Every worker learns worker 0's verdict on ``checkpoint_dir``: another job's is
    refused (ConfigurationError); this job's completed training ends every worker with 0 at
    once (SystemExit); a requeued job without a checkpoint is a warning.

    Raises:
      ConfigurationError: another job that has not ended wrote the directory.
      SystemExit: this job's training completed (0).
    """
    check_directory_together(coord, key, checkpoint_dir, job)
    done = finished_together(coord, key, checkpoint_dir, job)
    if done is not None:
        if chief:
            logger.warning("mpi_resolver: %s", done)
        raise SystemExit(0)
    directory = chief_directory(checkpoint_dir)
    warning = missing_checkpoint(os.environ, directory, tf.train.latest_checkpoint(directory))
    if warning and chief:  # one line for the job
        log_once(warning)


def build(config: Any, cluster_resolver: Any, checkpoint: Any, checkpoint_dir: str) -> Any:
    """Returns the SlurmCheckpointHandler of ``config`` (a SlurmTerminationConfig) for
    ``checkpoint`` in ``checkpoint_dir``, the newest whole checkpoint restored; sets the
    config's saver.

    Raises:
      ConfigurationError: another job that has not ended wrote the directory, or it cannot
        be written; MPI_RESOLVER_STRAGGLER_ROUND is no round (VariableError).
      ResolutionError: a worker cannot read the checkpoint worker 0 restored.
      SystemExit: this job's training completed already (0, every worker).
    """
    from mpi_resolver.tensorflow.handler import SlurmCheckpointHandler

    chief, job = is_chief(cluster_resolver, os.environ), this_job(os.environ)
    rounds = round_seconds(os.environ)  # a bad variable is refused before any wait
    coord = config.coordinator_now()
    key = f"mpi_resolver_{next(_HANDLERS)}"  # every worker builds its handlers in turn
    with paused_watchdogs():
        _directory_agreed(coord, key, checkpoint_dir, job, chief)
        tier = _tier(config, coord, key, checkpoint)
        manager = KeepingManager(
            checkpoint, chief_directory(checkpoint_dir), config.keep, chief=chief,
            agree=lambda p: coord.agree(f"{key}_restored", p, "which checkpoint it restored"),
            tier=tier)
        task = getattr(cluster_resolver, "task_id", None) or 0
        config.use_saver(_saver(config, manager, None if chief else
                                scratch_manager(checkpoint, task), job, tier))
        quiet_total_run_calls()
        with no_gce_probe():
            handler = SlurmCheckpointHandler(
                cluster_resolver, manager, termination_config=config, saver=config.saver,
                every=config.every, make_schedule=lambda start, every: Schedule(
                    every, start, chief=coord.chief, agree=plan_agreement(coord, key),
                    nodes=_nodes(cluster_resolver), node_mtbf_hours=config.node_mtbf_hours))
    config.saver.started(int(handler._run_counter), key, shared=not manager.from_tier)
    journal = _claimed(config, manager, checkpoint_dir, job, chief)
    handler.slow = _slow_ranks(cluster_resolver, coord, key, config.saver.resumed, rounds,
                               journal)
    return handler


def _saver(config: Any, manager: KeepingManager, scratch: Any, job: Optional[str],
           tier: Optional[TfTier]) -> Saver:
    """Returns the handler's save (config's settings, where its writes go), settled at the
    process's exit where it writes in the background (a script that ends without
    complete())."""
    saver = Saver(manager, scratch, job=job, settings=config.settings(),
                  writes=_background_writes(config, manager._checkpoint, scratch is None),
                  tier=tier)
    if saver.writes is not None:
        settle_at_exit(saver.settle)
    return saver


def _background_writes(config: Any, checkpoint: Any, chief: bool) -> \
        Optional[BackgroundWrites]:
    """Returns where the periodic saves are written in the background (config's
    checkpoint_async, periodic saves, the package's own save), None where they are written
    at once; a state that cannot be read ahead is said once (the chief) and saved at once."""
    if not config.checkpoint_async or config.every is None or config._user_save_fn:
        return None
    why = unsupported(checkpoint)
    if why is not None:
        if chief:
            log_once(f"periodic checkpoints are written at once, not in the background: {why}")
        return None
    return BackgroundWrites()


def _tier(config: Any, coord: Any, key: str, checkpoint: Any) -> Optional[TfTier]:
    """Returns the node-local tier of the periodic saves where config's settings give one
    (a script's own save_fn, or no periodic saves: none, said once)."""
    tiers = config.tiers
    if tiers is None:
        return None
    if config.every is None or config._user_save_fn:
        if coord.chief:
            log_once(f"{tiers.name} is set, and the node-local tier takes the periodic saves "
                     "of the package's own save: none here (checkpoint_every is not set, or "
                     "the script saves by its own save_fn)")
        return None
    from mpi_resolver.exchange.part_link import World

    # MultiWorkerMirroredStrategy: every worker's part is the whole state, a partner's own
    # part the copy of it (none sent at a save)
    local = LocalSaves(tiers.pattern, coord, key, tiers.name, World(), replicated=True)
    return TfTier(local, tiers.shared_every, checkpoint, key)


def _claimed(config: Any, manager: KeepingManager, checkpoint_dir: str, job: Optional[str],
             chief: bool) -> Journal:
    """Returns the run's journal once worker 0 has claimed ``checkpoint_dir`` for ``job``
    and recorded the restore (the config's saver resumed at its step)."""
    if chief:  # the directory is this job's from now on
        claim_directory(checkpoint_dir, manifest_for(job, config.saver.resumed,
                                                     config.settings()))
    journal = config.saver.journal = Journal(checkpoint_dir, job, chief, os.environ)
    journal.restored(config.saver.resumed, os.path.basename(manager.restored or "") or None,
                     manager.skipped, getattr(config, "total_steps", None))
    return journal


def _slow_ranks(cluster_resolver: Any, coord: Any, key: str, start: int,
                seconds: Optional[float], journal: Journal) -> SlowRanks:
    """Returns the slow-rank rounds (``seconds`` apart; None: none) of the run from step
    ``start``: this worker's place among the cluster's workers (the chief's first), what is
    found into ``journal``."""
    rank, size = worker_place(cluster_resolver)
    return SlowRanks(coord, key, rank, size, start, seconds=seconds,
                     node=node_name(os.environ), found=journal.slow)


def complete(config: Any, handler: Any, checkpoint_dir: str, task: int,
             remove: bool = True) -> None:
    """Completes ``config``'s training in two phases, on every worker alike: the final step
    saved where the checkpoint directory's newest is older (worker 0's word: a node-local
    tier's saves are not there); every worker says its training ended (a barrier); each
    node's local directory goes (a node-local tier's); then worker 0 writes the manifest's
    "completed" at the final step, and, where ``remove``, the checkpoints go (the manifest
    and the ledger stay). A failure before the second phase resumes from the final
    checkpoint with no step to do; after it, a run of this job ends 0 at once, and supervise
    trains nothing again."""
    saver, coord = config.saver, config.coordinator_now()
    final = int(handler._run_counter)
    with paused_watchdogs():
        saver.settle()  # the write in flight on disk, recorded
        due = saver.shared != final  # the chief's word: a tier's saves are not there
        if coord.agree(f"{saver.key}_final_{final}", "1" if due else "",
                       "whether the final step is saved"):
            saver.step = final
            handler._save_checkpoint()  # every worker: TensorFlow's save is collective
            saver.record("final", getattr(handler, "_checkpoint_time", None))
        coord.barrier(AGREE_WITHIN, f"_completed_{final}")
        if saver.tier is not None:  # every node's: the final step is in the directory
            saver.tier.local.remove()
        if coord.chief:
            claim_directory(checkpoint_dir, completed(
                manifest_for(saver.job, final, config.settings()), final))
            if saver.journal is not None:
                saver.journal.completed(final)
        if remove:
            remove_part(checkpoint_dir, coord.chief, task)
