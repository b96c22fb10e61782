"""The job's runs read back from its ledger (pure): supervise's run_start and run_end, worker
0's restore, save, save_failed, slow and completed records, put together run by run. A run starts
at supervise's run_start, or, where the step ran without supervise, at worker 0's restore;
each of the other records belongs to the run open when it was written.
"""

from __future__ import annotations

import re
import signal
from dataclasses import dataclass, field
from typing import Any, Dict, Iterable, List, Mapping, Optional, Tuple

from mpi_resolver.long_jobs.ledger import FORMAT, RunEnded
from mpi_resolver.long_jobs.stragglers import Slow

__all__ = ["Save", "Run", "Story", "story_of", "NewerLedger", "EVENTS", "short_cause", "pairs"]

#: The records this release reads; others (a newer or an unknown writer's) are counted.
EVENTS = ("run_start", "run_end", "restore", "save", "save_failed", "slow", "completed")


class NewerLedger(ValueError):
    """The ledger holds records of a format newer than this release reads."""


@dataclass(frozen=True)
class Save:
    """One save: when it ended, its step, seconds, kind (journal.KINDS), whether it held."""

    time: float
    step: int
    seconds: float
    kind: str
    ok: bool = True


@dataclass
class Run:
    """One run of the job's step, as far as the ledger tells it: its job, Slurm's requeue
    count, start and end times, nodes, when training started and from which step, the step
    it reached and when, its saves, the slow ranks found, how it ended (supervise's record,
    None without), and the steps planned where the training said so."""

    job: Optional[str]
    requeues: int
    start: float
    end: Optional[float] = None
    nodes: Optional[str] = None
    trained_from: Optional[float] = None
    resumed: Optional[int] = None
    reached: Optional[int] = None
    reached_at: Optional[float] = None
    saves: List[Save] = field(default_factory=list)
    slow: List[Slow] = field(default_factory=list)
    ended: Optional[RunEnded] = None
    completed: bool = False
    last: float = 0.0
    plan: Optional[int] = None

    def reach(self, step: Optional[int], at: Optional[float]) -> None:
        """Notes that the run reached ``step`` at ``at``, where it is further."""
        if isinstance(step, int) and (self.reached is None or step >= self.reached):
            self.reached = step
            if at is not None:
                self.reached_at = at

    @property
    def until(self) -> float:
        """Returns the run's end: supervise's record of it, else its last record's time."""
        return self.end if self.end is not None else self.last

    @property
    def trained(self) -> int:
        """Returns the steps the run trained (0 where unknown)."""
        if self.reached is None:
            return 0
        return max(self.reached - (self.resumed or 0), 0)


@dataclass
class Story:
    """The runs of one job (the ledger's last, or the one asked for), the other jobs that
    used the directory before, and the records passed over (not understood)."""

    job: Optional[str]
    runs: List[Run]
    other_jobs: List[Optional[str]]
    passed_over: int = 0


def _number(value: Any) -> Optional[float]:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) \
        else None


def _open(record: Mapping[str, Any], start: float) -> Run:
    requeues = record.get("requeues")
    return Run(record.get("job"), requeues if isinstance(requeues, int) else 0, start,
               nodes=record.get("nodes"), last=start)


def _apply(run: Run, record: Mapping[str, Any], at: float) -> None:
    """Puts a restore, save, save_failed, slow or completed ``record`` into ``run``."""
    event, step = record["event"], record.get("step")
    run.last = max(run.last, at)
    if event == "restore":
        run.trained_from, run.resumed = at, step if isinstance(step, int) else 0
        run.nodes = run.nodes or record.get("nodes")
        plan = record.get("plan")
        run.plan = plan if isinstance(plan, int) else None
        run.reach(run.resumed, at)
    elif event in ("save", "save_failed") and isinstance(step, int):
        run.saves.append(Save(at, step, _number(record.get("seconds")) or 0.0,
                              str(record.get("kind") or "periodic"), event == "save"))
        if event == "save":
            run.reach(step, at)
    elif event == "slow":
        _slow(run, record)
    elif event == "completed":
        run.completed = True
        run.reach(step, at)


