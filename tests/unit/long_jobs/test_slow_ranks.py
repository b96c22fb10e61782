"""long_jobs.slow_ranks: the first round's step agreed after the warm-up from worker 0's
rate, each next one at each round from the rate since the last (every rank probes and puts
its time; worker 0 reads, deletes and judges them), a slow rank found said through
``found``; no rounds alone or with 'off'; MPI_RESOLVER_STRAGGLER_ROUND read and refused with
the variable named."""

from __future__ import annotations

import threading
from typing import Dict, List, Optional

import pytest

from mpi_resolver.core.errors import VariableError
from mpi_resolver.long_jobs.slow_ranks import (DEFAULT_ROUND, WAIT, SlowRanks, cpu_probe,
                                               node_name, round_seconds)
from mpi_resolver.long_jobs.stragglers import MAJORITY, WINDOW, Slow

pytestmark = pytest.mark.unit

VARIABLE = "MPI_RESOLVER_STRAGGLER_ROUND"


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class Store:
    """The coordination service's store, shared by the ranks of one test, each rank a thread
    of its own: a read waits for its key (at most REAL seconds of real time). Alone
    (``alone``), worker 0 runs by itself and a missing key costs its whole wait on its clock,
    at once."""

    REAL = 5.0

    def __init__(self, alone: bool = False) -> None:
        self.values: Dict[str, str] = {}
        self.dropped: List[str] = []
        self.waits: List[float] = []
        self.alone = alone
        self.changed = threading.Condition()

    def set(self, key: str, value: str) -> None:
        with self.changed:
            assert key not in self.values  # each key is set once
            self.values[key] = value
            self.changed.notify_all()

    def wait(self, key: str, seconds: float) -> Optional[str]:
        with self.changed:
            self.changed.wait_for(lambda: key in self.values, min(seconds, self.REAL))
            return self.values.get(key)


class View:
    """One rank's view of the store."""

    def __init__(self, store: Store, chief: bool, clock: Clock) -> None:
        self.store, self.chief, self.clock = store, chief, clock

    def put(self, key: str, value: str) -> None:
        self.store.set(key, value)

    def get(self, key: str, seconds: float) -> Optional[str]:
        self.store.waits.append(seconds)
        if self.store.alone:
            if key not in self.store.values:
                self.clock.now += seconds
            return self.store.values.get(key)
        return self.store.wait(key, seconds)

    def drop(self, key: str) -> None:
        with self.store.changed:
            self.store.dropped.append(key)
            del self.store.values[key]

    def agree(self, key: str, value: str, what: str) -> str:
        assert what == "the step of the next slow-rank round"
        if self.chief:
            self.store.set(key, value)
            return value
        told = self.store.wait(key, Store.REAL)
        assert told is not None, f"worker 0 did not agree {key}"
        return told


class Unused:
    chief = True

    def __getattr__(self, name: str):
        raise AssertionError(f"the store was used: {name}")


def ranks(times: List[float], store: Store, *, start: int = 0, seconds: float = 1.0,
          warmup: int = 10, said: Optional[List[str]] = None, probing: float = 0.0) -> tuple:
    """Returns (the ranks, the slow ones found, the probes' count): rank r's probe says
    times[r] and takes ``probing`` seconds of its clock; each rank has its own clock."""
    found: List[Slow] = []
    probes = {"calls": 0}

    each: List[SlowRanks] = []

    def probe_of(rank: int, clock: Clock):
        def probe() -> float:
            probes["calls"] += 1
            clock.now += probing
            return times[rank]
        return probe

    for rank in range(len(times)):
        clock = Clock()
        each.append(SlowRanks(store_view(store, rank, clock), "k", rank, len(times), start,
                              seconds=seconds, node=f"node{rank + 1}", found=found.append,
                              say=(said if said is not None else []).append, clock=clock,
                              probe=probe_of(rank, clock), warmup=warmup))
    return each, found, probes


def store_view(store: Store, rank: int, clock: Clock) -> View:
    return View(store, rank == 0, clock)


