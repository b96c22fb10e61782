"""tests/harness/requeue.py: when a requeued job may be started at once."""

from __future__ import annotations

import pytest

from tests.harness.requeue import SETTLE, slurm_time, start_due

pytestmark = pytest.mark.unit

REQUEUED = "2026-11-25T19:00:15"
AT = slurm_time(REQUEUED)
WAITING = {"JobState": "PENDING", "Reason": "BeginTime", "SubmitTime": REQUEUED}


@pytest.mark.parametrize("fields, now, due", [
    pytest.param(WAITING, AT + SETTLE, True, id="the requeue 2 s old"),
    pytest.param(WAITING, AT + SETTLE + 60, True, id="long after"),
    pytest.param(WAITING, AT + SETTLE - 0.001, False, id="just short of it"),
    pytest.param(WAITING, AT, False, id="the requeue's own second: the launch would fail"),
    pytest.param({**WAITING, "Reason": "None"}, AT + 60, False, id="not waiting for BeginTime"),
    pytest.param({**WAITING, "JobState": "COMPLETING"}, AT + 60, False, id="still completing"),
    pytest.param({**WAITING, "SubmitTime": "Unknown"}, AT + 60, False, id="no time"),
    pytest.param({"JobState": "PENDING", "Reason": "BeginTime"}, AT + 60, False,
                 id="no SubmitTime"),
])
def test_start_due(fields, now, due):
    assert start_due(fields, now) is due


def test_slurm_time_is_local_whole_seconds():
    assert slurm_time("2026-11-25T19:00:16") - AT == 1
    with pytest.raises(ValueError):
        slurm_time("None")
