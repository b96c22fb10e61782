"""benchmarks/tf_tiers.py's own rules, without a cluster: its refusals of arguments that could
measure nothing (each limit on both sides), the interval of the saves in the background, and
the goals' verdicts on both sides. Its real run: tests/cluster/test_bench_tf_tiers.py."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any, Dict, List, Optional

import pytest

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("tf_tiers", ROOT / "benchmarks" / "tf_tiers.py")
assert _spec is not None and _spec.loader is not None
bench = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench)


@pytest.mark.parametrize("args, says", [
    (["--repeat", "0"], "--repeat and each --mib must be at least 1"),
    (["--repeat", "1"], None),
    (["--mib", "0"], "--repeat and each --mib must be at least 1"),
    (["--mib", "1"], None),
    (["--every", "1"], "--every at least 2"),
    (["--every", "2"], None),
    (["--kill-at", "19"], "--kill-at at least 20"),
    (["--kill-at", "20"], None),
])
def test_arguments_that_could_measure_nothing_are_refused(
        args: List[str], says: Optional[str], capsys: pytest.CaptureFixture[str]) -> None:
    if says is None:
        assert bench.parse_args(args).rank is None
        return
    with pytest.raises(SystemExit) as e:
        bench.parse_args(args)
    assert e.value.code == 2 and says in capsys.readouterr().err


def test_quick_is_one_small_size_once() -> None:
    a = bench.parse_args(["--quick"])
    assert (a.mib, a.repeat) == ([10], 1)


@pytest.mark.parametrize("shared, local, step, least, expected", [
    (0.3, 0.1, 0.1, 2, 9),       # 3 x the slower save at once (0.3 s) over a step of 0.1 s
    (0.1, 0.3, 0.1, 2, 9),       # the tier's, where it is the slower
    (0.1, 0.1, 0.1, 4, 4),       # at least --every
    (0.3, 0.1, 0.1, 9, 9),       # --every where the two meet
    (0.301, 0.1, 0.1, 9, 10),    # one more step where the saves take longer
])
def test_the_background_interval(shared: float, local: float, step: float, least: int,
                                 expected: int) -> None:
    first = {"shared_at_once_save_s": shared, "local_at_once_save_s": local,
             "shared_at_once_step_s": step}
    assert bench.interval(first, least) == expected


def figures(restore_local: float, restore_shared: float, stall: float,
            of_dd: float = 0.5) -> Dict[str, Any]:
    out: Dict[str, Any] = {"mib": 100, "restore_local_s": restore_local,
                           "restore_partner_s": 0.5, "restore_shared_s": restore_shared}
    for name in ("shared", "local"):
        out.update({f"{name}_at_once_paid_s": 1.0, f"{name}_background_paid_s": stall,
                    f"{name}_stall_ratio": stall, f"{name}_background_write_s": 2.0,
                    f"{name}_of_dd": of_dd, f"{name}_background_peak_mib": 900.0})
    return out


def kills(with_tier: int, without: int) -> List[Dict[str, Any]]:
    return [{"mib": 100, "tiered": tiered, "killed_at": 150, "restored": 150 - lost,
             "lost": lost, "plans": ["(auto): every 1 s = 20 steps"], "interval": 20,
             "interval_s": 1.0, "per_failure": float(lost), "per_failure_s": lost / 10}
            for tiered, lost in ((False, without), (True, with_tier))]


@pytest.mark.parametrize("restore_local, stall, of_dd, lost, verdicts", [
    (0.9, 0.1, 0.5, (3, 4), ["met", "met", "met", "met", "met"]),
    (1.0, 0.1, 0.5, (3, 4), ["met", "met", "met", "not met", "met"]),
    (0.9, 0.1001, 0.5, (3, 4), ["not met", "not met", "met", "met", "met"]),
    (0.9, 0.1, 0.4999, (3, 4), ["met", "met", "not met", "met", "met"]),
    (0.9, 0.1, 0.5, (4, 4), ["met", "met", "met", "met", "not met"]),
])
def test_the_goals_on_both_sides(restore_local: float, stall: float, of_dd: float, lost: tuple,
                                 verdicts: List[str], capsys: pytest.CaptureFixture[str]) -> None:
    bench.report([figures(restore_local, 1.0, stall, of_dd)], kills(*lost), 1000)
    out = capsys.readouterr().out
    goals = [line for line in out.splitlines() if line.startswith("goal")]
    assert [g.split(": ")[-1].split(" (")[0] for g in goals] == verdicts, goals
    assert goals[-1].endswith(f"at the kill {lost[0]} against {lost[1]} steps)")
    assert "checkpoint directory (a file server on a 1000 Mbit/s link)" in out


def test_the_shared_directory_on_this_machines_disk(capsys: pytest.CaptureFixture[str]) -> None:
    bench.report([figures(0.9, 1.0, 0.1)], kills(3, 4), 0)
    assert "checkpoint directory (this machine's disk)" in capsys.readouterr().out
