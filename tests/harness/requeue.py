"""When a requeued job may be started at once (`scontrol update JobId=J StartTime=now`) on the
throw-away cluster, for benchmarks/preemption.py and the long jobs' driver
(tests/cluster/longjobs.py), which do not wait out its BeginTime.

Slurm holds a requeued job until the requeue + CredExpire + 1 s (121 s) because the nodes
refuse, until then, the job's credentials made no later than their revocation at the requeue
(slurmd compares whole seconds). Measured in a run of the suite: an update sent in the
requeue's own second started the job at once and its launch failed (JobState=FAILED,
Reason=NonZeroExitCode, RunTime 0, ExitCode 1:0, the batch script never ran). So the update is
due once the job is PENDING for its BeginTime (sent before, the requeue overwrites it) and
the requeue (its new SubmitTime) is SETTLE seconds old.
"""

from __future__ import annotations

import time
from typing import Mapping

#: Whole seconds after the requeue before a new launch: its credential's time is then later
#: than the revocation's (one more for slurmd to have handled the requeue's kill).
SETTLE = 2


def slurm_time(text: str) -> float:
    """Returns a time as scontrol prints it ('2026-11-25T19:00:15', local time) in seconds
    since the epoch.

    Raises:
      ValueError: not such a time ('Unknown', 'None').
    """
    return time.mktime(time.strptime(text, "%Y-%m-%dT%H:%M:%S"))


def start_due(fields: Mapping[str, str], now: float) -> bool:
    """Returns whether `StartTime=now` may be sent to the job whose `scontrol show job`
    fields are ``fields``, at ``now`` (seconds since the epoch)."""
    if fields.get("JobState") != "PENDING" or fields.get("Reason") != "BeginTime":
        return False
    try:
        requeued = slurm_time(fields.get("SubmitTime", ""))
    except ValueError:
        return False
    return now >= requeued + SETTLE
