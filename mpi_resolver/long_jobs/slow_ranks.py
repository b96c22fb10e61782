"""A slow rank found while the training runs (framework-free; the frameworks' edges give the
meeting point). A synchronous step hides each rank's own time: every rank leaves the step's
all-reduce together, the fast ones after waiting for the slowest, so every rank's step takes
as long. So, every ROUND seconds of training (worker 0 turns it into a step at the rate since
the last round, and every rank learns it at the round), each rank times the same fixed work
on its own CPU (``cpu_probe``, about 0.2 s: it runs between two steps, so neither the first
steps, a save nor an evaluation is in it) and puts the time in the coordination service's
store; worker 0 reads every rank's, deletes them, and the rule (long_jobs.stragglers) names a
slow rank in the log and the ledger. A rank whose CPU is limited, shared or throttled is
seen; a slow GPU is not.
"""

from __future__ import annotations

import contextlib
import socket
import time
from typing import Callable, Dict, Mapping, Optional, Protocol, Tuple

from mpi_resolver.core import settings
from mpi_resolver.core.errors import FormatError
from mpi_resolver.core.logs import log_once
from mpi_resolver.long_jobs.interval import parse_every
from mpi_resolver.long_jobs.schedule import WARMUP_STEPS
from mpi_resolver.long_jobs.stragglers import FACTOR, MAJORITY, WINDOW, Slow, Stragglers

__all__ = ["SlowRanks", "Exchange", "cpu_probe", "round_seconds", "node_name", "DEFAULT_ROUND",
           "PROBE_WORK", "WAIT"]

#: Seconds of training between two rounds where MPI_RESOLVER_STRAGGLER_ROUND says nothing: a
#: rank slow from the start is named after stragglers.MAJORITY rounds, within five minutes
#: (the rounds follow the rate, however slow the steps become); the probe's 0.2 s a round
#: costs the training 0.4 %.
DEFAULT_ROUND = 45.0
#: The probe's work: additions and multiplications of Python integers (about 0.17 s on the
#: test machine's CPU, longer than a CPU quota's period of 0.1 s).
PROBE_WORK = 6_000_000
#: Seconds worker 0 waits for all ranks' times of one round (every rank is at the same step).
WAIT = 10.0
_OFF = "off"


class Exchange(Protocol):
    """The workers' store (TensorFlow's or JAX's coordination service)."""

    chief: bool

    def put(self, key: str, value: str) -> None:
        """Sets ``key`` (once)."""

    def get(self, key: str, seconds: float) -> Optional[str]:
        """Returns ``key``'s value, None where it is not set within ``seconds``."""

    def drop(self, key: str) -> None:
        """Deletes ``key``."""

    def agree(self, key: str, value: str, what: str) -> str:
        """Returns the chief's ``value`` on every worker."""


def cpu_probe(work: int = PROBE_WORK,
              clock: Callable[[], float] = time.perf_counter) -> float:
    """Returns the seconds this process takes for ``work`` steps of integer arithmetic."""
    start, total = clock(), 0
    for i in range(work):
        total += i * i
    return clock() - start


def round_seconds(env: Mapping[str, str]) -> Optional[float]:
    """Returns the seconds between rounds from MPI_RESOLVER_STRAGGLER_ROUND (a number of
    seconds or a duration: '45', '90s', '2m'), DEFAULT_ROUND where unset, None for 'off'.

    Raises:
      VariableError: the variable holds anything else, naming it.
    """
    value = settings.setting(None, settings.STRAGGLER_ROUND, env, _parse_round)
    if value is None:
        return DEFAULT_ROUND
    return None if value == _OFF else float(value)


def _parse_round(text: str) -> object:
    if text.lower() == _OFF:
        return _OFF
    try:
        every = parse_every(text)  # its message is replaced below
    except FormatError:
        every = None
    if every is None or every.auto:
        raise FormatError("expected the seconds of training between two slow-rank rounds "
                          f"(e.g. 45, '90s', '2m'; default {DEFAULT_ROUND:g}), or 'off'")
    return every.seconds if every.seconds is not None else every.steps


def node_name(env: Mapping[str, str]) -> str:
    """Returns this rank's node as Slurm names it (SLURMD_NODENAME), else the host's name."""
    return env.get("SLURMD_NODENAME") or socket.gethostname()


