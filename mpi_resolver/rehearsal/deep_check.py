"""`mpi-resolver check --deep`, the pure parts: each rank's outcome, the report, the checks of
the GPUs TensorFlow lists and of the all-reduce's sum, and the phases run by a worker thread
in lockstep with the other ranks, each waited for against one deadline (the TensorFlow and
MPI edge is _deep_tf).

TensorFlow runs in a daemon thread, phase by phase (import; resolver and GPUs; strategy and
all-reduce). After each phase the main thread tells the other ranks how it went (``sync``:
an MPI gather, or this rank alone without MPI), so that no rank enters the strategy, which
waits for every worker, once a rank is known not to come. A phase not done by the deadline
leaves its thread behind (it cannot be stopped) and counts as stuck.
"""

from __future__ import annotations

import queue
import threading
import time
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

from mpi_resolver.exchange.transport import _ranges
from mpi_resolver.network.proxies import proxy_capture
from mpi_resolver.core.tables import text_table

#: The stages of a rank's rehearsal, in order (a phase runs one or more of them).
IMPORT, RESOLVE, GPUS, STRATEGY, ALL_REDUCE, SIGNALS = (
    "import tensorflow", "MPIClusterResolver", "list GPUs", "MultiWorkerMirroredStrategy",
    "all-reduce", "Slurm's signals")
#: A rank's state: its phases so far done, one raised, or one not done by the deadline.
OK, FAILED, STUCK = "ok", "failed", "stuck"

_FAILED_FIX = {
    IMPORT: "install TensorFlow for the Python this rank runs on that node, the same version "
            "as on the other nodes (try `python -c 'import tensorflow'` there)",
    STRATEGY: "that rank's TensorFlow server could not start or reach the others: its port "
              "taken since the check (--port-base auto), a gRPC proxy, or a firewall",
    ALL_REDUCE: "the collective failed between the workers: --collective ring works on any "
                "node, nccl needs one GPU per worker",
}
_STUCK_FIX = {
    IMPORT: "importing TensorFlow is slow there (a shared file system, many ranks on few "
            "cores): raise --timeout",
    RESOLVE: "the resolver waits for the other ranks over MPI: one of them did not get here",
    GPUS: "listing the GPUs hangs: check the NVIDIA driver on that node (nvidia-smi)",
    STRATEGY: "the strategy waits for every worker's TensorFlow server: a worker that failed "
              "or is stuck, a gRPC proxy, or a firewall between the nodes",
    ALL_REDUCE: "the all-reduce waits for the other workers: one is stuck, or the network "
                "between them is",
}
_TIMED_OUT = "DeadlineExceededError"  # TensorFlow's own timeouts: waiting for the others


class DeepFailure(Exception):
    """A check of the rehearsal that failed: what it found and the likely fix."""

    def __init__(self, error: str, fix: Optional[str]) -> None:
        super().__init__(error)
        self.error, self.fix = error, fix


@dataclass
class Progress:
    """What this rank's TensorFlow part has done so far (the worker thread writes it, the
    main thread reads it): the stage it is in, the seconds since ``start`` at which it got
    through each stage, the GPUs TensorFlow lists, its version and the replicas in sync."""

    start: float
    stage: str = IMPORT
    times: Dict[str, float] = field(default_factory=dict)
    gpus: Optional[int] = None
    version: Optional[str] = None
    replicas: Optional[int] = None

    def begin(self, stage: str) -> None:
        self.stage = stage

    def done(self, clock: Callable[[], float] = time.monotonic) -> None:
        """Notes that the current stage is done, now."""
        self.times[self.stage] = round(clock() - self.start, 3)


