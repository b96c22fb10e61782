"""benchmarks/background_saves.py for real with small settings: every figure measured and
consistent (the ratios are the figures'), the table printed as the JSON says; the goal line
on both sides of each goal. The figures themselves are judged by the full run (docs)."""

from __future__ import annotations

import importlib.util
import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.tf

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("background_saves",
                                               ROOT / "benchmarks" / "background_saves.py")
bench = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench)


def test_the_benchmark_measures_and_prints(tmp_path) -> None:
    """One worker here; two under mpirun in benchmarks/run.sh --quick (tests/
    test_readme_commands.py), which checks that run's figures."""
    out = tmp_path / "bg.json"
    run = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "background_saves.py"),
                          "--mib", "4", "--steps", "30", "--every", "10", "--repeat", "1",
                          "--json", str(out)], capture_output=True, text=True, timeout=900,
                         cwd=ROOT)
    assert run.returncode == 0, run.stderr[-3000:]
    row, = json.loads(out.read_text())
    assert row["MiB"] == 4 and row["every"] >= 10 and row["steps"] >= 3 * row["every"]
    assert row["workers"] == 1 and "(one worker; a save every" in run.stdout
    for key in ("step_s", "at_once_save_s", "snapshot_s", "write_s", "dd_s"):
        assert row[key] > 0, key
    assert row["stall_vs_at_once"] == pytest.approx(row["background_paid_s"] /
                                                    row["at_once_paid_s"])
    assert row["write_vs_dd"] == pytest.approx(row["dd_s"] / row["write_s"])
    line = next(ln for ln in run.stdout.splitlines() if ln.startswith("| write_s |"))
    assert line == f"| write_s | {row['write_s']:.4g} |"
    assert run.stdout.rstrip().splitlines()[-1].startswith("4 MiB: the training paid ")


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
