"""exchange.transport._wait, the exchange's wait for a non-blocking MPI request, on a fake
request and a fake clock: Test() back to back (the CPU yielded between) for the first _SPIN
seconds, then sleeps doubling to 5 ms; False at the deadline, True once the request is done."""

from __future__ import annotations

from typing import List

import pytest

from mpi_resolver.exchange import transport

pytestmark = pytest.mark.unit


class Clock:
    """time.monotonic and time.sleep: sleeping moves the clock; each Test() costs ``tick``."""

    def __init__(self, tick: float) -> None:
        self.now, self.tick = 0.0, tick
        self.slept: List[tuple] = []  # (when, seconds)

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append((self.now, seconds))
        self.now += seconds


class Request:
    def __init__(self, clock: Clock, done_after: int) -> None:
        self.clock, self.left = clock, done_after

    def Test(self, status: object = None) -> bool:  # noqa: N802 - mpi4py's name
        self.clock.now += self.clock.tick
        self.left -= 1
        return self.left < 0


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    fake = Clock(tick=0.001)
    monkeypatch.setattr(transport, "time", fake)
    return fake


@pytest.mark.parametrize("done_after, backs_off, sleeps", [
    pytest.param(0, False, [], id="done at once"),
    pytest.param(5, False, [], id="done within the spin"),
    pytest.param(150, False, [], id="done just within the spin's 0.2 s"),
    pytest.param(260, True, [0.0002, 0.0004, 0.0008, 0.0016, 0.0032, 0.005, 0.005],
                 id="past the spin: sleeps doubling to 5 ms"),
])
def test_spin_then_back_off(clock: Clock, done_after: int, backs_off: bool,
                            sleeps: list) -> None:
    assert transport._wait(Request(clock, done_after), deadline=60.0) is True
    yields = [at for at, s in clock.slept if s == 0]
    waits = [(at, s) for at, s in clock.slept if s > 0]
    assert len(yields) == min(done_after, len(yields)) and all(at < 0.2 for at in yields)
    assert bool(waits) == backs_off
    if waits:
        assert waits[0][0] >= 0.2 and max(yields) < waits[0][0]  # the spin, then the sleeps
        assert [s for _, s in waits][:len(sleeps)] == pytest.approx(sleeps)


def test_false_at_the_deadline(clock: Clock) -> None:
    assert transport._wait(Request(clock, 10**9), deadline=1.0) is False
    assert 0.9 <= clock.now <= 1.02