class SlowRanks:
    """The rounds of one run that starts at step ``start``: ``step_done(step)`` after every
    step, on every rank; ``rank`` of ``size``, on ``node``; ``found`` (worker 0's) takes
    each slow rank found (the journal's: its line and its record); ``say`` tells worker 0's
    line on the rounds once they are agreed."""

    def __init__(self, exchange: Exchange, key: str, rank: int, size: int, start: int, *,
                 seconds: Optional[float], node: str, found: Callable[[Slow], None],
                 say: Callable[[str], None] = log_once,
                 clock: Callable[[], float] = time.monotonic,
                 probe: Callable[[], float] = cpu_probe, warmup: int = WARMUP_STEPS) -> None:
        self.exchange, self.key, self.rank, self.size = exchange, key, rank, size
        self.start, self.seconds, self.node = start, seconds, node
        self._found, self._say, self._clock, self._probe = found, say, clock, probe
        self._warmup = warmup
        self._mark: Optional[Tuple[int, float]] = None  # (step, clock) the rate is timed from
        self.next: Optional[int] = None  # the next round's step, once agreed
        self.rounds = 0
        self.stragglers = Stragglers({})

    @property
    def watching(self) -> bool:
        """Returns True where there are rounds: two ranks at least, and a round's length."""
        return self.size > 1 and self.seconds is not None

    def step_done(self, step: int) -> None:
        """After ``step`` steps (the same count on every rank): the first round's step agreed
        after the warm-up steps, then a round at each agreed step."""
        if not self.watching:
            return
        if step == self.start + 1:
            self._mark = (step, self._clock())
        if self.next is None and step == self.start + self._warmup:
            self._agree(step, 0, self._clock())
            if self.exchange.chief:
                self._say(self.line(step))
        elif step == self.next:
            self._round(step)

    def line(self, step: int) -> str:
        """Returns worker 0's line once the first round's step is agreed after ``step``."""
        return (f"slow-rank rounds: every {self.seconds:g} s of training (the first after "
                f"{(self.next or 0) - step} steps), each of the {self.size} ranks' probe "
                f"against its peers' median; a rank beyond {FACTOR:g} times in {MAJORITY} of "
                f"its last {WINDOW} rounds is named")

    def _agree(self, step: int, number: int, now: float) -> None:
        """Every rank learns the step of the next round (agreement ``number``), the chief's:
        ROUND seconds of training after ``step`` at the rate timed from the mark (the last
        round's end) to ``now`` (this one's start), a step at least; the chief deletes the
        agreement before it."""
        value = ""
        if self.exchange.chief:
            assert self.seconds is not None  # watching
            mark_step, mark_time = self._mark or (self.start, now)
            rate = max(now - mark_time, 1e-9) / max(step - mark_step, 1)
            value = str(step + max(1, int(round(self.seconds / rate))))
            if number:
                self.exchange.drop(f"{self.key}_slow_at_{number - 1}")  # read by every rank
        self.next = int(self.exchange.agree(f"{self.key}_slow_at_{number}", value,
                                            "the step of the next slow-rank round"))

    def _round(self, step: int) -> None:
        """Every rank puts its probe's time; worker 0 reads them and judges the round; every
        rank learns the next round's step."""
        index, self.rounds = self.rounds, self.rounds + 1
        now = self._clock()
        took = self._probe()
        if self.exchange.chief:
            times, nodes = {self.rank: took}, {self.rank: self.node}
            self._gather(index, times, nodes)
            self.stragglers.nodes.update(nodes)
            for slow in self.stragglers.add(times):
                self._found(slow)
        else:
            self.exchange.put(f"{self.key}_slow_{index}_{self.rank}", f"{took!r} {self.node}")
        self._agree(step, index + 1, now)
        self._mark = (step, self._clock())

    def _gather(self, index: int, times: Dict[int, float], nodes: Dict[int, str]) -> None:
        """Reads the other ranks' times of round ``index`` into ``times`` and ``nodes`` (a
        rank that did not say within WAIT, all told, is left out) and deletes them."""
        deadline = self._clock() + WAIT
        for rank in range(self.size):
            if rank == self.rank:
                continue
            key = f"{self.key}_slow_{index}_{rank}"
            text = self.exchange.get(key, max(deadline - self._clock(), 0.001))
            if text is None:
                continue
            self.exchange.drop(key)
            seconds, _, node = text.partition(" ")
            with contextlib.suppress(ValueError):  # not a time: not this release's
                times[rank], nodes[rank] = float(seconds), node
