"""benchmarks/tier_common.py's pure parts: the steps and seconds of training a failure would
have lost on the mean, the interval an 'auto' plan says, the kill's lines and the goal's
verdict on both sides."""
from __future__ import annotations

import importlib
import sys
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
common = importlib.import_module("tier_common")

PLAN = ("(auto): every 1.4 s = 28 steps of 0.051 s (Young: sqrt(2 x C 0.06 s x M 0.005 h)); "
        "expected overhead 8.03 %")


@pytest.mark.parametrize("steps, saves, expected", [
    ([], [(5, 1.0)], (None, None)),                               # no step
    ([(1, 1.0), (2, 2.0)], [], (None, None)),                     # no save
    ([(5, 1.0)], [(5, 1.5)], (None, None)),                       # a save not yet whole
    ([(5, 1.5)], [(5, 1.5)], (0, None)),                          # whole then; no step's span
    ([(5, 1.5), (6, 2.0), (7, 2.5)], [(5, 1.5)], (1, 0.5)),       # t - 1.5 over (1.5, 2.5]
    ([(4, 1.0), (6, 2.0), (12, 3.0)], [(2, 0.5), (6, 2.5)], (4, 0.5)),  # step 2 not timed
    # weighed by each step's length: (0.25 x 0.5 + 1.0 x 1 + 0.5 x 1) / 2.5
    ([(2, 0.5), (4, 1.0), (6, 2.0), (12, 3.0)], [(2, 0.5), (6, 2.5)], (3, 0.65)),
    ([(3, 1.0), (6, 2.0), (9, 3.0)], [(6, 2.0), (3, 1.0)], (1, 0.25)),  # newest, any order
    ([(1, 0.0), (2, 1.0), (3, 4.0)], [(1, 0.0)], (1, 2.0)),  # the mean of t over (0, 4]: not 1.5
])
def test_the_mean_lost_in_steps_and_seconds(steps: Sequence[Tuple[int, float]],
                                            saves: Sequence[Tuple[int, float]],
                                            expected: Tuple[Optional[float], Optional[float]]
                                            ) -> None:
    assert common.mean_lost(steps, saves) == pytest.approx(expected)


@pytest.mark.parametrize("output, expected", [
    ("", []),
    ("STEP 3 17.5\nother\nSTEP 4 18.25\n", [(3, 17.5), (4, 18.25)]),
    ("1: STEP 3 17.5\n STEP 4 1.0\n", []),                   # the mark starts the line
])
def test_the_step_lines(output: str, expected: List[Tuple[int, float]]) -> None:
    assert common.step_times(output) == expected


@pytest.mark.parametrize("plan, expected", [
    (PLAN, (1.4, 28)), ("every 1 s", (1.0, None)), ("= 1 steps of", (None, 1)),
    ("every 12 s = 40 steps", (12.0, 40)), ("every s = x steps", (None, None))])
def test_the_planned_interval(plan: str, expected: Tuple[Optional[float], Optional[int]]
                              ) -> None:
    assert common.planned(plan) == expected


def test_the_kill_figures_from_the_output_and_the_ledger(tmp_path: Path) -> None:
    from mpi_resolver.long_jobs import ledger

    for step, at in ((10, 5.0), (20, 9.0), (30, 99.0)):
        ledger.append(str(tmp_path), {"event": "save", "step": step, "time": at})
    ledger.append(str(tmp_path), {"event": "restore", "step": 20, "time": 100.0})
    output = (f"x periodic checkpoints every 9 s = 40 steps\nSTEP 10 5.0\nSTEP 21 9.5\n"
              f"y periodic checkpoints {PLAN}\nSTEP 25 12.0\nSTEP 26 100.0\n")
    assert common.kill_figures(output, str(tmp_path), 25, 20) == {
        "plans": ["every 9 s = 40 steps", PLAN], "interval": 28, "interval_s": 1.4,
        "per_failure": 2, "per_failure_s": None,  # no time of step 20, no span of step 10
        "steps": [(10, 5.0), (21, 9.5), (25, 12.0)],
        "saves": [(10, 5.0), (20, 9.0), (30, 99.0)]}
    assert common.kill_figures("", str(tmp_path / "none"), 25, 0) == {
        "plans": [], "interval": None, "interval_s": None, "per_failure": None,
        "per_failure_s": None, "steps": [], "saves": []}


