"""tests.harness.paced_train: a step held to the pace, never more."""

from __future__ import annotations

from typing import List

import pytest

from tests.harness.paced_train import PACE, paced, split_pace


@pytest.mark.parametrize("step_seconds, slept", [
    pytest.param(0.125, [0.125], id="a short step: the rest of the pace is slept"),
    pytest.param(0.25, [], id="a step of exactly the pace: no sleep"),
    pytest.param(1.0, [], id="a long step: no sleep"),
])
def test_a_step_is_held_to_the_pace(step_seconds: float, slept: List[float]) -> None:
    now, sleeps, ticks = [100.0], [], []

    def sleep(seconds: float) -> None:
        sleeps.append(round(seconds, 6))
        now[0] += seconds

    tick = paced(lambda: ticks.append(now[0]), 0.25, clock=lambda: now[0], sleep=sleep)
    now[0] += step_seconds  # the step
    tick()
    assert sleeps == slept
    assert ticks == [100.0 + max(step_seconds, 0.25)]  # the step's own tick, after the pace


def test_the_pace_counts_from_the_last_tick() -> None:
    now, sleeps = [0.0], []
    tick = paced(lambda: None, 0.25, clock=lambda: now[0],
                 sleep=lambda s: (sleeps.append(round(s, 6)), now.__setitem__(0, now[0] + s)))
    for step in (0.125, 0.0625, 0.5):
        now[0] += step
        tick()
    assert sleeps == [0.125, 0.1875]


@pytest.mark.parametrize("argv, pace, rest", [
    (["train.py", "--epochs", "1"], PACE, ["train.py", "--epochs", "1"]),
    (["--pace", "0.05", "train.py", "--epochs", "1"], 0.05, ["train.py", "--epochs", "1"]),
    (["--pace", "0", "train.py"], 0.0, ["train.py"]),
    (["train.py", "--pace", "1"], PACE, ["train.py", "--pace", "1"]),  # train.py's own
])
def test_the_pace_argument(argv: List[str], pace: float, rest: List[str]) -> None:
    assert split_pace(argv) == (pace, rest)


@pytest.mark.parametrize("argv", [["--pace", "-0.01", "t.py"], ["--pace", "fast", "t.py"],
                                  ["--pace"], ["--pace", "nan", "t.py"]])
def test_a_bad_pace_is_refused_by_name(argv: List[str]) -> None:
    with pytest.raises(SystemExit, match="--pace takes seconds >= 0"):
        split_pace(argv)
