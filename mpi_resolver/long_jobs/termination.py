"""What happens between Slurm's signal and the end of the process, without TensorFlow: the
watcher TensorFlow polls, and the exit after the coordinated save (every worker saved, worker
0 requeues where asked, every worker exits with one code; under `mpi-resolver supervise` the
code alone: 75 run again, 143 stop, and supervise requeues). TensorFlow's parts (the
coordination service, the TerminationConfig) come in through ``Coordinator`` (.tf_config)."""

from __future__ import annotations

import math
import socket
import time
from dataclasses import dataclass
from typing import Callable, Dict, Mapping, Optional, Protocol, Tuple

from mpi_resolver.core.errors import ResolutionError
from mpi_resolver.core.logs import log_once
from mpi_resolver.long_jobs import exits
from mpi_resolver.long_jobs.requeue import (ENDING, RUNNING, TIME_LIMIT, RequeueOutcome, Runner,
                                             job_ending, requeue, requeue_target, run_scontrol)
from mpi_resolver.long_jobs.restarts import SUPERVISED_ENV
from mpi_resolver.long_jobs.signals import SIGTERM, WarningSignal
from mpi_resolver.long_jobs.watcher import Arrival, Displaced, SignalWatcher

__all__ = ["Policy", "Coordinator", "Termination", "REQUEUE_EXIT_CODE", "TERMINATED_EXIT_CODE",
           "slow_save", "DEFAULT_WAIT"]

#: Exit code after a save where the job is to run again (requeued by worker 0, or by
#: supervise): sysexits' EX_TEMPFAIL, "try again later" (exits.REQUEUE).
REQUEUE_EXIT_CODE = exits.REQUEUE
#: Exit code after a save on SIGTERM where the job ends (scancel, time limit without
#: requeue_on_time_limit, Slurm's own requeue or preemption): 128 + SIGTERM (exits.TERMINATED).
TERMINATED_EXIT_CODE = exits.TERMINATED
#: Seconds workers wait for each other after the save when no grace period says how long
#: there is (Slurm's KillWait is 30 s by default).
DEFAULT_WAIT = 30.0
_MIN_WAIT = 2.0
_SAVED, _EXIT, _EVENT = "mpi_resolver_saved", "mpi_resolver_exit", "mpi_resolver_event"


@dataclass(frozen=True)
class Policy:
    """The caller's choices: the warning signal, the seconds Slurm gives after it
    (``grace_period``, None where not said), whether worker 0 requeues the job after the
    save on the warning signal, and whether also after the time limit's SIGTERM."""

    warning: WarningSignal
    grace_period: Optional[float]
    requeue: bool
    requeue_on_time_limit: bool

    def settings(self) -> Dict[str, object]:
        """Returns the choices the manifest records for supervise, which requeues the job
        as the tasks would (requeue=False, requeue_on_time_limit reach it so)."""
        return {"signal": self.warning.name, "requeue": self.requeue,
                "requeue_on_time_limit": self.requeue_on_time_limit}


class Coordinator(Protocol):
    """The workers' meeting point after the save (TensorFlow's coordination service)."""

    chief: bool

    def announce(self, event: str) -> None:
        """Records which signal started the save, unless a worker did already."""

    def event(self, seconds: float) -> Optional[str]:
        """Returns the signal a worker announced, None if none within ``seconds``."""

    def barrier(self, seconds: float, tag: str = "") -> bool:
        """Waits until every worker has saved (the save ``tag`` names); False where one did
        not within ``seconds``."""

    def publish(self, text: str, tag: str = "") -> None:
        """Tells the other workers worker 0's decision on the save ``tag`` names."""

    def read(self, seconds: float, tag: str = "") -> Optional[str]:
        """Returns worker 0's decision, None if it did not come within ``seconds``."""

    def leave(self, key: str, seconds: float) -> None:
        """Ends this worker's part before its exit: worker 0 (whose end closes the meeting
        point) once every other said it read all (agreement.leave_last), within ``seconds``."""


def slow_save(took: Optional[float], grace: Optional[float],
              sig: WarningSignal) -> Optional[str]:
    """Returns the warning where the grace period leaves less than a margin after the save
    (the margin: as long as the save took, and at least 10 s), or None. ``took``: seconds
    from the signal to the checkpoint written."""
    if took is None or grace is None:
        return None
    needed = took + max(took, 10.0)
    if grace >= needed:
        return None
    return (f"the checkpoint was written {took:.1f} s after {sig.full_name}, and the grace "
            f"period is {grace:g} s: too short to be sure the save ends before Slurm's kill. "
            f"Ask for the signal at least {math.ceil(needed)} s before the end (the save time "
            f"plus as long again, 10 s at least): #SBATCH --signal={sig.name}@"
            f"{math.ceil(needed)}, and grace_period={math.ceil(needed)}.")


