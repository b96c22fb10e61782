"""benchmarks/jax_init.py, quick, for real: one repetition of its three start-up modes on its
own throw-away 2-node cluster and one short training run each, printing measured figures (the
ratios against JAX's own detection, the parts, the verdict line) and writing them to --json;
and its refusals of arguments that could measure nothing."""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
from pathlib import Path

import pytest

from tests.jax.conftest import ROOT
from tests.jax.test_edge import clean_env

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

BENCH = str(ROOT / "benchmarks" / "jax_init.py")
VERDICT = (r"^goal: initialize\(\) within 1\.2x of JAX's own detection: "
           r"(met|not met|borderline \([12] of the 3 figures within\)) \(x\d+\.\d\d of medians")


def test_the_quick_benchmark_measures_and_judges(jax_python: str, tmp_path: Path) -> None:
    out = tmp_path / "jax_init.json"
    p = subprocess.run([jax_python, BENCH, "--repeat", "1", "--fit-repeat", "1",
                        "--fit-epochs", "2", "--fit-steps", "100", "--json", str(out)],
                       capture_output=True, text=True, timeout=600, env=clean_env(),
                       cwd=ROOT)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    text = p.stdout
    for mode in ("package", "package-slurm", "jax-own"):
        assert re.search(rf"^  {mode} +initialised \d+\.\d\d s \[", text, re.M), text
    assert re.search(VERDICT, text, re.M), text
    assert re.search(r"Keras 3 fit on JAX \d+\.\d .*TensorFlow custom loop \d+\.\d", text), text
    found = json.loads(out.read_text())
    assert {"package", "package-slurm", "jax-own", "steps_per_second"} <= set(found)
    package = re.search(r"^  package +initialised (\d+\.\d\d) s", text, re.M)
    assert package and float(package.group(1)) > 0  # measured, not a constant


@pytest.mark.parametrize("args, says", [
    (["--fit-epochs", "1"], "--fit-epochs must be 0 (no training runs) or at least 2"),
    (["--repeat", "0"], "--repeat must be at least 1"),
    (["--fit-steps", "0"], "--fit-steps must be at least 1"),
])
def test_arguments_that_measure_nothing_are_refused(jax_python: str, args: list,
                                                    says: str) -> None:
    p = subprocess.run([jax_python, BENCH, *args], capture_output=True, text=True,
                       timeout=60, env=clean_env())
    assert p.returncode == 2 and says in p.stderr, p.stderr


def jax_init_report():
    """Returns benchmarks/jax_init_report.py, jax_init.py's pure report, as a module."""
    spec = importlib.util.spec_from_file_location("jax_init_report",
                                                  ROOT / "benchmarks" / "jax_init_report.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("figures, said", [
    ((1.2, 1.2, 1.2), "met"),                                    # the limit is within
    ((1.21, 1.2, 1.0), "borderline (2 of the 3 figures within)"),
    ((1.23, 1.23, 1.07), "borderline (1 of the 3 figures within)"),  # CI's run of stop 48
    ((1.21, 1.3, 2.0), "not met"),
])
def test_the_verdict_counts_the_figures_within_the_goal(figures, said: str) -> None:
    """The line the quick run's regex reads, for each count of figures within 1.2x."""
    assert jax_init_report().verdict(figures) == said
    line = f"goal: initialize() within 1.2x of JAX's own detection: {said} (x1.00 of medians"
    assert re.search(VERDICT, line)


def step(ready: float, backoff: bool = False, **parts: float) -> dict:
    """One step's record of the last rank, as rank_main reports it."""
    return {"ready": ready, "imported": 1.0, "arrived": 1.0, "backoff": backoff, **parts}


