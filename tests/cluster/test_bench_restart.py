"""benchmarks/restart.py for real, one repetition on its own throw-away cluster: a worker
SIGKILLed, supervise's rerun, the resume from the periodic checkpoint; its figures are
measured and consistent, and the table prints the JSON's (the figures are not judged)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cluster.conftest import ROOT

pytestmark = [pytest.mark.cluster, pytest.mark.slow]


def test_the_restart_benchmark_measures_a_killed_worker(tmp_path: Path) -> None:
    out = tmp_path / "restart.json"
    run = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "restart.py"), "--repeat",
                          "1", "--json", str(out)], capture_output=True, text=True, timeout=600,
                         cwd=ROOT, stdin=subprocess.DEVNULL)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    [r] = json.loads(out.read_text())
    assert r["steps_lost"] == r["killed_after"] - r["resumed_at"] <= r["interval_steps"] + 1
    assert r["resumed_at"] % r["interval_steps"] == 0 and r["killed_after"] >= 25
    assert 0 < r["kill_to_next_run_s"] < r["kill_to_first_step_s"]
    assert r["fresh_start_to_first_step_s"] > 0
    for key in ("kill_to_next_run_s", "kill_to_first_step_s", "steps_lost"):
        assert f"| {key} | {r[key]:.1f} |" in run.stdout, run.stdout