def _slow(run: Run, record: Mapping[str, Any]) -> None:
    """Puts a slow rank's ``record`` into ``run`` (passed over where it names no rank and
    both times)."""
    rank, node = record.get("rank"), record.get("node")
    rounds, window = record.get("rounds"), record.get("window")
    seconds, peers = _number(record.get("seconds")), _number(record.get("peers"))
    if isinstance(rank, int) and seconds is not None and peers:
        run.slow.append(Slow(rank, node if isinstance(node, str) else None, seconds, peers,
                             rounds if isinstance(rounds, int) else 0,
                             window if isinstance(window, int) else 0))


def _end(run: Run, ended: RunEnded, at: float) -> None:
    run.ended, run.end, run.last = ended, at, max(run.last, at)
    run.reach(ended.reached, ended.reached_at)
    run.reach(ended.step_after, None)
    run.completed = run.completed or ended.cause == "completed"


def _runs(records: Iterable[Mapping[str, Any]]) -> List[Run]:
    """Returns the runs ``records`` tell, in order (records of one job)."""
    runs: List[Run] = []
    current: Optional[Run] = None
    for record in records:
        event, at = record["event"], _number(record.get("time")) or 0.0
        if event == "run_start" or (event == "restore" and (
                current is None or current.trained_from is not None)):
            current = _open(record, at)
            runs.append(current)
            if event == "run_start":
                current.reach(record.get("step"), None)
                continue
        if event == "run_end":
            ended = RunEnded.of(record)
            if current is None:
                current = _open(record, at - (ended.seconds if ended is not None else 0.0))
                runs.append(current)
            if ended is not None:
                _end(current, ended, at)
            current = None
            continue
        if current is None:
            current = _open(record, at)
            runs.append(current)
        _apply(current, record, at)
    return runs


def story_of(records: List[Dict[str, Any]], job: Optional[str] = None, *,
             exact: bool = False) -> Story:
    """Returns the story of ``job`` in ``records``; None: the ledger's last job, or, where
    ``exact``, the runs outside a Slurm job.

    Raises:
      NewerLedger: a record's format is newer than this release reads.
    """
    newer = [r["format"] for r in records
             if isinstance(r.get("format"), int) and r["format"] > FORMAT]
    if newer:
        raise NewerLedger(f"its records are of format {max(newer)}; this release of "
                          f"mpi_resolver reads format {FORMAT} and older: upgrade it")
    known = [r for r in records if r.get("event") in EVENTS]
    jobs: List[Optional[str]] = []
    for r in known:
        if r.get("job") not in jobs:
            jobs.append(r.get("job"))
    chosen = job if job is not None or exact else (jobs[-1] if jobs else None)
    mine = [r for r in known if r.get("job") == chosen]
    return Story(chosen, _runs(mine), [j for j in jobs if j != chosen],
                 len(records) - len(known))


def short_cause(ended: Optional[RunEnded]) -> str:
    """Returns a run's end in a word or two: the signal's name (``SIGKILL``), the warning
    signal's (``USR1``), ``time limit``, ``hang``, ``exit 3``; ``?`` without supervise's
    record."""
    if ended is None:
        return "?"
    if ended.came == "the warning signal" or ended.cause == "saved, to run again":
        return ended.warning  # the tasks' 75: they saved on the warning signal
    if ended.came.startswith("SIGTERM at"):
        return "time limit"
    if ended.came != "nothing":
        return ended.came.split(" ")[0]
    if ended.cause in ("killed by a signal", "killed by the warning signal"):
        return _signal_name(ended.what, ended.status) or ended.cause
    if ended.cause == "a non-zero exit":
        return f"exit {ended.status}"
    return ended.cause


def _signal_name(what: str, status: int) -> Optional[str]:
    """Returns the signal named in ``what`` ('Killed (signal 9)', '(128 + SIGKILL)'), else
    the one ``status`` (128 + N) says."""
    found = re.search(r"\bSIG[A-Z0-9]+\b", what)
    if found:
        return found.group(0)
    number = re.search(r"signal (\d+)", what)
    try:
        return signal.Signals(int(number.group(1)) if number else status - 128).name
    except ValueError:  # no signal's number (an exit status of 128 or less)
        return None


def pairs(runs: List[Run]) -> Iterable[Tuple[Run, Optional[Run]]]:
    """Yields each run with the one after it (None for the last)."""
    for i, run in enumerate(runs):
        yield run, runs[i + 1] if i + 1 < len(runs) else None
