"""long_jobs.supervision: a run judged end to end (its cause, its progress, the table, the
rules beyond one run), the one line supervise says of it, and its ledger record."""

from __future__ import annotations

from typing import List, Optional

import pytest

from mpi_resolver.long_jobs.causes import Cause, RunEnd
from mpi_resolver.long_jobs.ledger import RunEnded
from mpi_resolver.long_jobs.policy import Action, Came, Progress
from mpi_resolver.long_jobs.step_report import StepReport
from mpi_resolver.long_jobs.supervision import Checkpoints, Job, checkpoints_of, judge, settled

pytestmark = pytest.mark.unit

JOB = Job("12", "srun", 3, 10)
NO_DIR = Job("12", "srun", 3, 10, checkpoints_seen=False)


def run(status: Optional[int], *lines: str, seconds: float = 12.34) -> RunEnd:
    report = StepReport()
    for line in lines:
        report.feed(line)
    return RunEnd(status, report, seconds)


KILLED = run(143, "srun: error: node2: task 1: Killed", "srun: error: node1: task 0: Terminated")
USAGE = run(143, "srun: error: node1: task 0: Exited with exit code 2")
SAVED = run(143, "srun: error: node1: task 0: Exited with exit code 75")
OOM = run(143, "srun: error: node2: task 1: Out Of Memory")
STALLED_RUN = RunEnded("12", 1, "killed by a signal", "task 1 on node2: Killed (signal 9)",
                       "node2", True, 137, 40, 40, "stalled", "restart", 3.0)


