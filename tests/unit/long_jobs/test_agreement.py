"""long_jobs.agreement: process 0's value for all, every process's value, and process 0 last
out where every process ends after an agreement, over a dict standing for the key-value store
(the real ones, TensorFlow's and JAX's coordination services, run in tests/cluster and
tests/jax)."""

from __future__ import annotations

from typing import Any, Callable, List, Optional, Tuple
from unittest import mock

import pytest

from mpi_resolver.core.errors import ResolutionError
from mpi_resolver.long_jobs import agreement
from mpi_resolver.long_jobs.agreement import chief_value

pytestmark = pytest.mark.unit


def store(stored: dict) -> Tuple[dict, List[tuple], Callable[[str, float], Optional[str]]]:
    """Returns a key-value store holding ``stored``, the (key, seconds) of each read of it
    in order, and its reader."""
    put: dict = dict(stored)
    asked: List[tuple] = []

    def get(key: str, seconds: float) -> Optional[str]:
        asked.append((key, seconds))
        return put.get(key)

    return put, asked, get


def ticking() -> Any:
    """Patches agreement's clock to move 1 s per reading."""
    clock = iter(range(100))
    return mock.patch.object(agreement.time, "monotonic", lambda: float(next(clock)))


@pytest.mark.parametrize("chief, stored, who, expected", [
    (True, {}, "worker 0", "mine"),
    (False, {"k": "chief's"}, "worker 0", "chief's"),
    (False, {}, "worker 0", "worker 0 did not say the plan within 2.5 s: is it still running?"),
    (False, {}, "process 0", "process 0 did not say the plan within 2.5 s"),
])
def test_chief_value(chief: bool, stored: dict, who: str, expected: str) -> None:
    put, asked = {}, []

    def get(key: str, seconds: float):
        asked.append((key, seconds))
        return stored.get(key)

    try:
        got = chief_value(chief, put.__setitem__, get, "k", "mine", what="the plan",
                          seconds=2.5, who=who)
    except ResolutionError as e:
        got = str(e)
    assert got.startswith(expected), got
    assert put == ({"k": "mine"} if chief else {})
    assert asked == ([] if chief else [("k", 2.5)])


@pytest.mark.parametrize("rank, stored, who, expected, waits", [
    (0, {"k/1": "b", "k/2": "c"}, "worker", ["mine", "b", "c"], [2.0, 1.0, 0.001]),
    (2, {"k/0": "a", "k/1": "b"}, "worker", ["a", "b", "mine"], [2.0, 1.0, 0.001]),
    (0, {"k/2": "c"}, "worker",
     "worker 1 did not say their steps within 3 s: is it still running?", [2.0, 1.0]),
    (1, {"k/0": "a"}, "process", "process 2 did not say their steps within 3 s: is it still "
                                 "running?", [2.0, 1.0, 0.001]),
])
def test_all_values(rank: int, stored: dict, who: str, expected, waits: list) -> None:
    """Every worker's value in rank order, its own put first; one bound for them all, each
    wait what is left of it (a clock that moves 1 s per reading; at least 1 ms)."""
    put, asked, get = store(stored)
    with ticking():
        try:
            got = agreement.all_values(rank, 3, put.__setitem__, get, "k", "mine",
                                       what="their steps", seconds=3.0,
                                       **({} if who == "worker" else {"who": who}))
        except ResolutionError as e:
            got = str(e)
    assert got == expected
    assert put[f"k/{rank}"] == "mine"
    assert asked == [(f"k/{r}", w) for r, w in enumerate(waits)]


@pytest.mark.parametrize("rank, stored, missing, waits", [
    (1, {}, [], []),  # another process says it and goes: no wait
    (2, {}, [], []),
    (0, {"k/1": "read", "k/2": "read"}, [], [2.0, 1.0]),
    (0, {"k/2": "read"}, [1], [2.0, 1.0]),  # process 1 died: the bound, then the exit
    (0, {}, [1, 2], [2.0, 1.0]),
    (0, {"k/1": "read"}, [2], [2.0, 1.0]),
])
def test_leave_last(rank: int, stored: dict, missing: list, waits: list) -> None:
    """Process 0 ends once every other said it read all (one bound for all, each wait what is
    left of it); the others say so and go at once."""
    put, asked, get = store(stored)
    with ticking():
        got = agreement.leave_last(rank, 3, put.__setitem__, get, "k", seconds=3.0)
    assert got == missing
    assert asked == [(f"k/{r}", w) for r, w in zip((1, 2)[:len(waits)], waits, strict=True)]
    assert put == ({**stored, f"k/{rank}": "read"} if rank else stored)


def test_leave_last_alone_waits_for_nobody() -> None:
    def get(key: str, seconds: float):
        raise AssertionError("process 0 alone asks for nothing")

    assert agreement.leave_last(0, 1, {}.__setitem__, get, "k", seconds=3.0) == []
