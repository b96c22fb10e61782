"""At which steps the periodic checkpoints fall: every worker asks ``due(step)`` after each
step and gets the same answer, because a step count is the same on every worker and a
duration is turned into one by the chief alone (its clock, its measured step and save
times), then shared through ``agree`` (pure: the clock and the agreement are passed in)."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Callable, List, Mapping, Optional

from mpi_resolver.core.values import whole_number

from mpi_resolver.long_jobs.interval import (Every, job_mtbf, overhead, steps_for,
                                              young_interval)

__all__ = ["Schedule", "Plan", "WARMUP_STEPS", "job_nodes", "plan_agreement"]

#: Steps a run takes before the chief times its steps (the first traces the graph and makes
#: the first all-reduce's connections: seconds, not a step's time).
WARMUP_STEPS = 10

#: ``agree(index, value)``: the chief passes its value and every worker gets it back (the
#: others pass None); ``index`` numbers the decisions of this run.
Agree = Callable[[int, Optional[int]], int]


@dataclass(frozen=True)
class Plan:
    """What the chief chose for a duration or 'auto': the interval in seconds and in steps,
    the step and save times it was computed from, and the job's failure rate."""

    seconds: float
    steps: int
    step_seconds: float
    save_seconds: Optional[float]
    mtbf_seconds: float
    write_seconds: Optional[float] = None  # a background write's time, where saves are

    def line(self, every: Every) -> str:
        """Returns the one line the chief prints when it chooses the interval."""
        why = ""
        if every.auto and self.write_seconds is None:
            why = (f" (Young: sqrt(2 x C {self.save_seconds or 0:.2f} s x M "
                   f"{shown(self.mtbf_seconds / 3600)} h))")
        elif every.auto:
            why = (f" (Young: sqrt(2 x C {self.save_seconds or 0:.3f} s x M "
                   f"{shown(self.mtbf_seconds / 3600)} h), C the training's stall; not below "
                   f"the write in the background, {self.write_seconds:.2f} s)")
        spent = overhead(self.save_seconds or 0.0, self.seconds, self.mtbf_seconds)
        return (f"periodic checkpoints ({every.describe()}): every {shown(self.seconds)} s = "
                f"{self.steps} steps of {self.step_seconds:.3f} s{why}; expected overhead "
                f"{spent * 100:.2f} % (saves and work redone after a failure)")


def shown(value: float) -> str:
    """Returns ``value`` for the plan's line: whole from 10, else two significant digits (a
    test's MTBF of 36 s is 0.01 h, an interval of 0.45 s not 0 s)."""
    return f"{value:.0f}" if value >= 10 else f"{value:.2g}"


def plan_agreement(coord: Any, key: str) -> Agree:
    """Returns the schedule's agreement over ``coord`` (the framework's meeting point: its
    ``agree(key, value, what)`` gives the chief's value to every worker), a key of its own
    for each decision under ``key``."""
    def agree(index: int, value: Optional[int]) -> int:
        return int(coord.agree(f"{key}_plan_{index}", "" if value is None else str(value),
                               "the step of the next periodic checkpoint"))
    return agree


def job_nodes(env: Mapping[str, str], hosts: int = 0) -> int:
    """Returns the job's nodes, for its failure rate: ``hosts`` (the distinct hosts the caller
    knows, e.g. a ClusterSpec's) where > 0, else SLURM_JOB_NUM_NODES, else 1."""
    return hosts if hosts > 0 else whole_number(env.get("SLURM_JOB_NUM_NODES")) or 1