def test_the_report_prints_each_mode_the_parts_and_the_verdict(capsys) -> None:
    """report(), from two repetitions' records: each mode's line with its ratio to JAX's own,
    the parts' table, the difference part by part and the verdict, as the figures say."""
    found = {"package": [step(2.2, package_import=0.1, mpi_init=0.3, resolve=0.1,
                              jax_start=0.5), step(2.4, package_import=0.1, mpi_init=0.3,
                                                   resolve=0.1, jax_start=0.5)],
             "package-slurm": [step(1.9, package_import=0.1, resolve=0.05, jax_start=0.5)] * 2,
             "jax-own": [step(2.0, jax_start=0.9, backoff=True), step(2.0, jax_start=0.4)]}
    summary = jax_init_report().report(found, 2, [1.0, 2.0])
    out = capsys.readouterr().out
    assert summary["package"]["ratio"] == pytest.approx(1.15)
    assert summary["package"]["paired"] == pytest.approx([1.1, 1.2])
    assert summary["package"]["within"] == 2
    assert summary["difference"]["total"] == pytest.approx(0.3)
    assert summary["difference"]["mpi_init"] == pytest.approx(0.3)
    # the parts in place of JAX's own start (0.65): 2.0 - 0.65 + 1.0 = 2.35; against its start
    # without the backoff (0.4): 2.35 / 1.75
    assert summary["ratio_from_parts"]["package"] == pytest.approx(2.35 / 2.0)
    assert summary["ratio_from_parts_against_jax_without_backoff"]["package"] == \
        pytest.approx(2.35 / 1.75)
    assert "  package        initialised " in out and "x1.15 of JAX's own" in out
    assert "jax-own 1/2" in out  # the steps that met the backoff
    assert re.search(VERDICT, out, re.M), out
    assert "borderline (2 of the 3 figures within) (x1.15 of medians" in out, out


def fit_rate():
    """Returns benchmarks/fit_rate.py as a module (pure, but for epoch_times)."""
    spec = importlib.util.spec_from_file_location("fit_rate_bench",
                                                  ROOT / "benchmarks" / "fit_rate.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("times, steps_per_second", [
    ([3.0, 4.0], 80.0),        # the shortest span timed: 80 steps in 1.0 s
    ([1.3, 2.3], 80.0),        # 0.9999999999999998 in floating point: 1.0 as printed
    ([3.0, 5.0, 7.0], 40.0),   # epochs 2 and 3: 160 steps in 4 s
    ([3.0, 3.9], None),        # under a second: refused
    ([3.0, 3.0], None),        # both lines in one tenth (was a division by zero)
])
def test_the_training_rate_is_timed_over_a_second_or_refused(times, steps_per_second) -> None:
    bench = fit_rate()
    epochs = len(times)
    if steps_per_second is None:
        with pytest.raises(SystemExit, match="train.py: epochs 2-2 of 80 steps took .* too "
                                             "short to time .*raise --fit-steps"):
            bench.rate(epochs, 80, times, "train.py")
    else:
        assert bench.rate(epochs, 80, times) == pytest.approx(steps_per_second)


@pytest.mark.parametrize("steps, span, more", [
    (100, 0.0, 1000),   # both lines in one tenth: ten times as many
    (100, 0.8, 250),    # 2 s at the rate measured
    (100, 0.1, 2000),
    (100, 0.3, 667),    # rounded up
])
def test_too_short_a_run_is_run_again_with_enough_steps(steps, span, more) -> None:
    assert fit_rate().more_steps(steps, span) == more


@pytest.mark.parametrize("spans, runs, rate", [
    pytest.param([2.0], [100], 50.0, id="timed at once"),
    pytest.param([0.4, 2.0], [100, 500], 250.0, id="too short once, then timed"),
    pytest.param([0.4, 0.5, 1.0], [100, 500, 2000], 2000.0, id="timed at the third run"),
    pytest.param([0.4, 0.5, 0.5], [100, 500, 2000], None, id="still too short: refused"),
])
def test_a_run_too_short_is_run_again_at_most_twice(spans, runs, rate, capsys) -> None:
    """steps_per_second: epochs 2..E of each run spanning ``spans`` in turn; the steps each
    run was given; the rate of the last (two epochs: its steps over its span)."""
    bench, given = fit_rate(), []

    def run(cluster, python, script, epochs, steps):
        given.append(steps)
        return [3.0, 3.0 + spans[len(given) - 1]]

    if rate is None:
        with pytest.raises(SystemExit, match="too short to time"):
            bench.steps_per_second(None, "py", "s.py", 2, 100, run=run)
    else:
        assert bench.steps_per_second(None, "py", "s.py", 2, 100, run=run) == pytest.approx(rate)
    assert given == runs
    assert capsys.readouterr().out.count("too short to time; again with") == len(runs) - 1
