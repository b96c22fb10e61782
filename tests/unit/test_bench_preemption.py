"""benchmarks/preemption.py's timeline and table, without a cluster: the runs and phases read
from the events, the steps at the signal, saved and lost, the checks of what the package
promises (each on both sides), and the table's cells. Its real run:
tests/cluster/test_bench_preemption.py."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import List

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))
import preemption_table as table  # noqa: E402 - benchmarks/ is not a package
import preemption_timeline as timeline  # noqa: E402
from preemption_timeline import Event  # noqa: E402

pytestmark = pytest.mark.unit


def run(*marks: tuple) -> List[Event]:
    return [Event(name, at, list(fields)) for name, at, *fields in marks]


FRESH = run(("batch", 10.0), ("start", 11.0), ("strategy", 14.0), ("variables", 15.0, "2048"),
            ("restored", 15.5, "0"), ("step", 16.0, "1"), ("step", 17.0, "2"),
            ("step", 18.0, "3"), ("exit", 19.0, "4"),
            ("logged", 19.5, "mpi_resolver:", "requeued", "job", "7;", "exit", "code", "75"))
RESUMED = run(("batch", 30.0), ("start", 31.0), ("strategy", 33.0), ("variables", 34.0, "2048"),
              ("restored", 35.0, "4"), ("step", 36.0, "5"), ("done", 38.0, "7"))


def test_the_timeline_is_read_and_split_into_runs(tmp_path: Path) -> None:
    path = tmp_path / "timeline"
    assert timeline.read_timeline(path) == []  # not written yet
    path.write_text("noise\nbatch 1.5\nstep 2.0 1\nbatch 3.0\n")
    events = timeline.read_timeline(path)
    assert events == [Event("batch", 1.5, []), Event("step", 2.0, ["1"]),
                      Event("batch", 3.0, [])]
    assert [len(r) for r in timeline.runs_of([Event("step", 0.5, []), *events])] == [2, 1]


def test_a_run_s_phases_and_a_missing_mark() -> None:
    assert timeline.phases(FRESH) == {"total": 6.0, "launch": 1.0, "setup": 3.0, "model": 1.0,
                                      "handler": 0.5, "first_step": 0.5}
    with pytest.raises(RuntimeError, match=r"lacks \['strategy'\]"):
        timeline.phases([e for e in FRESH if e.name != "strategy"])


@pytest.mark.parametrize("t_signal, at_signal, lost, after", [
    (17.5, 2, 0, 2),    # two steps done at the signal, saved at 4: two trained after it
    (16.0, 0, 0, 4),    # the step at the signal's instant is not before it
    (99.0, 3, 0, 1),
])
def test_the_steps_at_the_signal_saved_and_lost(t_signal, at_signal, lost, after) -> None:
    assert timeline.steps_figures(FRESH, RESUMED, t_signal) == {
        "steps_at_signal": at_signal, "steps_saved": 4, "steps_lost": lost,
        "steps_after_signal": after}


def test_steps_lost_where_the_save_is_older_than_the_signal() -> None:
    resumed = [e if e.name != "restored" else Event("restored", 35.0, ["1"]) for e in RESUMED]
    assert timeline.steps_figures(FRESH, resumed, 99.0)["steps_lost"] == 2


@pytest.mark.parametrize("change, problem", [
    (None, None),
    ("exit 143", "exit line:"),
    ("restarts 0", "Restarts=0"),
    ("resumed at 3", "saved at 4, resumed at 3"),
    ("ended early", "resumed run ended"),
    ("FAILED", "job ended FAILED"),
])
def test_the_checks_say_what_did_not_go_as_promised(change, problem) -> None:
    fresh, resumed, fields, state = list(FRESH), list(RESUMED), {"Restarts": "1"}, "COMPLETED"
    if change == "exit 143":
        fresh[-1] = Event("logged", 19.5, ["mpi_resolver:", "exit", "code", "143"])
    elif change == "restarts 0":
        fields = {"Restarts": "0"}
    elif change == "resumed at 3":
        resumed[4] = Event("restored", 35.0, ["3"])
    elif change == "ended early":
        resumed[-1] = Event("done", 38.0, ["6"])
    elif change == "FAILED":
        state = "FAILED"
    found = timeline.checks(fresh, resumed, fields, state, 3)
    assert found == [] if problem is None else (len(found) >= 1 and problem in found[0])


def test_a_run_without_an_exit_line_is_an_error() -> None:
    with pytest.raises(RuntimeError, match="logged no exit line"):
        timeline.exit_line(FRESH[:-1])


@pytest.mark.parametrize("line, said", [
    ("mpi_resolver: checkpoint saved on SIGUSR1; requeued job 7 (scontrol requeue 7); exit "
     "code 75", "requeued"),
    ("mpi_resolver: checkpoint saved; scontrol requeue 7 failed (exit -15: no output); exit "
     "code 75", "scontrol requeue 7 failed (exit -15: no output)"),
])
def test_what_the_exit_line_says_of_the_requeue(line: str, said: str) -> None:
    assert timeline.requeue_said(line) == said


@pytest.mark.parametrize("t_update, keys", [
    (None, {"requeue_to_pending", "begin_time", "real_wait"}),
    (105.0, {"requeue_to_pending", "begin_time", "update_to_start", "requeue_to_start"}),
])
def test_slurm_s_own_wait(t_update, keys) -> None:
    requeued = {"pending_seen": 102.0, "fields": {"EligibleTime": "2026-11-29T10:02:01",
                                                  "SubmitTime": "2026-11-29T10:00:00"}}
    out = timeline.slurm_wait(100.0, 110.0, requeued, t_update)
    assert set(out) == keys
    assert out["requeue_to_pending"] == 2.0 and out["begin_time"] == 121.0


@pytest.mark.parametrize("values, kind, text", [
    ([], "s", "-"),
    ([1.234], "s", "1.23 s"),
    ([3.0, 1.0, 2.0], "s", "2.00 s [1.00, 3.00]"),
    ([4.0, 6.0], "n", "5 [4, 6]"),
])
def test_a_cell_is_the_median_and_the_range(values, kind, text) -> None:
    assert table.cell(values, kind) == text


@pytest.mark.parametrize("flags, text", [([True, True], "yes (2/2)"),
                                         ([True, False], "NO (1/2)")])
def test_a_share_says_yes_only_where_every_repetition_did(flags, text) -> None:
    assert table.share(flags) == text
