"""benchmarks/preemption.py for real with its smallest settings: one repetition of
examples/train.py's model on the script's own throw-away cluster (signal after the first
step, one step after the resume); about 20-40 s on 2 cores. The figures are not judged here,
only that they are measured, consistent, and printed as written."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.cluster.conftest import PY, ROOT

sys.path.insert(0, str(ROOT / "benchmarks"))

from preemption_trainer import hidden_width  # noqa: E402 - benchmarks/ is not a package

pytestmark = [pytest.mark.cluster, pytest.mark.slow]
#: examples/train.py's model: Dense(64) on 64 inputs, Dense(10); float32.
EXAMPLE_BYTES = 4 * (64 * 64 + 64 + 64 * 10 + 10)


def row(stdout: str, label: str) -> str:
    """Returns the printed table's cell for the row starting with ``label``."""
    line = next(ln for ln in stdout.splitlines() if ln.startswith(f"| {label}"))
    return line.split("|")[2].strip()


def test_preemption_benchmark_one_requeue(tmp_path: Path) -> None:
    """Signal, save, requeue, resume for real: no check fails (exit 0: Restarts=1, the
    resumed run restored the step saved, the job completed), no step is lost, the requeue
    comes after the checkpoint is on disk, Slurm's BeginTime is read from the job, and the
    table shows the JSON's figures."""
    out = tmp_path / "preemption.json"
    started = time.monotonic()
    proc = subprocess.run(
        [PY, "benchmarks/preemption.py", "--repeat", "1", "--model", "example",
         "--signal-at-step", "1", "--steps-after-resume", "1", "--json", str(out)],
        capture_output=True, text=True, timeout=300, cwd=ROOT, stdin=subprocess.DEVNULL)
    seconds = time.monotonic() - started
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    [c] = json.loads(out.read_text())["cycles"]
    assert c["checks"] == [] and c["model"] == "example", c
    assert c["variable_bytes"] == EXAMPLE_BYTES, c
    assert 0 < c["signal_to_saved"] <= c["signal_to_requeued"] < c["grace_period"], c
    assert c["steps_saved"] >= c["steps_at_signal"] >= 1 and c["steps_lost"] == 0, c
    assert c["begin_time"] == 121, c  # CredExpire 120 s + 1: Slurm's, read from the job
    for run in ("fresh", "resumed"):
        parts = sum(c[f"{run}_{p}"] for p in ("launch", "setup", "model", "handler",
                                              "first_step"))
        assert parts == pytest.approx(c[f"{run}_total"]), (run, c)
    assert 0 < c["requeue_to_pending"] < c["requeue_to_start"], c
    assert c["start_updates"] >= 1, c  # the job started on StartTime=now, not by itself
    assert row(proc.stdout, "signal -> checkpoint on disk") == f"{c['signal_to_saved']:.2f} s"
    assert row(proc.stdout, "steps lost") == "0"
    # A figure, not a check: the requeue's SIGTERM may end scontrol before it answers.
    said = "yes (1/1)" if c["requeue_said"] == "requeued" else "NO (0/1)"
    assert row(proc.stdout, "the package's exit line says the job was requeued") == said
    assert re.search(r"\| example: 0\.02 MiB of variables, checkpoint [\d.]+ MiB \(n=1\) \|",
                     proc.stdout), proc.stdout
    assert row(proc.stdout, "requeue -> next run's first line, Slurm's own") == \
        "not measured (--real-wait)"
    table = proc.stdout[proc.stdout.index("| measure |"):].split("\n\nwritten:")[0]
    assert table.strip() in out.with_suffix(".md").read_text()
    print(f"benchmarks/preemption.py, smallest settings: {seconds:.1f} s")


def test_large_model_width_gives_the_size_asked() -> None:
    """Two hidden layers of hidden_width(M) hold M MiB of float32 variables, within 0.1 %."""
    for mib in (10, 100, 400):
        w = hidden_width(mib)
        params = 64 * w + w + w * w + w + w * 10 + 10
        assert 4 * params / 2 ** 20 == pytest.approx(mib, rel=1e-3), (mib, w)
