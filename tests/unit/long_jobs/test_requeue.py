"""long_jobs.requeue: which job worker 0 requeues, what scontrol's answers mean (the texts
are Slurm 22.05's, measured on the throw-away cluster), and why SIGTERM came."""

from __future__ import annotations

import subprocess

import pytest

from mpi_resolver.core.errors import ResolutionError
from mpi_resolver.long_jobs import requeue as rq

pytestmark = pytest.mark.unit

FALLBACK = ("or run the step under `mpi-resolver supervise` (the templates do), which "
            "requeues the job from the batch step when the step exits 75")


@pytest.mark.parametrize("env, target", [
    pytest.param({"SLURM_JOB_ID": "12"}, "12", id="a job"),
    pytest.param({"SLURM_JOB_ID": " 12 "}, "12", id="blanks around"),
    pytest.param({"SLURM_JOB_ID": "13", "SLURM_ARRAY_JOB_ID": "12", "SLURM_ARRAY_TASK_ID": "1"},
                 "12_1", id="an array task, by its own name"),
    pytest.param({"SLURM_JOB_ID": "13", "SLURM_ARRAY_JOB_ID": "12"}, "13",
                 id="an array job id without a task id"),
    pytest.param({"SLURM_JOB_ID": "13", "SLURM_ARRAY_TASK_ID": "1"}, "13",
                 id="a task id without the array's"),
    pytest.param({"SLURM_JOB_ID": "13", "SLURM_ARRAY_JOB_ID": "x", "SLURM_ARRAY_TASK_ID": "1"},
                 "13", id="not numbers: the job's own id"),
])
def test_requeue_target(env, target):
    assert rq.requeue_target(env) == target


@pytest.mark.parametrize("job", [None, "", "12x", "-1"])
def test_no_job_to_requeue_is_an_error_that_says_so(job):
    env = {} if job is None else {"SLURM_JOB_ID": job}
    with pytest.raises(ResolutionError) as e:
        rq.requeue_target(env)
    assert str(e.value) == (
        f"SLURM_JOB_ID={job!r}: not in a Slurm job, so there is no job to requeue; run the "
        "training with srun inside sbatch, or pass requeue=False.")


@pytest.mark.parametrize("returncode, output, done, message", [
    pytest.param(0, "", True, "requeued job 12 (scontrol requeue 12)", id="done"),
    pytest.param(1, "Job is pending execution for job 12\n", True,
                 "job 12 is requeued already (by scontrol requeue or Slurm's preemption): "
                 "scontrol requeue 12: Job is pending execution for job 12",
                 id="requeued already"),
    pytest.param(1, "Job has already finished for job 12", False,
                 "job 12 is ending or has ended (scancel, or Slurm ended it first): not "
                 "requeued: scontrol requeue 12: Job has already finished for job 12",
                 id="finished: not requeued"),
    pytest.param(1, "Job/step already completing or completed for job 12", False,
                 "job 12 is ending or has ended (scancel, or Slurm ended it first): not "
                 "requeued: scontrol requeue 12: Job/step already completing or completed for "
                 "job 12", id="completing: not requeued, never 'requeued already'"),
    pytest.param(1, "Requested operation is presently disabled for job 12", False,
                 "job 12 cannot be requeued (scontrol requeue 12: Requested operation is "
                 "presently disabled for job 12): submit it with '#SBATCH --requeue' (this "
                 "cluster's JobRequeue is 0)", id="not requeueable"),
    pytest.param(1, "Invalid job id specified", False,
                 f"scontrol requeue 12 failed (exit 1: Invalid job id specified); {FALLBACK}",
                 id="another error"),
    pytest.param(2, "", False, f"scontrol requeue 12 failed (exit 2: no output); {FALLBACK}",
                 id="no output"),
])
def test_read_requeue(returncode, output, done, message):
    assert rq.read_requeue("12", returncode, output, 75) == rq.RequeueOutcome(done, message)


class Scontrol:
    """Stands for scontrol: answers each call with ``answer`` (a CompletedProcess's fields)
    or raises ``error``; records the arguments and the time each call was given."""

    def __init__(self, returncode=0, stdout="", stderr="", error=None):
        self.answer = (returncode, stdout, stderr)
        self.error, self.calls, self.timeouts = error, [], []

    def __call__(self, args, timeout):
        self.calls.append(list(args))
        self.timeouts.append(timeout)
        if self.error is not None:
            raise self.error
        return subprocess.CompletedProcess(["scontrol", *args], *self.answer)


def test_requeue_runs_scontrol_requeue_of_the_target():
    run = Scontrol()
    assert rq.requeue("12_1", "node1", 75, run).done
    assert run.calls == [["requeue", "12_1"]]
    assert run.timeouts == [rq.SCONTROL_TIMEOUT]


def test_requeue_and_the_job_s_state_take_the_time_they_are_given():
    run = Scontrol(stdout="JobId=12 JobState=RUNNING Reason=None")
    rq.requeue("12", "node1", 75, run, 4.5)
    rq.job_ending("12", run, 3.0)
    assert rq.job_state("12", run, 2.0) == "RUNNING"
    assert run.timeouts == [4.5, 3.0, 2.0]