@dataclass(frozen=True)
class RankOutcome:
    """One rank's outcome: its state (OK, FAILED, STUCK) in ``stage``, the error and the
    likely fix, and its Progress' numbers."""

    rank: int
    host: str
    state: str
    stage: str
    error: Optional[str] = None
    fix: Optional[str] = None
    gpus: Optional[int] = None
    version: Optional[str] = None
    replicas: Optional[int] = None
    times: Dict[str, float] = field(default_factory=dict)

    def as_json(self) -> Dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> RankOutcome:
        return cls(**data)

    @property
    def finished(self) -> bool:
        """True when this rank got the all-reduce's right sum."""
        return self.state == OK and ALL_REDUCE in self.times


def outcome_of(result: Any, progress: Progress, rank: int, host: str, timeout: float,
               hint: Optional[str] = None) -> RankOutcome:
    """Returns this rank's outcome of a phase: ``result`` is PhaseRunner.run's (None, the
    exception it raised, or NOT_DONE). ``hint`` (a proxy's) is added to the fix of the stages
    that talk to the other workers."""
    stage = progress.stage
    state, error, fix = OK, None, None
    if result is NOT_DONE:
        state, error = STUCK, f"did not finish within {timeout:g} s"
        fix = _STUCK_FIX.get(stage)
    elif isinstance(result, DeepFailure):
        state, error, fix = FAILED, result.error, result.fix
    elif isinstance(result, BaseException):
        state = STUCK if type(result).__name__ == _TIMED_OUT else FAILED
        error = f"{type(result).__name__}: {first_line(result)}"
        fix = (_STUCK_FIX if state == STUCK else _FAILED_FIX).get(stage)
    if hint and state != OK and stage in (STRATEGY, ALL_REDUCE):
        fix = f"{fix}; {hint}" if fix else hint
    return RankOutcome(rank, host, state, stage, error, fix, progress.gpus, progress.version,
                       progress.replicas, dict(progress.times))


def first_line(error: BaseException, limit: int = 160) -> str:
    """Returns the first line of ``error``'s text, at most ``limit`` characters."""
    text = (str(error).strip().splitlines() or [""])[0]
    return text if len(text) <= limit else text[:limit - 3] + "..."


def gpu_problem(listed: int, given: int, visible: Optional[str]) -> Optional[DeepFailure]:
    """Returns the failure where TensorFlow lists another number of GPUs than the resolver
    gave this rank (CUDA_VISIBLE_DEVICES ``visible``), or None."""
    if listed == given:
        return None
    if listed < given:
        fix = ("a CUDA build of TensorFlow (pip install 'tensorflow[and-cuda]', not "
               "tensorflow-cpu) and a working NVIDIA driver on that node (nvidia-smi); or "
               "--gpus-per-node 0 to rehearse on the CPU")
    else:
        fix = ("CUDA started before CUDA_VISIBLE_DEVICES was set: create the resolver before "
               "anything lists the devices or loads CUDA (a CUDA-aware MPI, an earlier import)")
    return DeepFailure(f"TensorFlow lists {listed} GPUs, the resolver gave {given} "
                       f"(CUDA_VISIBLE_DEVICES={visible if visible is not None else '(unset)'})",
                       fix)


def expected_sum(replicas: int) -> int:
    """Returns the all-reduce's sum when each replica contributes its global id + 1."""
    return replicas * (replicas + 1) // 2


def sum_problem(values: Sequence[float], replicas: int) -> Optional[DeepFailure]:
    """Returns the failure where a local replica's all-reduced value is not the sum of
    1..``replicas``, or None."""
    wanted = expected_sum(replicas)
    wrong = sorted({v for v in values if v != wanted})
    if values and not wrong:
        return None
    return DeepFailure(f"the all-reduce gave {wrong or 'nothing'}, expected {wanted} "
                       f"({replicas} replicas)",
                       "the workers disagree on the ClusterSpec or their number of devices "
                       "(every worker needs the same number of GPUs)")


