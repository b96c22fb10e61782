"""benchmarks/background_saves.py: the goal line on both sides of each goal, the slower
worker's figures, and what a real run must show (assert_measured: every figure measured and
consistent, the table printed as the JSON says), checked on benchmarks/run.sh --quick's runs
by tests/test_readme_commands.py. The figures themselves are judged by the full run (docs)."""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path
from typing import Any, Dict, List

import pytest

pytestmark = pytest.mark.tf

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("background_saves",
                                               ROOT / "benchmarks" / "background_saves.py")
bench = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench)


def assert_measured(rows: List[Dict[str, Any]], stdout: str, workers: int) -> None:
    """Every figure of ``rows`` (one run's --json) measured, its ratios the figures', and its
    table and goal lines in ``stdout`` as the JSON says. benchmarks/run.sh --quick runs it on
    1 and 2 workers (tests/test_readme_commands.py calls this on both runs)."""
    for row in rows:
        assert row["workers"] == workers and row["steps"] >= 3 * row["every"], row
        for key in ("step_s", "at_once_save_s", "snapshot_s", "write_s", "dd_s"):
            assert row[key] > 0, (key, row)
        assert row["stall_vs_at_once"] == pytest.approx(row["background_paid_s"] /
                                                        row["at_once_paid_s"])
        assert row["write_vs_dd"] == pytest.approx(row["dd_s"] / row["write_s"])
        assert bench.goal_line(row) in stdout.splitlines(), row
    assert bench.table(rows) in stdout


@pytest.mark.parametrize("stall, write_vs_dd, verdict", [
    (0.1, 0.5, "met"),
    (0.1001, 0.5, "NOT met"),
    (0.1, 0.4999, "NOT met"),
    (math.nan, 0.5, "NOT met"),
])
def test_the_goal_line(stall: float, write_vs_dd: float, verdict: str) -> None:
    row = {"MiB": 100, "background_paid_s": 0.01, "at_once_paid_s": 0.1,
           "stall_vs_at_once": stall, "write_vs_dd": write_vs_dd}
    line = bench.goal_line(row)
    assert line.endswith(f": {verdict}"), line
    assert line.startswith("100 MiB: the training paid 0.010 s per save in the background "
                           "against 0.100 s at once")


def test_the_slower_worker_sets_the_figures() -> None:
    each = [{"rank": 1, "seconds": 5.0, "stalls": [0.1, 0.4], "measured": [9], "writes": [9]},
            {"rank": 0, "seconds": 4.0, "stalls": [0.3, 0.2], "measured": [1], "writes": [2]}]
    assert bench.slower(each) == {"rank": 0, "seconds": 5.0, "stalls": [0.3, 0.4],
                                  "measured": [1], "writes": [2]}
    assert bench.slower(each[1:]) == each[1]
