"""A long JAX job's checkpoints around a training loop, written by Orbax:
``LongJob.restore(state)`` resumes from the newest checkpoint that every process reads whole
(process 0's list, a torn one skipped), ``LongJob.step_done(step, state)`` after every step
saves periodically (every N steps, a duration or 'auto': long_jobs.schedule, as for
TensorFlow; the step pays the copy to host memory, the write runs in the background) and, once
Slurm's signal or SIGTERM reached any process, saves at the same step on every process, waits
for it, requeues (process 0, or supervise) and ends the process with the package's exit code
(75: run again; 143: stop). Every process saves the shards it owns, so a state sharded across
processes is saved and restored. Importing this module imports JAX and Orbax.

    job = LongJob("checkpoints/run1", checkpoint_every="auto")
    step, state = job.restore(state)
    while step < total:
        state = train_step(state, batch(step))
        step += 1
        job.step_done(step, state)
    job.complete()
"""

from __future__ import annotations

import itertools
import os
import time
from typing import Any, Dict, Optional, Tuple

from mpi_resolver.core.logs import log_each, log_once, logger
from mpi_resolver.exchange.part_link import World
from mpi_resolver.jax.coordinator import AGREE_WITHIN
from mpi_resolver.jax.npz_checkpoints import NpzCheckpoints
from mpi_resolver.jax.orbax_checkpoints import OrbaxCheckpoints, orbax_name
from mpi_resolver.jax.restoring import restore_agreed
from mpi_resolver.jax.tier_saves import TierSaves
from mpi_resolver.jax.termination import JaxTermination, disconnect
from mpi_resolver.long_jobs.background import Written
from mpi_resolver.long_jobs.interval import parse_every
from mpi_resolver.long_jobs.job_settings import checkpoint_dir as job_checkpoint_dir
from mpi_resolver.long_jobs.job_settings import long_job_settings
from mpi_resolver.long_jobs.journal import (Journal, checkpoint_bytes, error_text,
                                             planned_steps, write_ended)
from mpi_resolver.long_jobs.local_saves import LocalSaves
from mpi_resolver.long_jobs.manifest import (check_directory_together, claim_directory,
                                             completed, finished_together, manifest_for,
                                             settings_of, this_job, write_manifest)
from mpi_resolver.long_jobs.process_end import (EXIT_WITHIN, end_with, leave_first,
                                                exit_on_configuration_error, settings_checked,
                                                settle_at_exit)
from mpi_resolver.long_jobs.resume import missing_checkpoint
from mpi_resolver.long_jobs.schedule import Schedule, job_nodes, plan_agreement
from mpi_resolver.long_jobs.slow_ranks import SlowRanks, node_name, round_seconds
from mpi_resolver.long_jobs.step_watchdog import paused_watchdogs
from mpi_resolver.long_jobs.tier_settings import tier_settings

__all__ = ["LongJob"]

#: Numbers the LongJobs this process builds: each has its own keys in JAX's store.
_JOBS = itertools.count()
State = Any  # a pytree, or a callable that returns one (read only when a save is due)