def steps(each: List[SlowRanks], first: int, last: int, step_seconds: float = 0.1) -> None:
    """Every rank does steps first..last in a thread of its own, its clock step_seconds a
    step."""
    errors: List[BaseException] = []

    def train(rank: SlowRanks) -> None:
        try:
            for step in range(first, last + 1):
                rank._clock.now += step_seconds  # type: ignore[attr-defined]
                rank.step_done(step)
        except BaseException as e:  # noqa: BLE001 - the test's thread: failed below
            errors.append(e)

    threads = [threading.Thread(target=train, args=(r,)) for r in each]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert not errors, errors


def test_the_first_round_is_agreed_after_the_warm_up() -> None:
    store = Store()
    said: List[str] = []
    each, _, probes = ranks([1.0, 1.0, 1.0], store, start=40, said=said)
    steps(each, 41, 49)
    assert [r.next for r in each] == [None] * 3 and said == []
    steps(each, 50, 50)
    # steps 41..50 timed from the end of step 41: 0.1 s each, so 1 s of training is 10 steps
    assert [r.next for r in each] == [60] * 3 and store.values["k_slow_at_0"] == "60"
    assert said == ["slow-rank rounds: every 1 s of training (the first after 10 steps), "
                    "each of the 3 ranks' probe against its peers' median; a rank beyond 1.2 "
                    "times in 3 of its last 5 rounds is named"]  # worker 0's, once
    steps(each, 51, 59)
    assert probes["calls"] == 0
    steps(each, 60, 60)
    assert probes["calls"] == 3 and [r.rounds for r in each] == [1] * 3
    assert [r.next for r in each] == [70] * 3 and "k_slow_at_0" in store.dropped


def test_the_rounds_follow_the_rate() -> None:
    """Steps that slow down to 0.2 s after the first round: the next round comes 5 steps
    later, not 10."""
    store = Store()
    each, _, probes = ranks([1.0, 1.0], store)
    steps(each, 1, 20)
    assert [r.next for r in each] == [30, 30]
    steps(each, 21, 30, step_seconds=0.2)
    assert [r.next for r in each] == [35, 35] and probes["calls"] == 4


def test_rounds_a_step_apart() -> None:
    """0.12 s of training is a step of 0.1 s: a round after each step, each timed over the
    one step since the last round."""
    each, _, probes = ranks([1.0, 1.0], Store(), seconds=0.12)
    steps(each, 1, 10)
    assert [r.next for r in each] == [11, 11]
    steps(each, 11, 13)
    assert [r.next for r in each] == [14, 14] and probes["calls"] == 6


def test_the_first_step_is_not_timed_the_second_is() -> None:
    """The rate is timed from the end of the run's first step (it traces the graph): a first
    step of 5 s does not count, a second one of 1 s does."""
    for slow_step, first in ((1, 20), (2, 15)):
        each, _, _ = ranks([1.0, 1.0], Store())
        for step in range(1, 11):
            for r in each:
                r._clock.now += 5.0 if step == slow_step == 1 else \
                    1.0 if step == slow_step else 0.1  # type: ignore[attr-defined]
                if r.rank:
                    continue
                r.step_done(step)
        # worker 0 alone decides; the other's agreement is read after
        each[1].step_done(1)
        each[1].step_done(10)
        assert [r.next for r in each] == [first, first], slow_step


def test_the_rounds_own_time_is_no_training() -> None:
    """A probe of 5 s: the next round still comes 10 steps of 0.1 s later."""
    each, _, _ = ranks([1.0, 1.0], Store(), probing=5.0)
    steps(each, 1, 20)
    assert [r.next for r in each] == [30, 30]
    steps(each, 21, 30)
    assert [r.next for r in each] == [40, 40]


@pytest.mark.parametrize("step_seconds, seconds, first", [
    (0.1, 1.0, 20), (0.1, 0.04, 11), (0.5, 45.0, 100), (2.0, 45.0, 32)])