@pytest.mark.parametrize("job, end, came, before, after, history, restarts, action, status, "
                         "line", [
    pytest.param(JOB, run(0), Came.NOTHING, Checkpoints(), Checkpoints(200), [], 0, Action.END,
                 0, None, id="a first run that completes: silent"),
    pytest.param(JOB, run(0), Came.NOTHING, Checkpoints(40), Checkpoints(200), [], 2, Action.END,
                 0, "the step completed after 2 restarts", id="completed after restarts"),
    pytest.param(JOB, KILLED, Came.NOTHING, Checkpoints(40), Checkpoints(120), [], 0,
                 Action.RESTART, 137,
                 "run 1: task 1 on node2: Killed (signal 9), 12.3 s into the run; the newest "
                 "checkpoint advanced to step 120: restart 1 of 3", id="a kill: restarted"),
    pytest.param(JOB, KILLED, Came.NOTHING, Checkpoints(40), Checkpoints(40), [STALLED_RUN], 1,
                 Action.END, 79,
                 "run 2: task 1 on node2: Killed (signal 9), 12.3 s into the run; the newest "
                 "checkpoint is still step 40: no progress in the last two runs (run 1: task 1 "
                 "on node2: Killed (signal 9)): the job stops, not requeued: exit 79",
                 id="a crash loop: stopped at the second run without progress"),
    pytest.param(JOB, KILLED, Came.NOTHING, Checkpoints(), Checkpoints(), [], 0, Action.RESTART,
                 137, "run 1: task 1 on node2: Killed (signal 9), 12.3 s into the run; no "
                 "checkpoint yet: restart 1 of 3", id="no checkpoint yet"),
    pytest.param(NO_DIR, KILLED, Came.NOTHING, Checkpoints(), Checkpoints(), [STALLED_RUN], 3,
                 Action.END, 137,
                 "run 2: task 1 on node2: Killed (signal 9), 12.3 s into the run: the restarts "
                 "are used up (--max-restarts 3): exit 137",
                 id="no directory: --max-restarts alone"),
    pytest.param(JOB, USAGE, Came.NOTHING, Checkpoints(), Checkpoints(), [], 0, Action.END, 2,
                 "run 1: task 0 on node1: Exited with exit code 2, 12.3 s into the run; no "
                 "checkpoint yet: a usage or configuration error fails the same way again: not "
                 "restarted, not requeued: exit 2", id="a usage error: ended at once"),
    pytest.param(JOB, SAVED, Came.NOTHING, Checkpoints(40), Checkpoints(90), [], 0,
                 Action.REQUEUE, 75,
                 "run 1: task 0 on node1: Exited with exit code 75, 12.3 s into the run; the "
                 "newest checkpoint advanced to step 90: the tasks had the warning signal",
                 id="the tasks saved: requeued (the edge adds scontrol's answer)"),
    pytest.param(JOB, RunEnd(None), Came.WARNING, Checkpoints(90), Checkpoints(90), [], 1,
                 Action.REQUEUE, 75,
                 "the warning signal came to supervise; run 1 is not started; the newest "
                 "checkpoint is still step 90: the job's time is ending",
                 id="the warning between two runs: requeued without a run"),
    pytest.param(JOB, OOM, Came.NOTHING, Checkpoints(40), Checkpoints(200, completed=True), [],
                 0, Action.END, 0,
                 "run 1: task 1 on node2: Out Of Memory, 12.3 s into the run; its training "
                 "completed at step 200: nothing is trained again: exit 0",
                 id="a task killed after training completed: no retraining"),
    pytest.param(JOB, KILLED, Came.JOB_ENDS, Checkpoints(40), Checkpoints(60), [], 0,
                 Action.END, 143,
                 "SIGTERM (Slurm ends the job) came to supervise; run 1: task 1 on node2: Killed "
                 "(signal 9), 12.3 s into the run; the newest checkpoint advanced to step 60: "
                 "Slurm ends the job (scancel, or its own requeue or preemption): exit 143",
                 id="scancel"),
    pytest.param(Job(None, "mpirun", 3, 10), SAVED, Came.NOTHING, Checkpoints(40),
                 Checkpoints(90), [], 0, Action.END, 75,
                 "run 1: task 0 on node1: Exited with exit code 75, 12.3 s into the run; the "
                 "newest checkpoint advanced to step 90: the tasks had the warning signal; not "
                 "requeued: not in a Slurm job (SLURM_JOB_ID unset): there is no job to "
                 "requeue: exit 75", id="no Slurm job: nothing to requeue"),
    pytest.param(JOB, KILLED, Came.TIME_LIMIT, Checkpoints(40), Checkpoints(90), [], 0,
                 Action.END, 143,
                 "SIGTERM at the time limit came to supervise; run 1: task 1 on node2: Killed "
                 "(signal 9), 12.3 s into the run; the newest checkpoint advanced to step 90: "
                 "the job's time is ending; not requeued: the time limit ends the job "
                 "(requeue_on_time_limit=False): exit 143", id="the time limit: the job ends"),
    pytest.param(Job("12", "srun", 3, 10, requeue_on_time_limit=True), KILLED, Came.TIME_LIMIT,
                 Checkpoints(40), Checkpoints(90), [], 0, Action.REQUEUE, 75,
                 "SIGTERM at the time limit came to supervise; run 1: task 1 on node2: Killed "
                 "(signal 9), 12.3 s into the run; the newest checkpoint advanced to step 90: "
                 "the job's time is ending", id="the time limit, requeue_on_time_limit=True"),
    pytest.param(JOB, SAVED, Came.TIME_LIMIT, Checkpoints(40), Checkpoints(90), [], 0,
                 Action.REQUEUE, 75,
                 "SIGTERM at the time limit came to supervise; run 1: task 0 on node1: Exited "
                 "with exit code 75, 12.3 s into the run; the newest checkpoint advanced to step "
                 "90: the job's time is ending", id="the time limit after the tasks' own 75"),
    pytest.param(Job("12", "srun", 3, 10, requeue=False), KILLED, Came.WARNING, Checkpoints(40),
                 Checkpoints(90), [], 0, Action.END, 137,
                 "the warning signal came to supervise; run 1: task 1 on node2: Killed (signal "
                 "9), 12.3 s into the run; the newest checkpoint advanced to step 90: the job's "
                 "time is ending; not requeued: the job's settings say requeue=False: exit 137",
                 id="requeue=False"),
    pytest.param(JOB, KILLED, Came.NOTHING, Checkpoints(40), Checkpoints(seen=False),
                 [STALLED_RUN], 1, Action.RESTART, 137,
                 "run 2: task 1 on node2: Killed (signal 9), 12.3 s into the run: restart 2 of 3",
                 id="a manifest that cannot be read after the run: not seen, no stop"),
    pytest.param(JOB, KILLED, Came.NOTHING, Checkpoints(seen=False), Checkpoints(40),
                 [STALLED_RUN], 1, Action.RESTART, 137,
                 "run 2: task 1 on node2: Killed (signal 9), 12.3 s into the run: restart 2 of 3",
                 id="nor before it"),
])
def test_judge(job: Job, end: RunEnd, came: Came, before: Checkpoints, after: Checkpoints,
               history: List[RunEnded], restarts: int, action: Action, status: int,
               line: Optional[str]) -> None:
    verdict = judge(job, len(history) + 1, end, came, before, after, history, restarts)
    assert (verdict.decision.action, verdict.decision.status) == (action, status)
    assert verdict.line == line


