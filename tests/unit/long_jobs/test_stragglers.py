"""long_jobs.stragglers: a rank slower than FACTOR times its peers' median in MAJORITY of its
last WINDOW rounds is named once, with its node and the times of its median round; noise, a
slow round now and then, fewer than two ranks and a recovered rank (a whole window of rounds
not slow) raise nothing (until it slows down again); a rank near the factor is said once."""

from __future__ import annotations

from typing import Dict, List

import pytest

from mpi_resolver.long_jobs.stragglers import FACTOR, MAJORITY, WINDOW, Slow, Stragglers

pytestmark = pytest.mark.unit

NODES = {0: "node1", 1: "node2", 2: "node3"}
SLOW, EVEN = {0: 1.0, 1: 2.0, 2: 1.0}, {0: 1.0, 1: 1.0, 2: 1.0}
NAMED = Slow(1, "node2", 2.0, 1.0, MAJORITY, WINDOW)


def rounds(watch: Stragglers, times: List[Dict[int, float]]) -> List[List[Slow]]:
    return [watch.add(t) for t in times]


def test_the_rule_s_numbers() -> None:
    assert (FACTOR, WINDOW, MAJORITY) == (1.2, 5, 3)


def test_a_rank_slow_from_its_first_round_is_named_at_the_majority_once() -> None:
    said = rounds(Stragglers(NODES), [SLOW] * (WINDOW + 2))
    assert said[:MAJORITY - 1] == [[]] * (MAJORITY - 1)
    assert said[MAJORITY - 1] == [NAMED]
    assert said[MAJORITY:] == [[]] * (WINDOW + 2 - MAJORITY)  # said once


@pytest.mark.parametrize("slow, named", [
    (FACTOR * 1.0, False),          # at the factor: not slow
    (FACTOR * 1.0 + 0.001, True),   # beyond it
])
def test_the_factor_on_each_side(slow, named) -> None:
    said = rounds(Stragglers(NODES), [{0: 1.0, 1: slow, 2: 1.0}] * MAJORITY)
    assert bool(said[-1]) is named


@pytest.mark.parametrize("order, named_at", [
    ("SSS", 2), ("SESES", 4), ("EESSS", 4), ("SSEES", 4), ("SSEEES", None),
    ("SEESEESEE", None), ("ESESESE", 5), ("EEEE", None), ("SS", None),
])
def test_a_majority_of_the_window_s_rounds(order, named_at) -> None:
    said = rounds(Stragglers(NODES), [SLOW if c == "S" else EVEN for c in order])
    assert [i for i, s in enumerate(said) if s] == ([] if named_at is None else [named_at])


def test_one_fast_round_does_not_clear_a_slow_rank() -> None:
    watch = Stragglers(NODES)
    said = rounds(watch, [SLOW] * MAJORITY + [EVEN] + [SLOW] * 3)
    assert [bool(s) for s in said] == [False, False, True, False, False, False, False]


def test_a_recovered_rank_is_said_again_when_it_slows_down_again() -> None:
    watch = Stragglers(NODES, window=3)  # a majority of 2
    slow, even = {0: 1.0, 1: 2.0}, {0: 1.0, 1: 1.0}
    named = [Slow(1, "node2", 2.0, 1.0, 2, 3)]
    assert rounds(watch, [slow, slow, even, even, even, slow, slow]) == [
        [], named, [], [], [], [], named]  # three rounds not slow: recovered
    watch = Stragglers(NODES, window=3)
    assert rounds(watch, [slow, slow, even, even, slow, slow, slow]) == [
        [], named, [], [], [], [], []]  # never a whole window not slow: said once


def test_a_rank_near_the_factor_is_said_once() -> None:
    said = rounds(Stragglers(NODES), [SLOW, SLOW, SLOW] + [EVEN, SLOW] * 10)
    assert [i for i, s in enumerate(said) if s] == [2]


def test_the_times_said_are_the_median_round_s() -> None:
    watch = Stragglers(NODES, window=3)
    said = rounds(watch, [{0: 1.0, 1: 3.0}, {0: 2.0, 1: 5.0}, {0: 1.0, 1: 4.0}])
    assert said[1] == [Slow(1, "node2", 3.0, 1.0, 2, 3)]  # ratios 3, 2.5: the upper one
    watch = Stragglers(NODES)
    said = rounds(watch, [{0: 1.0, 1: 3.0}, {0: 2.0, 1: 5.0}, {0: 1.0, 1: 4.0}])
    assert said[2] == [Slow(1, "node2", 3.0, 1.0, 3, 5)]  # ratios 3, 2.5, 4: the round of 3
    watch = Stragglers(NODES)
    said = rounds(watch, [EVEN, {0: 1.0, 1: 3.0}, {0: 1.0, 1: 4.0}, {0: 1.0, 1: 2.0}])
    assert said[3] == [Slow(1, "node2", 3.0, 1.0, 3, 5)]  # ratios 1, 3, 4, 2: the upper


@pytest.mark.parametrize("times", [
    {0: 5.0},                  # one rank: no peers
    {0: 0.0, 1: 0.5},          # peers that took no time: no ratio
    {0: 1.0, 1: 1.1, 2: 0.95},  # noise
])
def test_nothing_to_name(times) -> None:
    assert all(s == [] for s in rounds(Stragglers(NODES, window=1), [times] * 3))


def test_a_rank_without_a_node_and_its_line() -> None:
    slow = Stragglers({}, window=1).add({0: 1.0, 1: 1.5})
    assert slow == [Slow(1, None, 1.5, 1.0, 1, 1)]
    assert slow[0].line() == ("rank 1 is slow: 1.5 s for what its peers do in 1 s (1.50 "
                              "times their median), slow in 1 of its last 1 rounds")
    assert Slow(2, "node3", 0.13, 0.1).line() == (
        "rank 2 on node3 is slow: 0.13 s for what its peers do in 0.1 s (1.30 times their "
        f"median), slow in {MAJORITY} of its last {WINDOW} rounds")


def test_two_slow_ranks_of_many() -> None:
    times = {r: 1.0 for r in range(8)} | {3: 2.0, 6: 1.5}
    assert Stragglers({}, window=1).add(times) == [Slow(3, None, 2.0, 1.0, 1, 1),
                                                   Slow(6, None, 1.5, 1.0, 1, 1)]