@pytest.mark.parametrize("restored, recorded, expected", [
    (0, None, None),   # nothing restored: no save whole
    (10, None, 5),     # whole by the kill's step alone: 15 - 10 there, nothing at step 12
    (10, 2.5, 5),      # recorded after the last step (the survivor's write): the same
    (10, 0.5, 3.5),    # recorded within the run, and kept so: 12 - 10 at 1.0, 15 - 10 at 2.0
    (0, 2.5, None),    # a save the next run did not restore: whole when recorded
])
def test_a_restored_step_counts_as_whole_by_the_kill(
        tmp_path: Path, restored: int, recorded: Optional[float],
        expected: Optional[float]) -> None:
    from mpi_resolver.long_jobs import ledger

    if recorded is not None:
        ledger.append(str(tmp_path), {"event": "save", "step": 10, "time": recorded})
    output = "STEP 12 1.0\nSTEP 15 2.0\n"
    got = common.kill_figures(output, str(tmp_path), 15, restored)
    assert (got["per_failure"], got["per_failure_s"]) == (expected, None)  # 10 not timed


def kill(tiered: bool, seconds: Optional[float], interval_s: Optional[float], lost: int = 3,
         steps: Optional[float] = 10.0) -> Dict[str, Any]:
    return {"mib": 100, "tiered": tiered, "killed_at": 80, "restored": 80 - lost, "lost": lost,
            "plans": ["first", "last"], "interval": 20, "interval_s": interval_s,
            "per_failure": steps, "per_failure_s": seconds}


@pytest.mark.parametrize("tier, shared, said", [
    ((0.9, 2.0), (2.7, 2.8), "met (0.90 s against 2.70 s on the mean, cut 3.00 x; the "
                             "intervals' ratio 1.40; in steps 10.0 steps (0.90 s) against "
                             "10.0 steps (2.70 s); at the kill 3 against 3 steps)"),
    ((2.69, 2.0), (2.7, 2.8), "met (2.69 s against 2.70 s"),
    ((2.7, 2.0), (2.7, 2.8), "not met (2.70 s against 2.70 s"),
    ((None, None), (2.7, 2.8), "not met (- s against 2.70 s on the mean, cut - x; the "
                               "intervals' ratio -"),
    ((0.9, 2.0), (None, 2.8), "not met (0.90 s against - s on the mean, cut - x"),
    ((0.9, 2.0), (2.7, None), "met (0.90 s against 2.70 s on the mean, cut 3.00 x; the "
                              "intervals' ratio -"),
    ((0.0, 2.0), (1.0, 2.8), "met (0.00 s against 1.00 s on the mean, cut - x"),
])
def test_the_lost_goal_on_both_sides(tier: tuple, shared: tuple, said: str) -> None:
    lines = common.lost_goals([kill(False, *shared), kill(True, *tier)])
    assert len(lines) == 1
    assert lines[0].startswith("goal at 100 MiB: less training lost per failure with the "
                               "tier: ")
    assert said in lines[0], lines[0]


def test_no_goal_without_both_kills() -> None:
    assert common.lost_goals([kill(True, 1.0, 2)]) == []


@pytest.mark.parametrize("plan, said", [
    ("first", "'auto' chose: first"), ("last", "'auto' chose last: last")])
def test_the_kill_lines(plan: str, said: str) -> None:
    lines = common.kill_lines([kill(False, 2.725, 2.8, 24, 27.25), kill(True, None, None,
                                                                          steps=None)],
                              "shared only", plan)
    assert lines[0] == ("  kill at step 80 (100 MiB, shared only): restored step 56, 24 steps "
                        "lost; a failure at any step of the run would have lost 27.2 steps "
                        f"(2.73 s) on the mean; {said}")
    assert "(100 MiB, with the tier)" in lines[1]
    assert "would have lost - steps (- s) on the mean" in lines[1]


@pytest.mark.parametrize("mbit, said", [(1000, "a file server on a 1000 Mbit/s link"),
                                        (0, "this machine's disk")])
def test_where_the_shared_directory_is(mbit: int, said: str) -> None:
    assert common.shared_where(mbit) == said