class Schedule:
    """The periodic saves of one run that starts at step ``start``: ``due(step)`` after every
    step (True: save now), ``saved(seconds)`` after each save. ``nodes`` and
    ``node_mtbf_hours`` give the job's failure rate for 'auto' and the overhead line."""

    def __init__(self, every: Every, start: int, *, chief: bool, agree: Agree, nodes: int,
                 node_mtbf_hours: float, clock: Callable[[], float] = time.monotonic,
                 warmup: int = WARMUP_STEPS) -> None:
        self.every, self.start, self.chief = every, start, chief
        self._agree, self._clock, self._warmup = agree, clock, warmup
        self.mtbf = job_mtbf(nodes, node_mtbf_hours)
        self._next: Optional[int] = None  # a duration's or auto's next save step
        self._decisions = 0
        self._mark: Optional[tuple] = None  # (step, clock) the step time is measured from
        self._started = clock()
        self.save_seconds: Optional[float] = None
        self.write_seconds: Optional[float] = None  # the newest background write's
        self._failures = 0  # periodic saves that failed in a row
        self.plans: List[Plan] = []

    def due(self, step: int) -> bool:
        """Returns True where every worker saves after step ``step`` (steps done)."""
        if self.every.steps is not None:
            return step > self.start and step % self.every.steps == 0
        if step == self.start + 1:
            self._mark = (step, self._clock())
        if self._next is None and step == self.start + self._warmup:
            self._next = self._share(self._first(step) if self.chief else None)
        return step == self._next

    def saved(self, step: int, seconds: float, write: Optional[float] = None,
              pending: bool = False) -> None:
        """Notes a save after step ``step`` that took ``seconds`` of the training (the whole
        save, or the stall of one written in the background, as the caller timed it;
        ``write``: the newest background write's time, where one finished; ``pending``: its
        write goes on in the background, and ``written`` will say how it ended, a back-off
        staying until then); after a periodic save of a duration or 'auto' rule, the chief
        decides the next one and every worker learns it."""
        self.save_seconds = seconds
        if write is not None:
            self.write_seconds = write
        if not pending:
            self._failures = 0
        self._plan_next(step, seconds)

    def written(self, whole: bool) -> None:
        """Notes how a periodic save's background write ended: ``whole`` ends a back-off;
        else it counts as a save that failed, and the interval planned at the next save
        doubles (a directory that refuses every write is not written at every interval)."""
        self._failures = 0 if whole else self._failures + 1

    def failed(self, step: int, seconds: float) -> None:
        """Notes a periodic save after step ``step`` that failed after ``seconds``: the next
        one is planned as after a save, with the longest save time measured (a failure that
        came at once says nothing of a save's cost), and each failure in a row doubles the
        interval, of WARMUP_STEPS steps at least, so that a directory that refuses every
        save (read-only, full) is not tried at every step."""
        self.save_seconds = max(seconds, self.save_seconds or 0.0)
        self._failures += 1
        self._plan_next(step, seconds)

    def _plan_next(self, step: int, seconds: float) -> None:
        """After the periodic save at ``step`` (``seconds`` long) of a duration or 'auto'
        rule: the chief decides the next save's step, every worker learns it."""
        if self.every.steps is None and step == self._next:
            now = self._clock()
            self._next = self._share(self._decide(step, now, now - seconds) if self.chief
                                     else None)
            self._mark = (step, self._clock())

    def _first(self, step: int) -> int:
        """Returns the chief's first save step: at once for 'auto' (its time is Young's C),
        else the interval from the run's start."""
        if self.every.auto:
            return step
        return self._decide(step, self._started, self._clock())

    def _share(self, value: Optional[int]) -> int:
        """Returns the chief's ``value`` on every worker (the others pass None)."""
        index, self._decisions = self._decisions, self._decisions + 1
        return self._agree(index, value)

    def _decide(self, step: int, since: float, end: float) -> int:
        """Returns the chief's next save step: an interval (the rule's, or Young's) after
        ``since`` on its clock, in steps timed from the mark to ``end`` (the last step's end,
        before any save)."""
        now = self._clock()
        mark_step, mark_time = self._mark or (self.start, self._started)
        step_seconds = max(end - mark_time, 0.0) / max(step - mark_step, 1)
        if self.every.auto:  # a save does not start before the write in flight ends
            seconds = max(young_interval(self.save_seconds or 0.0, self.mtbf),
                          self.write_seconds or 0.0)
        else:
            seconds = float(self.every.seconds or 0.0)
        if self._failures:
            seconds = max(seconds, self._warmup * step_seconds) * 2 ** self._failures
        plan = Plan(seconds, steps_for(max(seconds - (now - since), 0.0), step_seconds),
                    step_seconds, self.save_seconds, self.mtbf, self.write_seconds)
        self.plans.append(plan)
        return step + plan.steps