class LongJob:
    """Checkpoints and Slurm's signals for a JAX training loop (see the module). Arguments as
    SlurmTerminationConfig's; each not given comes from its MPI_RESOLVER_* variable, else the
    default: ``checkpoint_dir`` (a directory every node sees), ``checkpoint_every`` (None:
    on the signal only), ``keep``, ``node_mtbf_hours``, ``signal``, ``grace_period``,
    ``requeue``, ``requeue_on_time_limit``, ``checkpoint_async`` (periodic saves written
    in the background; default True); ``check_every`` steps between the signal agreements
    (each one small collective); ``total_steps``, the steps planned (for
    ``mpi-resolver status``'s expected end); ``local_dir`` (else MPI_RESOLVER_LOCAL_DIR), a
    node-local directory where the periodic saves go, each process's part copied to its
    partner on the next node, every ``shared_every``-th (else MPI_RESOLVER_SHARED_EVERY, else
    10) to the checkpoint directory too (long_jobs.local_saves).

    Raises:
      FormatError, ResolutionError: a bad argument or variable, naming it; no directory.
    """

    def __init__(self, checkpoint_dir: Optional[str] = None, *, checkpoint_every: Any = None,
                 keep: Any = None, node_mtbf_hours: Any = None, signal: Any = None,
                 grace_period: Any = None, requeue: bool = True,
                 requeue_on_time_limit: bool = False, check_every: int = 1,
                 total_steps: Optional[int] = None, checkpoint_async: Any = None,
                 local_dir: Optional[str] = None, shared_every: Any = None) -> None:
        exit_on_configuration_error()  # a refused setting ends the process with 78,
        leave_first(disconnect)  # with the others (JAX aborts where process 0 left first)
        with settings_checked():  # an argument's too
            self.total_steps = planned_steps(total_steps)
            given = long_job_settings(signal=signal, grace_period=grace_period,
                                      checkpoint_every=checkpoint_every, keep=keep,
                                      node_mtbf_hours=node_mtbf_hours,
                                      checkpoint_async=checkpoint_async)
            self.directory = job_checkpoint_dir(checkpoint_dir, os.environ, "checkpoint_dir")
            self.every = parse_every(given.checkpoint_every)
            self.tiers = tier_settings(os.environ, local_dir, shared_every)
        self.node_mtbf_hours = given.node_mtbf_hours
        self.files = OrbaxCheckpoints(self.directory, given.keep, given.checkpoint_async)
        self.earlier = NpzCheckpoints(self.directory)  # the package's format before Orbax
        with settings_checked():
            self.termination = JaxTermination(
                given.signal, given.grace_period, requeue=requeue,
                requeue_on_time_limit=requeue_on_time_limit, check_every=check_every)
        self.coord = self.termination.coordinator
        self.chief = self.coord.chief
        self.job = this_job(os.environ)
        self.key = f"mpi_resolver_jax_{next(_JOBS)}"
        self.tier = self._tier_saves()
        self.schedule: Optional[Schedule] = None
        self.start = 0
        self.newest: Optional[int] = None  # the step of this run's last whole save
        self.newest_shared: Optional[int] = None  # its last in the checkpoint directory
        self.journal = Journal(self.directory, self.job, self.chief, os.environ)
        self.rounds = round_seconds(os.environ)  # the slow-rank rounds' seconds (None: off)
        self.slow: Optional[SlowRanks] = None  # this run's, at its first step_done
        self._last: Optional[Tuple[int, State]] = None  # the last step_done's step and state
        self._kind = "periodic"  # the kind of the save in flight
        if self.files.background:  # a script that ends without complete()
            settle_at_exit(self._settle_all)

    def _tier_saves(self) -> Optional[TierSaves]:
        """Returns the saves to the node-local tier, where the settings give a local
        directory."""
        if self.tiers is None:
            return None
        local = LocalSaves(self.tiers.pattern, self.coord, self.key, self.tiers.name, World())
        return TierSaves(local, self.tiers.shared_every, self.files.background, self.directory,
                         self._local_whole)

    def restore(self, state: Any) -> Tuple[int, Any]:
        """Returns (the step to go on from, the state): the newest checkpoint that reads
        whole put into ``state``'s shape and placement, or (0, ``state``) where there is
        none. Every process calls it; all take process 0's choice.

        Raises:
          ConfigurationError: another job that has not ended wrote the directory, or it
            cannot be written (uncaught: exit 78).
          ResolutionError: a process cannot read process 0's checkpoint; the checkpoint does
            not fit ``state``.
          SystemExit: this job's training completed already (0, every process).
        """
        check_directory_together(self.coord, self.key, self.directory, self.job)
        done = finished_together(self.coord, self.key, self.directory, self.job)
        if done is not None:
            if self.chief:
                logger.warning("mpi_resolver: %s", done)
            raise SystemExit(0)
        with paused_watchdogs():
            local = None if self.tier is None else \
                self.tier.restore(state, self.coord, self.key, self.files.steps)
            found = local or \
                restore_agreed(self.coord, self.key, self.files, self.earlier, state)
        self.start = found.step or 0
        self.files.open()  # every process at once, before any save
        if self.chief:  # the directory is this job's from now on
            log_each(found.warnings)
            warning = missing_checkpoint(os.environ, self.directory, found.name)
            if warning:
                log_once(warning)
            claim_directory(self.directory, self._manifest(self.start))
            self.journal.restored(self.start, found.name, found.warnings, self.total_steps)
        if found.step is None:
            return 0, state
        return self.start, found.tree

    def step_done(self, step: int, state: State) -> None:
        """After ``step`` steps (the same count on every process): the slow-rank round where
        due; the save on Slurm's signal, then SystemExit with the exit code; else the periodic
        save where due.
        ``state``: the training state, or a callable that returns it (called where a save is
        due, on every process)."""
        self._last = (step, state)
        self._written(self.files.done())
        if self.tier is not None:
            self.tier.done()
        self.journal.progress(step)
        if self.slow is None:
            self.slow = SlowRanks(self.coord, self.key, self.coord.rank, self.coord.size,
                                  self.start, seconds=self.rounds, node=node_name(os.environ),
                                  found=self.journal.slow)
        self.slow.step_done(step)
        if self.termination.should_stop():
            self._stop(step, state)
        if self.every is None:
            return
        if self.schedule is None:
            self.schedule = self._make_schedule(self.start)
        if self.schedule.due(step):
            with paused_watchdogs():  # the package's own save is no training step
                seconds, failed = self._periodic(step, state)
            plans = len(self.schedule.plans)
            write = self.files.writes.last_seconds if self.tier is None else \
                self.tier.last_write  # the tier's, where its writes set the pace
            if failed is None:
                self.schedule.saved(step, seconds or 0.0, write, pending=self.files.writes.pending)
            else:
                self.schedule.failed(step, seconds or 0.0)
            if self.chief and len(self.schedule.plans) > plans:
                log_once(self.schedule.plans[-1].line(self.schedule.every))

    def complete(self, remove: bool = False) -> None:
        """Training is over; every process calls it after its last step_done. In two phases:
        the last step saved where the newest checkpoint is older, every process says its
        training ended (a barrier), and each node's local directory goes (a node-local
        tier's); then process 0 records in the manifest that the job's
        training completed, and, where ``remove``, the checkpoints go (the manifest and the
        ledger stay). A failure before the second phase resumes at the final step with no
        step to do; after it, a run of this job ends 0 at once and supervise trains nothing
        again. The signals' handlers are put back."""
        try:
            with paused_watchdogs():
                self._settle_all()
                final = self._last[0] if self._last is not None else self.start
                due = self._last is not None and self.newest_shared != final and \
                    self.start != final  # the final step in the checkpoint directory
                if self.coord.agree(f"{self.key}_final", "1" if due else "",
                                    "whether the final step is saved") and self._last:
                    self._save(*self._last, "final")
                self.coord.barrier(AGREE_WITHIN, f"_completed_{final}")
                self.files.close()
                if self.tier is not None:  # every node's: the final step is in the directory
                    self.tier.local.remove()
            if self.chief:
                claim_directory(self.directory, completed(self._manifest(final), final))
                self.journal.completed(final)
                if remove:
                    self.files.remove()
                    self.earlier.remove()
        finally:
            self.termination.disarm()

    def _stop(self, step: int, state: State) -> None:
        """Saves at ``step``, waits for the others, requeues where asked; raises SystemExit."""
        with paused_watchdogs():
            if self.tier is not None:
                self.tier.settle()
            _, failed = self._save(step, state, "signal")
        advanced = self.newest is not None and self.newest > self.start
        code, what = self.termination.finish(step, failed, advanced)
        if self.chief:
            logger.warning("mpi_resolver: %s; exit code %d", what, code)
        end_with(code, EXIT_WITHIN)  # past JAX's teardown, which may wait past KillWait
        disconnect()
        raise SystemExit(code)

    def _periodic(self, step: int, state: State) -> Tuple[Optional[float], Optional[str]]:
        """Saves at ``step`` to the node-local tier where one is set, and every
        shared_every-th one (and the one after a save the tier did not take whole) to the
        shared directory too; else to the shared directory. Returns as _save."""
        if self.tier is None:
            return self._save(step, state, "periodic")
        tree = state() if callable(state) else state
        stall, shared = self.tier.save(step, tree)
        if not shared:
            return stall, None
        more, failed = self._save(step, tree, "periodic")
        return stall + (more or 0.0), failed

    def _local_whole(self, step: int, stall: float, write: Optional[float],
                     nbytes: Optional[int], alone: bool) -> None:
        """Records a node-local save that ended whole (TierSaves' Whole): the newest step;
        in the ledger where the step went to the tier alone (else the shared save's record
        is its)."""
        self.newest = step
        if alone:
            self._write_manifest(step)
            self.journal.saved(step, stall, "periodic", f"{step} (node-local)", nbytes, write)

    def _save(self, step: int, state: State,
              kind: str) -> Tuple[Optional[float], Optional[str]]:
        """Every process saves its part of the checkpoint at ``step`` (``kind``: one of
        journal.KINDS, recorded in the ledger) after the write in flight; a periodic one in
        the background where asked, any other waited for. Returns (what the training paid,
        None), or (the seconds it took to fail, why) where it failed (a warning; the last
        checkpoint that restores stays)."""
        start = time.monotonic()  # the wait for the write in flight is this save's cost
        self._settle()  # one write in flight, the newest last
        self._kind = kind
        try:
            tree = state() if callable(state) else state
            stall = self.files.start(step, tree, start)
        except Exception as e:  # noqa: BLE001 - disk full, quota: noted, training goes on
            failed = Written(step, time.monotonic() - start, 0.0, error=error_text(e))
            return failed.stall, self._ended(failed)
        if self._background():
            return stall, None
        written = self.files.wait()
        assert written is not None  # started just now
        why = self._ended(written)
        return (stall + written.seconds, None) if why is None else (written.stall, why)

    def _background(self) -> bool:
        """Returns whether the save in flight is written in the background."""
        return self._kind == "periodic" and self.files.background

    def _settle(self) -> None:
        """Waits for the write in flight to the shared directory, if one is, and records
        it."""
        self._written(self.files.wait())

    def _written(self, written: Optional[Written]) -> None:
        """Records a background write that ended, if one did, and tells the schedule how
        (its back-off)."""
        failed = self._ended(written)
        if written is not None and self.schedule is not None:
            self.schedule.written(failed is None)

    def _settle_all(self) -> None:
        """Waits for the writes in flight, the tier's and the shared directory's."""
        if self.tier is not None:
            self.tier.settle()
        self._settle()

    def _ended(self, written: Optional[Written]) -> Optional[str]:
        """Records a write that ended (None: none did): on disk, process 0 writes the
        manifest and the ledger's record; returns why it failed, None where it did not."""
        if written is None:
            return None
        failed = write_ended(
            self.journal, written, self._kind, self._background(),
            manifest=lambda: self._write_manifest(written.step),
            checkpoint=lambda: (orbax_name(written.step),
                                checkpoint_bytes(self.files.files(written.step))))
        if failed is None:
            self.newest = self.newest_shared = written.step
        return failed

    def _write_manifest(self, step: int) -> None:
        """Process 0 writes the manifest of the checkpoint at ``step``."""
        if self.chief:
            write_manifest(self.directory, self._manifest(step))

    def _manifest(self, step: int) -> Dict[str, Any]:
        """Returns the manifest of this job's checkpoint at ``step``."""
        return manifest_for(self.job, step, settings_of(
            self.every, self.files.keep, self.files.background, self.termination.policy))

    def _make_schedule(self, start: int) -> Schedule:
        """Returns this run's periodic schedule from step ``start``."""
        assert self.every is not None  # step_done checks it
        return Schedule(self.every, start, chief=self.chief,
                        agree=plan_agreement(self.coord, self.key),
                        nodes=job_nodes(os.environ), node_mtbf_hours=self.node_mtbf_hours)