def test_the_record() -> None:
    verdict = judge(JOB, 3, KILLED, Came.NOTHING, Checkpoints(40), Checkpoints(120), [], 0)
    assert verdict.record == RunEnded("12", 3, "killed by a signal",
                                      "task 1 on node2: Killed (signal 9)", "node2", True, 137,
                                      40, 120, "advanced", "restart", 12.34)
    assert (verdict.ending.cause, verdict.ending.task.node, verdict.progress) == (
        Cause.SIGNALED, "node2", Progress.ADVANCED)


def test_the_record_of_a_run_without_a_task_s_words() -> None:
    verdict = judge(Job("12", "mpirun", 3, 10), 1, run(3, seconds=1.23456), Came.NOTHING,
                    Checkpoints(), Checkpoints(), [], 0)
    assert (verdict.record.what, verdict.record.node, verdict.record.seconds) == (
        "mpirun exited 3", None, 1.235)


@pytest.mark.parametrize("end, blamed", [
    (KILLED, True), (run(143, "srun: error: node2: task 1: Exited with exit code 124"), True),
    (OOM, False), (USAGE, False), (SAVED, False),
    (run(143, "srun: error: node2: task 1: User defined signal 1"), False),
])
def test_which_failures_blame_the_node(end: RunEnd, blamed: bool) -> None:
    verdict = judge(JOB, 1, end, Came.NOTHING, Checkpoints(), Checkpoints(1), [], 0)
    assert verdict.record.blamed is blamed and verdict.record.node in ("node1", "node2")


def test_the_record_says_what_came_and_the_warning_signal_s_name() -> None:
    job = Job("12", "srun", 3, 12, warning_name="USR2")
    verdict = judge(job, 1, KILLED, Came.WARNING, Checkpoints(40), Checkpoints(120), [], 0)
    assert (verdict.record.came, verdict.record.warning) == ("the warning signal", "USR2")


@pytest.mark.parametrize("manifest, job, readable, checkpoints", [
    (None, "12", True, Checkpoints()),
    ({"job": "12", "step": 40}, "12", True, Checkpoints(40)),
    ({"job": "12", "step": 200, "completed": True}, "12", True, Checkpoints(200, True)),
    ({"job": "11", "step": 200, "completed": True}, "12", True, Checkpoints(200)),  # not ours
    ({"job": None, "step": 200, "completed": True}, None, True, Checkpoints(200)),  # no job
    ({"job": "12", "step": "40"}, "12", True, Checkpoints()),  # not a step
    ({"job": "12", "step": 0}, "12", True, Checkpoints()),  # claimed at the start: no save
    ({"job": "12", "step": 1}, "12", True, Checkpoints(1)),
    ({"job": "12", "step": -3}, "12", True, Checkpoints()),
    ({"job": "12", "completed": 1}, "12", True, Checkpoints(None)),  # True alone: LongJob's
    # rule (manifest.completed_for): a run would train again, so supervise restarts it
    (None, "12", False, Checkpoints(seen=False)),  # there, but it cannot be read
])
def test_checkpoints_of(manifest, job, readable: bool, checkpoints: Checkpoints) -> None:
    assert checkpoints_of(manifest, job, readable=readable) == checkpoints


