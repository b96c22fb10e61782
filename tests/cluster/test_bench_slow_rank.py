"""The slow-rank test, for real (issue 40): benchmarks/slow_rank.py on its own throw-away
cluster, rounds every 2 s of training: two steps of examples/train.py on two emulated nodes
side by side, worker 1 of one held to 70 % of its time. Its rank is named (node, ratio)
within BOUND seconds, in the log and in `mpi-resolver report` (docs/long-jobs.md's lines) and
its --json; the clean step, trained at least as long on the same loaded cores, names
nobody."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from mpi_resolver.long_jobs.stragglers import FACTOR, MAJORITY, WINDOW
from tests.cluster.conftest import ROOT
from tests.docs.blocks import assert_sample, block

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

ROUND = 2.0
#: Seconds from the limit to the naming: MAJORITY rounds, and one begun before (a round is
#: ROUND s of training, and the probe adds 0.2-0.5 s): about 10 s; measured 5.7-8.7 s (2026-11-28,
#: 2 cores). The bound leaves a loaded machine several times that.
BOUND = 80.0


def test_a_rank_held_to_70_percent_is_named_and_a_clean_run_names_nobody(tmp_path: Path):
    out = tmp_path / "slow_rank.json"
    run = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "slow_rank.py"),
                          "--round", f"{ROUND:g}", "--json", str(out)], capture_output=True,
                         text=True, timeout=600, cwd=ROOT, stdin=subprocess.DEVNULL)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    r = json.loads(out.read_text())
    assert r["node"] == "node2" and r["window"] == WINDOW and r["rounds"] >= MAJORITY
    # the line prints both times to 3 significant figures (each off by up to 0.5 %) and the
    # ratio, of the unrounded times, to 0.01 (CI, 2026-11-29: 1.49 beside a quotient of 1.5)
    quotient = r["rank_s"] / r["probe_s"]
    assert r["ratio"] > FACTOR and abs(r["ratio"] - quotient) <= 0.0101 * quotient + 0.005, r
    assert r["named_after_s"] < BOUND, r
    assert r["report_slow_ranks"] == 1
    assert r["clean_alarms"] == 0 and r["clean_rounds_about"] >= WINDOW, r
    assert f"| named after the limit (s) | {r['named_after_s']:.1f} |" in run.stdout
    assert_sample(block("slow-rank-lines"), run.stdout)  # docs/long-jobs.md's lines