class Termination:
    """Slurm's signals to TensorFlow's coordinated save: ``watch`` for TensorFlow's watcher
    thread (True once a watched signal came), ``finish`` after the save (the exit code)."""

    def __init__(self, policy: Policy, watcher: SignalWatcher, env: Mapping[str, str],
                 coordinator: Callable[[], Coordinator], *, run: Runner = run_scontrol,
                 clock: Callable[[], float] = time.monotonic,
                 host: Optional[str] = None) -> None:
        self.policy, self.watcher, self.env = policy, watcher, env
        self._coordinator_factory = coordinator
        self._coordinator: Optional[Coordinator] = None
        self._run, self._clock = run, clock
        self.host = host or socket.gethostname()
        self._announced = False
        self._reported: set = set()
        self._deadline: float  # finish() sets it: the signal's time plus the budget

    def coordinator(self) -> Coordinator:
        if self._coordinator is None:
            self._coordinator = self._coordinator_factory()
        return self._coordinator

    def watch(self) -> bool:
        """Returns True once a watched signal came (announcing it to the other workers);
        warns, once each, of a watched signal whose handler another library took."""
        for d in self.watcher.displaced():
            self._warn_displaced(d)
        arrival = self.watcher.arrival
        if arrival is None:
            return False
        if not self._announced:
            self._announced = True
            self.coordinator().announce(arrival.signal.name)
        return True

    def _warn_displaced(self, d: Displaced) -> None:
        if d.signal.number in self._reported:
            return
        self._reported.add(d.signal.number)
        why = ("create SlurmTerminationConfig after tf.distribute.MultiWorkerMirroredStrategy "
               "(the strategy takes SIGTERM when it is built)" if d.tensorflow else
               "another signal: --signal=USR2@N with signal='USR2' (NCCL 2.12 took USR1 "
               "this way)")
        log_once(f"{d.signal.full_name} is now handled by {d.owner}, not by mpi_resolver: "
                 f"that signal will not save a checkpoint; {why}.")

    def finish(self, step: Optional[int] = None, failed: Optional[str] = None,
               advanced: bool = True) -> Tuple[int, str]:
        """Returns (exit code, what happened) once the checkpoint is saved (at ``step``; or
        not: ``failed`` says why, and the newest whole checkpoint is what the job resumes
        from, where one ``advanced`` in this run; else exits.SAVE_FAILED and no requeue):
        every worker waits for the others to have saved; worker 0 requeues the job where the
        policy asks and tells the others; all take worker 0's code. Every wait and scontrol
        call shares one deadline: the signal's time plus the grace period (DEFAULT_WAIT
        where none was given, and after SIGTERM: Slurm's KillWait is 30 s by default).
        Never raises: what goes wrong is said in the line."""
        arrival, coord = self.watcher.arrival, self.coordinator()
        took = None if arrival is None else self._clock() - arrival.at
        self._deadline = self._clock() - (took or 0.0) + self._budget(arrival)
        event = arrival.signal.name if arrival else (coord.event(self._left())
                                                     or self.policy.warning.name)
        warning = slow_save(took, self.policy.grace_period, self.policy.warning) \
            if event == self.policy.warning.name and not failed else None
        if warning:
            log_once(warning)
        tag = "" if step is None else f"_{step}"
        saved = coord.barrier(self._left(), tag)
        if coord.chief:
            code, what = self._decide(event, saved, failed, advanced)
            coord.publish(f"{code} {what}", tag)
            coord.leave(f"{_EXIT}{tag}_read", self._left())
            return code, what
        told = coord.read(self._left(), tag)
        if told is None:
            return self.default_code(event), "worker 0 did not say whether it requeued the job"
        coord.leave(f"{_EXIT}{tag}_read", self._left())
        number, _, what = told.partition(" ")
        return int(number), what

    def _budget(self, arrival: Optional[Arrival]) -> float:
        """Returns the seconds from the signal to Slurm's kill, as far as the job knows."""
        warned = arrival is None or arrival.signal.number == self.policy.warning.number
        grace = self.policy.grace_period
        return grace if warned and grace is not None else DEFAULT_WAIT

    def _left(self) -> float:
        """Returns the seconds a wait may take: what is left until the deadline."""
        return max(self._deadline - self._clock(), _MIN_WAIT)

    def default_code(self, event: str) -> int:
        """Returns the exit code where worker 0 said nothing: 75 after the warning signal,
        143 after SIGTERM."""
        warned = event == self.policy.warning.name
        return REQUEUE_EXIT_CODE if warned else TERMINATED_EXIT_CODE

    def _decide(self, event: str, saved: bool, failed: Optional[str],
                advanced: bool) -> Tuple[int, str]:
        """Returns worker 0's (exit code, what happened), requeueing the job where asked
        (under supervise, which requeues: the code alone). A failed save exits
        exits.SAVE_FAILED: under supervise, which judges the progress; without it, the job
        is requeued only where a checkpoint advanced in this run."""
        prefix = f"checkpoint saved on SIG{event}"
        if failed:
            prefix = f"the save on SIG{event} failed ({failed})"
        elif not saved:
            prefix += " (not every worker said it had saved: worker 0's checkpoint is whole)"
        if self.env.get(SUPERVISED_ENV) == "1":
            return self._leave_to_supervise(event, prefix, failed is not None)
        if failed and not advanced:
            return exits.SAVE_FAILED, (f"{prefix} and no checkpoint advanced in this run: "
                                       "not requeued (a requeue would redo the run and fail "
                                       "the same save)")
        if failed:
            prefix += "; the job resumes from the newest checkpoint that restores"
        reason = self._requeue_reason(event)
        warned = event == self.policy.warning.name
        if isinstance(reason, str):
            ends = not warned or self._terminated()
            return (TERMINATED_EXIT_CODE if ends else REQUEUE_EXIT_CODE,
                    f"{prefix}; not requeued: {reason}")
        outcome = self._requeue()
        # After the warning signal, 75 also asks the batch script to requeue where worker 0
        # could not; after the time limit's SIGTERM the batch script ends too: 143.
        code = REQUEUE_EXIT_CODE if outcome.done or warned else TERMINATED_EXIT_CODE
        return code, f"{prefix}; {outcome.message.rstrip('.')}"

    def _leave_to_supervise(self, event: str, prefix: str, failed: bool) -> Tuple[int, str]:
        """Returns the code and line where supervise runs the step and decides: 74 after a
        failed save (supervise requeues where a checkpoint advanced in this run); 75 (run
        again) after the warning signal, and after SIGTERM with requeue_on_time_limit
        (supervise asks scontrol whether the time limit ended the job); else 143."""
        warned = event == self.policy.warning.name
        if failed:
            return exits.SAVE_FAILED, (f"{prefix}; supervise requeues the job where a "
                                       "checkpoint advanced in this run, else it ends")
        if warned or self.policy.requeue_on_time_limit:
            return REQUEUE_EXIT_CODE, f"{prefix}; supervise requeues the job"
        return (TERMINATED_EXIT_CODE, f"{prefix}; not requeued: SIGTERM ends the job "
                "(requeue_on_time_limit=True requeues after the time limit)")

    def _requeue_reason(self, event: str) -> Optional[str]:
        """Returns None where the job is to be requeued, else why not."""
        warned = event == self.policy.warning.name
        if warned and not self.policy.requeue:
            return "requeue=False"
        if not warned and not self.policy.requeue_on_time_limit:
            return ("SIGTERM ends the job (the time limit, scancel, Slurm's requeue or "
                    "preemption; requeue_on_time_limit=True requeues after the time limit)")
        terminated = self._terminated()
        if self.policy.warning.number != SIGTERM and warned and not terminated:
            return None
        try:
            target = self._target()
        except ResolutionError as e:  # not in a Slurm job: nothing to ask scontrol about
            return str(e)
        ending = job_ending(target, self._run, self._left())
        if ending == TIME_LIMIT and (self.policy.requeue_on_time_limit or terminated):
            return None
        if ending == RUNNING and warned:
            return None  # SIGTERM is the warning signal (or a signal alone): the job runs on
        return {TIME_LIMIT: "the time limit ends the job (requeue_on_time_limit=False)",
                RUNNING: "SIGTERM came while the job runs on (scancel --signal=TERM)",
                ENDING: ("SIGTERM came during the save and Slurm ends the job (scancel, or "
                         "Slurm's requeue or preemption, which requeues it itself)"
                         if terminated else
                         "Slurm ends the job (scancel, or Slurm's requeue or preemption, "
                         "which requeues it itself)"),
                None: "scontrol could not say why SIGTERM came"}[ending]

    def _terminated(self) -> bool:
        """Returns True where SIGTERM came on top of another warning signal (scancel, the
        time limit or Slurm's requeue during the save)."""
        warning = self.policy.warning.number
        return warning != SIGTERM and self.watcher.came(warning) and self.watcher.came(SIGTERM)

    def _target(self) -> str:
        return requeue_target(self.env)

    def _requeue(self) -> RequeueOutcome:
        try:
            target = self._target()
        except ResolutionError as e:  # not in a Slurm job
            return RequeueOutcome(False, str(e))
        return requeue(target, self.host, REQUEUE_EXIT_CODE, self._run, self._left())