@pytest.mark.parametrize("manifest, job, requeue, on_time_limit", [
    (None, "12", True, False),  # none (yet): the defaults
    ({"job": "12"}, "12", True, False),
    ({"job": "12", "settings": {}}, "12", True, False),
    ({"job": "12", "settings": {"requeue": False}}, "12", False, False),
    ({"job": "12", "settings": {"requeue_on_time_limit": True}}, "12", True, True),
    ({"job": "12", "settings": {"requeue": False, "requeue_on_time_limit": True}}, "12", False,
     True),
    ({"job": "11", "settings": {"requeue": False}}, "12", True, False),  # another job's
    ({"job": None, "settings": {"requeue": False}}, None, True, False),  # no Slurm job
    ({"job": "12", "settings": [1]}, "12", True, False),  # not a mapping: the defaults
    ({"job": "12", "settings": None}, "12", True, False),
])
def test_settled(manifest, job, requeue: bool, on_time_limit: bool) -> None:
    """The settings as the manifest holds them now; a job's own values always replace the
    ones it had (a manifest without them: the defaults again)."""
    before = Job(job, "srun", 3, 10, requeue=not requeue, requeue_on_time_limit=not on_time_limit)
    after = settled(before, manifest)
    assert (after.requeue, after.requeue_on_time_limit) == (requeue, on_time_limit)
    assert after == Job(job, "srun", 3, 10, requeue=requeue, requeue_on_time_limit=on_time_limit)


def stalled_run(number: int, came: str = "nothing") -> RunEnded:
    return RunEnded("12", number, "killed by a signal", "task 1 on node2: Killed (signal 9)",
                    "node2", True, 137, None, None, "stalled", "restart", 3.0, came=came)


USR1_KILLED = run(138, "srun: error: node1: task 0: User defined signal 1")


@pytest.mark.parametrize("history, came, end, action, status", [
    # a task killed, then the warning while the restarted step starts: requeued, not stopped
    ([stalled_run(1)], Came.WARNING, USR1_KILLED, Action.REQUEUE, 75),
    # the warning again in the requeued run, no save reached in either: its time never
    # reaches a save: stopped
    ([stalled_run(1), stalled_run(2, came="the warning signal")], Came.WARNING, USR1_KILLED,
     Action.END, 79),
    ([], Came.WARNING, USR1_KILLED, Action.REQUEUE, 75),
    # cut by what came alone (the run ended killed, not by the warning signal)
    ([stalled_run(1)], Came.WARNING, KILLED, Action.REQUEUE, 75),
    # cut by the run's end alone (the tasks had the warning signal; nothing came)
    ([stalled_run(1)], Came.NOTHING, USR1_KILLED, Action.REQUEUE, 75),
])
def test_a_run_the_scheduler_cut_is_no_failure_of_the_job_s(history, came, end, action,
                                                           status) -> None:
    verdict = judge(JOB, len(history) + 1, end, came, Checkpoints(), Checkpoints(),
                    history, 1)
    assert (verdict.decision.action, verdict.decision.status) == (action, status), verdict.line


def test_two_failures_with_a_cut_run_between_stop_the_job() -> None:
    history = [stalled_run(1), stalled_run(2, came="the warning signal")]
    verdict = judge(JOB, 3, KILLED, Came.NOTHING, Checkpoints(), Checkpoints(), history, 0)
    assert (verdict.decision.action, verdict.decision.status) == (Action.END, 79), \
        verdict.line
