"""long_jobs.stragglers: a rank slower than its peers' median by more than FACTOR in WINDOW
rounds in a row is named once, with its node and both times; noise, a single slow round,
fewer than two ranks and a recovered rank raise nothing (until it slows down again)."""

from __future__ import annotations

from typing import Dict, List

import pytest

from mpi_resolver.long_jobs.stragglers import FACTOR, WINDOW, Slow, Stragglers

pytestmark = pytest.mark.unit

NODES = {0: "node1", 1: "node2", 2: "node3"}


def rounds(watch: Stragglers, times: List[Dict[int, float]]) -> List[List[Slow]]:
    return [watch.add(t) for t in times]


def test_a_rank_slow_in_window_rounds_is_named_once() -> None:
    watch = Stragglers(NODES)
    said = rounds(watch, [{0: 1.0, 1: 1.43, 2: 1.0}] * (WINDOW + 2))
    assert said[:WINDOW - 1] == [[]] * (WINDOW - 1)
    assert said[WINDOW - 1] == [Slow(1, "node2", 1.43, 1.0)]
    assert said[WINDOW:] == [[], []]  # said once


@pytest.mark.parametrize("slow, named", [
    (FACTOR * 1.0, False),          # at the factor: not slow
    (FACTOR * 1.0 + 0.001, True),   # beyond it
])
def test_the_factor_on_each_side(slow, named) -> None:
    said = rounds(Stragglers(NODES), [{0: 1.0, 1: slow, 2: 1.0}] * WINDOW)
    assert bool(said[-1]) is named


def test_one_fast_round_starts_the_count_again() -> None:
    watch = Stragglers(NODES)
    slow, even = {0: 1.0, 1: 2.0, 2: 1.0}, {0: 1.0, 1: 1.0, 2: 1.0}
    said = rounds(watch, [slow] * (WINDOW - 1) + [even] + [slow] * (WINDOW - 1))
    assert all(s == [] for s in said)
    assert watch.add(slow) == [Slow(1, "node2", 2.0, 1.0)]


def test_a_recovered_rank_is_said_again_when_it_slows_down_again() -> None:
    watch = Stragglers(NODES, window=2)
    slow, even = {0: 1.0, 1: 2.0}, {0: 1.0, 1: 1.0}
    assert rounds(watch, [slow, slow, even, slow, slow]) == [
        [], [Slow(1, "node2", 2.0, 1.0, 2)], [], [], [Slow(1, "node2", 2.0, 1.0, 2)]]


def test_the_times_said_are_the_window_s_medians() -> None:
    watch = Stragglers(NODES, window=3)
    said = rounds(watch, [{0: 1.0, 1: 3.0}, {0: 2.0, 1: 5.0}, {0: 1.0, 1: 4.0}])
    assert said[-1] == [Slow(1, "node2", 4.0, 1.0, 3)]


@pytest.mark.parametrize("times", [
    {0: 5.0},                  # one rank: no peers
    {0: 0.0, 1: 0.5},          # peers that took no time: no ratio
    {0: 1.0, 1: 1.1, 2: 0.95},  # noise
])
def test_nothing_to_name(times) -> None:
    assert all(s == [] for s in rounds(Stragglers(NODES, window=1), [times] * 3))


def test_a_rank_without_a_node_and_its_line() -> None:
    slow = Stragglers({}, window=1).add({0: 1.0, 1: 1.5})
    assert slow == [Slow(1, None, 1.5, 1.0, 1)]
    assert slow[0].line() == ("rank 1 is slow: 1.5 s for what its peers do in 1 s (1.50 "
                              "times the median) in each of the last 1 round")
    assert Slow(2, "node3", 0.13, 0.1).line().startswith(
        "rank 2 on node3 is slow: 0.13 s for what its peers do in 0.1 s (1.30 times")
    assert Slow(2, "node3", 0.13, 0.1).line().endswith(f"the last {WINDOW} rounds")


def test_two_slow_ranks_of_many() -> None:
    times = {r: 1.0 for r in range(8)} | {3: 2.0, 6: 1.5}
    assert Stragglers({}, window=1).add(times) == [Slow(3, None, 2.0, 1.0, 1),
                                                   Slow(6, None, 1.5, 1.0, 1)]