def proxy_hint(env: Mapping[str, str], hosts: Sequence[str]) -> Optional[str]:
    """Returns how to keep gRPC from sending the ClusterSpec's ``hosts`` through a proxy
    (gRPC's own rules: _proxies.proxy_capture), or None where it does not."""
    capture = proxy_capture(env, [f"{h}:1" for h in hosts])  # a peer is "host:port"
    if capture is None:
        return None
    through = capture.hosts
    return (f"gRPC sends {', '.join(through[:4])}{' ...' if len(through) > 4 else ''} "
            f"through {capture.variable}={capture.proxy}: add them to no_proxy")


@dataclass(frozen=True)
class DeepReport:
    """What --deep found: every rank's outcome (this rank's alone without MPI), the job's
    ranks, the collective asked for, the deadline and the seconds it took; ``note`` says why
    it did not run, or why the outcomes could not be gathered."""

    outcomes: List[RankOutcome]
    ranks: int
    collective: str
    timeout: float
    seconds: float
    gathered: bool
    note: Optional[str] = None
    left_running: bool = field(default=False, compare=False)  # a stuck thread (not in JSON)
    #: a rank did not come to a gather: MPI_Finalize would wait for it (not in JSON)
    lost: bool = field(default=False, compare=False)
    signals: Optional[str] = None  #: the signals checked ('SIGUSR1 and SIGTERM'), or None

    @property
    def ok(self) -> bool:
        """True when every rank shown got the all-reduce's right sum."""
        return (self.note is None and bool(self.outcomes)
                and all(o.finished for o in self.outcomes))

    @property
    def missing(self) -> List[int]:
        """Returns the ranks that could not join: those that failed, or where none failed,
        those stuck (the others waited for them)."""
        failed = [o.rank for o in self.outcomes if o.state == FAILED]
        return failed or [o.rank for o in self.outcomes if o.state == STUCK]

    def text(self) -> str:
        """Returns the report rank 0 prints (or each rank without MPI)."""
        who = f"the job's {self.ranks} rank(s)" if self.gathered else "this rank"
        if self.ok:
            first = self.outcomes[0]
            versions = ", ".join(sorted({o.version or "?" for o in self.outcomes}))
            reach = (f"; after it, {self.signals} reach mpi_resolver's watcher on every rank"
                     if self.signals else "")
            return (f"DEEP OK: MultiWorkerMirroredStrategy (TensorFlow {versions}, collective "
                    f"{self.collective}) on {who}, {first.replicas} replica(s): the first "
                    f"all-reduce gave {expected_sum(first.replicas or 0)}, as expected, in "
                    f"{self.seconds:.1f} s{reach}. Seconds since the start, on each rank:\n"
                    + text_table([_times(o) for o in self.outcomes], _TIME_COLUMNS, 100))
        if self.note is not None and not self.outcomes:
            return f"DEEP NOT RUN: {self.note}"
        head = (f"rank(s) {_ranges(self.missing) or '-'} did not get to the first all-reduce "
                f"(--timeout {self.timeout:g} s)" if self.gathered else
                "this rank's own outcome (without MPI each rank reports its own)")
        lines = [f"DEEP FAILED: {head}:", text_table(_groups(self.outcomes), _GROUP_COLUMNS,
                                                      100)]
        return "\n".join(lines + ([f"note: {self.note}"] if self.note else []))

    def as_json(self) -> Dict[str, Any]:
        """Returns the report for `check --json`."""
        return {"ok": self.ok, "ranks": self.ranks, "collective": self.collective,
                "timeout": self.timeout, "seconds": round(self.seconds, 3),
                "gathered": self.gathered, "missing": self.missing, "note": self.note,
                "signals": self.signals, "outcomes": [o.as_json() for o in self.outcomes]}


_TIME_COLUMNS = ("rank", "host", "GPUs", "TensorFlow imported", "strategy built",
                 "first all-reduce")
_GROUP_COLUMNS = ("ranks", "hosts", "state", "stage", "error", "likely fix")