def test_the_first_round_s_step(step_seconds, seconds, first) -> None:
    each, _, _ = ranks([1.0, 1.0], Store(), seconds=seconds)
    steps(each, 1, 10, step_seconds)
    assert [r.next for r in each] == [first, first]


def test_a_slow_rank_is_found_by_worker_0_and_the_keys_go() -> None:
    store = Store()
    each, found, _ = ranks([1.0, 1.43, 1.0, 1.0], store)
    steps(each, 1, 10 + 10 * (MAJORITY - 1))
    assert found == []
    steps(each, 10 + 10 * (MAJORITY - 1) + 1, 10 + 10 * MAJORITY)
    assert found == [Slow(1, "node2", 1.43, 1.0, MAJORITY, WINDOW)]
    assert list(store.values) == [f"k_slow_at_{MAJORITY}"]  # the rest read and deleted
    assert len(store.dropped) == 3 * MAJORITY + MAJORITY and "k_slow_0_1" in store.dropped
    assert all(w <= WAIT for w in store.waits)


def test_a_rank_that_does_not_say_is_left_out_within_one_wait() -> None:
    store = Store(alone=True)
    each, found, _ = ranks([1.0, 2.0, 2.0], store)
    steps(each[:1], 1, 10)  # worker 0 alone: it agrees
    assert each[0].next == 20
    clock = each[0]._clock  # type: ignore[attr-defined]
    before = clock.now
    each[0].step_done(20)  # nobody else said: both waits share one WAIT
    assert clock.now - before == pytest.approx(WAIT, abs=0.01)
    assert store.waits[0] == pytest.approx(WAIT) and store.waits[1] == pytest.approx(0.001)
    assert found == [] and each[0].stragglers._last == {}  # no peer: no ratio


def test_a_value_that_is_no_time_is_passed_over() -> None:
    store = Store(alone=True)
    each, found, _ = ranks([1.0, 1.0], store, seconds=0.5)
    steps(each[:1], 1, 10)
    store.values["k_slow_0_1"] = "fast node2"
    each[0].step_done(each[0].next)
    assert "k_slow_0_1" in store.dropped and each[0].stragglers._last == {}


@pytest.mark.parametrize("size, seconds", [(1, 45.0), (4, None)])
def test_no_rounds_alone_or_off(size, seconds) -> None:
    r = SlowRanks(Unused(), "k", 0, size, 0, seconds=seconds, node="n", found=print,
                  probe=lambda: 1 / 0)
    assert not r.watching
    for step in range(1, 200):
        r.step_done(step)


@pytest.mark.parametrize("text, seconds", [
    (None, DEFAULT_ROUND), ("", DEFAULT_ROUND), ("30", 30.0), ("90s", 90.0), ("2m", 120.0),
    ("1m30s", 90.0), ("off", None), (" OFF ", None)])
def test_the_round_s_variable(text, seconds) -> None:
    env = {} if text is None else {VARIABLE: text}
    assert round_seconds(env) == seconds


@pytest.mark.parametrize("text", ["0", "-5", "auto", "x", "1.5", "0s"])
def test_a_bad_round_names_the_variable(text) -> None:
    with pytest.raises(VariableError) as e:
        round_seconds({VARIABLE: text})
    assert str(e.value).startswith(f"{VARIABLE}={text!r}: expected the seconds of training "
                                   "between two slow-rank rounds (e.g. 45, '90s', '2m'; "
                                   "default 45), or 'off'")


def test_the_probe_times_its_work() -> None:
    ticks = iter([2.0, 3.5])
    assert cpu_probe(1000, clock=lambda: next(ticks)) == 1.5
    assert 0 < cpu_probe(10_000) < cpu_probe(1_000_000)


def test_the_node_s_name(monkeypatch) -> None:
    monkeypatch.setattr("socket.gethostname", lambda: "host7")
    assert node_name({"SLURMD_NODENAME": "node2"}) == "node2"
    assert node_name({}) == "host7"