@pytest.mark.parametrize("run, state", [
    pytest.param(Scontrol(stdout="JobId=7 JobState=COMPLETED Reason=None"), "COMPLETED",
                 id="its state"),
    pytest.param(Scontrol(1, stdout="JobId=7 JobState=RUNNING", stderr="x"), None,
                 id="scontrol failed: no state even if it printed one"),
    pytest.param(Scontrol(0, stdout="No jobs in the system"), None, id="no JobState"),
    pytest.param(Scontrol(1, stderr="slurm_load_jobs error: Invalid job id specified"),
                 rq.FORGOTTEN, id="a job slurmctld does not know"),
    pytest.param(Scontrol(1, stderr="slurm_load_jobs error: Unable to contact slurm "
                                    "controller (connect failure)"), None,
                 id="no controller: cannot say"),
    pytest.param(Scontrol(error=FileNotFoundError("scontrol")), None, id="no scontrol"),
    pytest.param(Scontrol(error=subprocess.TimeoutExpired(["scontrol"], 2.0)), None,
                 id="no answer in time"),
])
def test_job_state(run, state):
    run.timeouts.clear()  # the table's stand-ins outlive a run of the test (mutmut runs twice)
    run.calls.clear()
    assert rq.job_state("7", run) == state
    assert run.timeouts == [rq.SCONTROL_TIMEOUT]
    assert run.calls == [["show", "job", "-o", "7"]]


def test_requeue_reads_stderr_too():
    run = Scontrol(1, stderr="Requested operation is presently disabled for job 12")
    assert "cannot be requeued" in rq.requeue("12", "node1", 75, run).message


def test_scontrol_missing_names_the_node_the_fix_and_the_fallback():
    outcome = rq.requeue("12", "node1", 75, Scontrol(error=FileNotFoundError("scontrol")))
    assert outcome == rq.RequeueOutcome(False, (
        "job 12 was not requeued: scontrol is not on node1's PATH (inside a container without "
        "Slurm's commands?): make scontrol, slurm.conf and munge's socket available there; "
        f"{FALLBACK}"))


@pytest.mark.parametrize("error", [subprocess.TimeoutExpired(["scontrol"], 30.0),
                                   PermissionError("denied")])
def test_scontrol_that_cannot_run_is_an_outcome_not_an_exception(error):
    outcome = rq.requeue("12", "node1", 75, Scontrol(error=error))
    assert outcome.done is False
    assert outcome.message == f"scontrol requeue 12 could not run ({error}); {FALLBACK}"


def test_run_scontrol_is_bounded_and_captures(monkeypatch):
    seen = {}

    def fake_run(argv, **kwargs):
        seen.update(kwargs, argv=argv)
        return subprocess.CompletedProcess(argv, 0, "", "")

    monkeypatch.setattr(rq.subprocess, "run", fake_run)
    rq.run_scontrol(["requeue", "12"])
    assert seen["argv"] == ["scontrol", "requeue", "12"]
    assert seen["timeout"] == rq.SCONTROL_TIMEOUT == 30.0
    rq.run_scontrol(["show", "job", "12"], 2.5)
    assert seen["timeout"] == 2.5
    assert seen["capture_output"] and seen["text"] and seen["stdin"] == subprocess.DEVNULL


def test_job_fields_keeps_the_first_of_a_key_and_values_with_equals():
    assert rq.job_fields("JobId=12 JobName=a=b Reason=None JobId=13 word") == {
        "JobId": "12", "JobName": "a=b", "Reason": "None"}


SHOW = "JobId=12 JobName=train JobState={state} Reason={reason} Dependency=(null) Restarts=0"


@pytest.mark.parametrize("state, reason, ending", [
    pytest.param("COMPLETING", "TimeLimit", rq.TIME_LIMIT, id="the time limit"),
    pytest.param("COMPLETING", "None", rq.ENDING, id="scancel"),
    pytest.param("PENDING", "BeginTime", rq.ENDING, id="requeued"),
    pytest.param("RUNNING", "None", rq.RUNNING, id="a signal alone"),
    pytest.param("RUNNING", "TimeLimit", rq.TIME_LIMIT, id="the reason decides"),
])
def test_job_ending(state, reason, ending):
    run = Scontrol(stdout=SHOW.format(state=state, reason=reason))
    assert rq.job_ending("12", run) == ending
    assert run.calls == [["show", "job", "-o", "12"]]


@pytest.mark.parametrize("run", [
    pytest.param(Scontrol(1, stdout="", stderr="slurm_load_jobs error: Invalid job id"),
                 id="scontrol fails"),
    pytest.param(Scontrol(0, stdout="No jobs in the system"), id="no JobState"),
    pytest.param(Scontrol(error=FileNotFoundError("scontrol")), id="no scontrol"),
    pytest.param(Scontrol(error=subprocess.TimeoutExpired(["scontrol"], 30)), id="no answer"),
])
def test_job_ending_unknown(run):
    assert rq.job_ending("12", run) is None


@pytest.mark.parametrize("run, message", [
    (Scontrol(error=FileNotFoundError("scontrol")),
     "job 12 was not requeued: scontrol is not on head's PATH (inside a container without "
     "Slurm's commands?): make scontrol, slurm.conf and munge's socket available there"),
    (Scontrol(error=PermissionError("denied")), "scontrol requeue 12 could not run (denied)"),
    (Scontrol(1, stderr="Invalid job id specified"),
     "scontrol requeue 12 failed (exit 1: Invalid job id specified)"),
], ids=["missing", "cannot run", "failed"])
def test_supervise_s_own_requeue_names_no_fallback(run, message):
    """supervise is the fallback: its failures end with the fix alone."""
    outcome = rq.requeue("12", "head", 75, run, fallback=False)
    assert outcome == rq.RequeueOutcome(False, message)


def test_a_failed_requeue_from_worker_0_names_supervise_s_fallback_and_the_code():
    outcome = rq.requeue("12", "node1", 75, Scontrol(1, stderr="Invalid job id specified"))
    assert outcome == rq.RequeueOutcome(False, "scontrol requeue 12 failed (exit 1: Invalid job "
                                               f"id specified); {FALLBACK}")