def _times(o: RankOutcome) -> Dict[str, Any]:
    def at(stage: str) -> Optional[str]:
        return None if stage not in o.times else f"{o.times[stage]:.1f}"

    return {"rank": o.rank, "host": o.host, "GPUs": o.gpus, "TensorFlow imported": at(IMPORT),
            "strategy built": at(STRATEGY), "first all-reduce": at(ALL_REDUCE)}


def _groups(outcomes: Sequence[RankOutcome]) -> List[Dict[str, Any]]:
    """Returns one row for the ranks of each (state, stage, error, fix), those that could not
    join first; the others' stage is the last they got through."""
    groups: Dict[Tuple, List[RankOutcome]] = {}
    for o in sorted(outcomes, key=lambda o: (o.state == OK, o.state == STUCK, o.rank)):
        groups.setdefault((o.state, o.stage, o.error, o.fix), []).append(o)
    rows = []
    for (state, stage, error, fix), same in groups.items():
        hosts = sorted({o.host for o in same})
        more = f" +{len(hosts) - 1} more" if len(hosts) > 1 else ""
        rows.append({"ranks": _ranges([o.rank for o in same]), "hosts": hosts[0] + more,
                     "state": state, "stage": stage if state != OK else f"done: {stage}",
                     "error": error, "likely fix": fix})
    return rows


# ------------------------------------------------------------------------------ phases
NOT_DONE = object()  # PhaseRunner.run's answer for a phase not done by the deadline
Phase = Callable[[Progress], None]


class MainThreadPhase:
    """A phase PhaseRunner runs in the calling (main) thread, at once and unbounded: for the
    short steps that must happen there (Python installs signal handlers and runs them in
    the main thread only)."""

    def __init__(self, phase: Phase) -> None:
        self.phase = phase

    def __call__(self, progress: Progress) -> None:
        self.phase(progress)


class PhaseRunner:
    """Runs phases one at a time in a daemon thread of its own, each waited for until a
    deadline; a phase not done by then is left running (``left_running``)."""

    def __init__(self, progress: Progress) -> None:
        self.progress = progress
        self._todo: queue.Queue = queue.Queue()
        self._done: queue.Queue = queue.Queue()
        self.left_running = False
        threading.Thread(target=self._loop, name="mpi-resolver-deep", daemon=True).start()

    def _loop(self) -> None:
        while True:
            phase = self._todo.get()
            if phase is None:
                return
            try:
                phase(self.progress)
                self._done.put(None)
            except BaseException as e:  # noqa: BLE001 - handed to the main thread
                self._done.put(e)

    def run(self, phase: Phase, deadline: float,
            clock: Callable[[], float] = time.monotonic) -> Any:
        """Returns None when ``phase`` is done by ``deadline``, the exception it raised, or
        NOT_DONE (a MainThreadPhase runs here and now)."""
        if isinstance(phase, MainThreadPhase):
            try:
                phase(self.progress)
                return None
            except Exception as e:  # noqa: BLE001 - this rank's outcome
                return e
        self._todo.put(phase)
        try:
            return self._done.get(timeout=max(deadline - clock(), 0.0))
        except queue.Empty:
            self.left_running = True
            return NOT_DONE

    def close(self) -> None:
        """Ends the thread once it is idle (a thread left running never reads this)."""
        self._todo.put(None)


def run_phases(phases: Sequence[Phase], runner: PhaseRunner, deadline: float,
               sync: Callable[[RankOutcome], List[RankOutcome]],
               outcome: Callable[[Any], RankOutcome]) -> List[RankOutcome]:
    """Returns every rank's outcome (``sync``'s answer) after the last phase, or after the
    first phase that did not go well on some rank: each phase runs until ``deadline``, its
    result becomes this rank's outcome (``outcome``), and ``sync`` shares it."""
    everyone: List[RankOutcome] = []
    for phase in phases:
        everyone = sync(outcome(runner.run(phase, deadline)))
        if any(o.state != OK for o in everyone):
            break
    runner.close()
    return everyone
