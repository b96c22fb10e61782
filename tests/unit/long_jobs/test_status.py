"""long_jobs.status: where a running job is: the newest checkpoint and its age, the last
event, the step and rate (the progress file's where it is this run's), the expected end
given the plan; an ended or completed run without progress lines."""

from __future__ import annotations

import time
from typing import List, Optional

import pytest

from mpi_resolver.long_jobs.status import plan_of, rate, status_lines
from mpi_resolver.long_jobs.story import story_of
from tests.unit.long_jobs.ledger_records import T, end, night, restore, save, start

pytestmark = pytest.mark.unit

RUNNING = [start(1, 0), restore(10, 100), save(30, 140)]  # 2 steps/s from the restore


def lines(records, progress=None, now: float = 40, plan: Optional[int] = None,
          manifest=None) -> List[str]:
    return status_lines(story_of(records), manifest, progress, T + now, "/ck", plan)


def test_a_running_job_from_its_saves() -> None:
    out = lines(RUNNING)
    assert out[0] == "job 123, run 1 (running), started 40 s ago"
    assert out[1] == "newest checkpoint: step 140 (periodic, 0.50 s to save), 10 s ago"
    assert out[2] == "last event: periodic save at step 140, 10 s ago"
    assert out[3] == "progress: step 140; 2 steps/s in this run"
    assert out[4].startswith("expected end: step 600 in about 3.8 min (at ")
    assert out[4].endswith("), at this run's rate and without interruptions")


def test_the_progress_file_is_fresher_than_the_saves() -> None:
    out = lines(RUNNING, {"job": "123", "step": 200, "time": T + 35})
    assert out[3] == "progress: step 200, 5.00 s ago; 4 steps/s in this run"
    assert "in about 100 s" in out[4]


def test_an_older_runs_progress_is_not_this_runs() -> None:
    out = lines(RUNNING, {"job": "123", "step": 999, "time": T + 5})
    assert out[3] == "progress: step 140; 2 steps/s in this run"


def test_given_steps_win_over_the_ledgers_plan() -> None:
    assert "expected end: step 160 in about 10 s" in lines(RUNNING, plan=160)[4]
    assert plan_of(story_of(RUNNING), None) == 600


def test_no_plan_known() -> None:
    records = [start(1, 0), {**restore(10, 100), "plan": None}, save(30, 140)]
    assert lines(records)[4] == "expected end: the plan is not known (give --steps N)"
    assert plan_of(story_of(records), None) is None


def test_right_after_the_restore_no_rate() -> None:
    out = lines([start(1, 0), restore(10, 100)], now=11)
    assert out[1] == "newest checkpoint: none yet"
    assert out[2] == "last event: resumed from step 100, 1.00 s ago"
    assert out[3] == "progress: step 100; rate not known yet"
    assert len(out) == 4


def test_before_training_started() -> None:
    out = lines([start(1, 0)], now=3, manifest={"step": 40, "written": "2026-11-28T03:00:00"})
    assert out[1] == "newest checkpoint: step 40 (the manifest, written 2026-11-28T03:00:00)"
    assert out[2] == "last event: run started, 3.00 s ago"
    assert out[3] == "progress: no step reached yet in this run"


def test_a_failed_save_is_an_event_not_a_checkpoint() -> None:
    out = lines([*RUNNING, save(35, 150, ok=False)])
    assert out[1].startswith("newest checkpoint: step 140 ")
    assert out[2] == "last event: periodic save at step 150 failed, 5.00 s ago"


def test_an_ended_run_and_a_completed_job() -> None:
    ended = lines([start(1, 0), restore(1, 0), end(1, 30)], now=32)
    assert ended[0] == "job 123, run 1 (ended, restart), started 32 s ago"
    assert ended[2] == "last event: run ended (SIGKILL on node2), then restart, 2.00 s ago"
    assert len(ended) == 3
    done = lines(night(), now=170)
    assert done[0] == "job 123, run 3 (completed), started 40 s ago"
    assert len(done) == 3
    alone = lines([restore(0, 0), save(5, 10), {**save(6, 10), "event": "completed"}], now=9)
    assert alone[2] == "last event: training completed at step 10, 3.00 s ago"


def test_no_run_yet() -> None:
    assert lines([]) == ["/ck: the ledger holds no run yet"]


@pytest.mark.parametrize("progress, expected", [
    (None, 2.0),
    ({"step": 200, "time": T + 35}, 4.0),
    ({"step": 200, "time": T + 9}, 2.0),      # before this run's restore
    ({"step": "200", "time": T + 35}, 2.0),   # not a step
    ({"step": 200, "time": "late"}, 2.0),
    ({"step": 100, "time": T + 35}, None),    # no step yet since the restore
    ({"step": 120, "time": T + 10}, None),    # no time since the restore
])
def test_rates(progress, expected) -> None:
    assert rate(story_of(RUNNING).runs[0], progress) == expected


def test_no_rate_without_a_restore() -> None:
    assert rate(story_of([start(1, 0)]).runs[0], None) is None


def test_the_node_is_named_where_blamed_only() -> None:
    assert lines([start(1, 0), end(1, 30, node="node2", blamed=False)], now=31)[2] == \
        "last event: run ended (SIGKILL), then restart, 1.00 s ago"
    assert lines([start(1, 0), end(1, 30, node=None, blamed=True)], now=31)[2] == \
        "last event: run ended (SIGKILL), then restart, 1.00 s ago"


def test_at_the_same_time_the_later_event_is_the_last() -> None:
    assert lines([start(1, 0), restore(0, 0)], now=1)[2] == \
        "last event: resumed from step 0, 1.00 s ago"


def test_the_expected_end_s_time_and_a_plan_reached() -> None:
    out = lines(RUNNING, plan=140)
    end = time.strftime("%H:%M:%S", time.localtime(T + 40))
    assert out[4] == (f"expected end: step 140 in about 0.00 s (at {end}), at this run's "
                      "rate and without interruptions")


def test_the_expected_end_is_ahead() -> None:
    out = lines(RUNNING, plan=600)  # 460 steps at 2 a second: 230 s from now
    end = time.strftime("%H:%M:%S", time.localtime(T + 40 + 230))
    assert f"(at {end})" in out[4]


def test_a_rate_over_half_a_second() -> None:
    run = story_of([start(1, 0), restore(10, 100)]).runs[0]
    assert rate(run, {"step": 101, "time": T + 10.5}) == 2.0
