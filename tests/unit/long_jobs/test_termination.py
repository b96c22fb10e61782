"""long_jobs.termination: from the signal to the exit code, without TensorFlow: what worker 0
decides for each signal and each way Slurm ends a job (scontrol stood in for), what the other
workers take from it, the waits' bounds, and the warning of a save too slow for the grace
period."""

from __future__ import annotations

import subprocess
from typing import List, Optional

import pytest

from mpi_resolver.core import logs as _logs
from mpi_resolver.long_jobs.signals import WarningSignal, parse_signal
from mpi_resolver.long_jobs.termination import (DEFAULT_WAIT, REQUEUE_EXIT_CODE,
                                                 TERMINATED_EXIT_CODE, Policy, Termination,
                                                 slow_save)
from mpi_resolver.long_jobs.watcher import Arrival, Displaced

pytestmark = pytest.mark.unit

USR1, TERM = parse_signal("USR1"), parse_signal("TERM")
JOB = {"SLURM_JOB_ID": "12"}
FALLBACK = ("or run the step under `mpi-resolver supervise` (the templates do), which "
            "requeues the job from the batch step when the step exits 75")


class Watcher:
    """Stands for SignalWatcher: the signal that came (at ``at`` on the fake clock) and the
    handlers others took."""

    def __init__(self, sig: Optional[WarningSignal] = None, at: float = 100.0,
                 displaced: List[Displaced] = (), also: Optional[WarningSignal] = None):
        self.arrival = None if sig is None else Arrival(sig, at, 0.0)
        self._displaced = list(displaced)
        self._came = {s.number for s in (sig, also) if s is not None}

    def displaced(self):
        return self._displaced

    def came(self, number):
        return number in self._came


class Coordinator:
    """Stands for TensorFlow's coordination service: what each call got and answers."""

    def __init__(self, chief=True, saved=True, told=None, event=None):
        self.chief, self.saved, self.told, self._event = chief, saved, told, event
        self.calls: List[tuple] = []

    def announce(self, event):
        self.calls.append(("announce", event))

    def event(self, seconds):
        self.calls.append(("event", seconds))
        return self._event

    def barrier(self, seconds, tag=""):
        self.calls.append(("barrier", seconds) + ((tag,) if tag else ()))
        return self.saved

    def publish(self, text, tag=""):
        self.calls.append(("publish", text) + ((tag,) if tag else ()))

    def read(self, seconds, tag=""):
        self.calls.append(("read", seconds) + ((tag,) if tag else ()))
        return self.told

    def leave(self, key, seconds):
        self.calls.append(("leave", key, seconds))


class Scontrol:
    """Stands for scontrol: `show job` answers with the job's state and reason, `requeue`
    with ``requeue``'s (returncode, output) or raises ``error``."""

    def __init__(self, state="RUNNING", reason="None", requeue=(0, ""), error=None):
        self.state, self.reason, self.requeue, self.error = state, reason, requeue, error
        self.calls: List[List[str]] = []
        self.timeouts: List[float] = []

    def __call__(self, args, timeout):
        self.calls.append(list(args))
        self.timeouts.append(timeout)
        if self.error is not None:
            raise self.error
        if args[0] == "show":
            out = f"JobId=12 JobState={self.state} Reason={self.reason} Restarts=0"
            return subprocess.CompletedProcess(args, 0, out, "")
        return subprocess.CompletedProcess(args, self.requeue[0], "", self.requeue[1])


def termination(sig=USR1, *, warning=USR1, grace=None, requeue=True, on_time_limit=False,
                coordinator=None, run=None, env=JOB, now=101.5, displaced=(), also=None,
                clock=None):
    coordinator = coordinator or Coordinator()
    t = Termination(Policy(warning, grace, requeue, on_time_limit),
                    Watcher(sig, displaced=displaced, also=also), env, lambda: coordinator,
                    run=run or Scontrol(), clock=clock or (lambda: now), host="node1")
    return t, coordinator


@pytest.fixture(autouse=True)
def _fresh_log_memory():
    _logs._logged.clear()
    yield
    _logs._logged.clear()


REQUEUED = "requeued job 12 (scontrol requeue 12)"
#: What is left of DEFAULT_WAIT 1.5 s after the signal (the fake clock's ``now``).
LEFT = DEFAULT_WAIT - 1.5
NOT_ASKED = ("SIGTERM ends the job (the time limit, scancel, Slurm's requeue or preemption; "
             "requeue_on_time_limit=True requeues after the time limit)")


@pytest.mark.parametrize("sig, warning, requeue, on_time_limit, slurm, code, what, calls", [
    pytest.param(USR1, USR1, True, False, Scontrol(), REQUEUE_EXIT_CODE,
                 f"checkpoint saved on SIGUSR1; {REQUEUED}", [["requeue", "12"]],
                 id="the warning signal: requeued"),
    pytest.param(USR1, USR1, False, False, Scontrol(), REQUEUE_EXIT_CODE,
                 "checkpoint saved on SIGUSR1; not requeued: requeue=False", [],
                 id="the warning signal, requeue=False"),
    pytest.param(TERM, USR1, True, False, Scontrol(), TERMINATED_EXIT_CODE,
                 f"checkpoint saved on SIGTERM; not requeued: {NOT_ASKED}", [],
                 id="SIGTERM, not asked: scontrol is not even asked why"),
    pytest.param(TERM, USR1, True, True, Scontrol("COMPLETING", "TimeLimit"),
                 REQUEUE_EXIT_CODE, f"checkpoint saved on SIGTERM; {REQUEUED}",
                 [["show", "job", "-o", "12"], ["requeue", "12"]],
                 id="the time limit, requeue_on_time_limit"),
    pytest.param(TERM, USR1, False, True, Scontrol("COMPLETING", "TimeLimit"),
                 REQUEUE_EXIT_CODE, f"checkpoint saved on SIGTERM; {REQUEUED}",
                 [["show", "job", "-o", "12"], ["requeue", "12"]],
                 id="requeue=False is about the warning signal only"),
    pytest.param(TERM, USR1, True, True, Scontrol("COMPLETING"), TERMINATED_EXIT_CODE,
                 "checkpoint saved on SIGTERM; not requeued: Slurm ends the job (scancel, or "
                 "Slurm's requeue or preemption, which requeues it itself)",
                 [["show", "job", "-o", "12"]], id="scancel still ends the job"),
    pytest.param(TERM, USR1, True, True, Scontrol("RUNNING"), TERMINATED_EXIT_CODE,
                 "checkpoint saved on SIGTERM; not requeued: SIGTERM came while the job runs "
                 "on (scancel --signal=TERM)", [["show", "job", "-o", "12"]],
                 id="scancel --signal=TERM"),
    pytest.param(TERM, USR1, True, True, Scontrol(error=FileNotFoundError()),
                 TERMINATED_EXIT_CODE, "checkpoint saved on SIGTERM; not requeued: scontrol "
                 "could not say why SIGTERM came", [["show", "job", "-o", "12"]],
                 id="scontrol cannot say"),
    pytest.param(TERM, TERM, True, False, Scontrol("RUNNING"), REQUEUE_EXIT_CODE,
                 f"checkpoint saved on SIGTERM; {REQUEUED}",
                 [["show", "job", "-o", "12"], ["requeue", "12"]],
                 id="TERM as the warning (--signal=TERM@N): the job runs on"),
    pytest.param(TERM, TERM, True, False, Scontrol("COMPLETING"), REQUEUE_EXIT_CODE,
                 "checkpoint saved on SIGTERM; not requeued: Slurm ends the job (scancel, or "
                 "Slurm's requeue or preemption, which requeues it itself)",
                 [["show", "job", "-o", "12"]], id="TERM as the warning, but scancel"),
    pytest.param(TERM, TERM, True, False, Scontrol("COMPLETING", "TimeLimit"),
                 REQUEUE_EXIT_CODE, "checkpoint saved on SIGTERM; not requeued: the time "
                 "limit ends the job (requeue_on_time_limit=False)",
                 [["show", "job", "-o", "12"]], id="TERM as the warning, the time limit"),
    pytest.param(TERM, TERM, True, True, Scontrol("COMPLETING", "TimeLimit"),
                 REQUEUE_EXIT_CODE, f"checkpoint saved on SIGTERM; {REQUEUED}",
                 [["show", "job", "-o", "12"], ["requeue", "12"]],
                 id="TERM as the warning, the time limit, requeue_on_time_limit"),
])
def test_worker_0_decides(sig, warning, requeue, on_time_limit, slurm, code, what, calls):
    slurm.calls.clear()  # the table's stand-in outlives a run of the test (mutmut runs twice)
    slurm.timeouts.clear()
    t, coord = termination(sig, warning=warning, requeue=requeue, on_time_limit=on_time_limit,
                           run=slurm)
    assert t.finish() == (code, what)
    assert slurm.calls == calls
    assert coord.calls == [("barrier", LEFT), ("publish", f"{code} {what}"),
                           ("leave", "mpi_resolver_exit_read", LEFT)]
    assert slurm.timeouts == [LEFT] * len(calls)


@pytest.mark.parametrize("slurm, message", [
    pytest.param(Scontrol(requeue=(1, "Requested operation is presently disabled for job 12")),
                 "job 12 cannot be requeued (scontrol requeue 12: Requested operation is "
                 "presently disabled for job 12): submit it with '#SBATCH --requeue' (this "
                 "cluster's JobRequeue is 0)", id="not requeueable"),
    pytest.param(Scontrol(error=FileNotFoundError("scontrol")),
                 "job 12 was not requeued: scontrol is not on node1's PATH (inside a container "
                 "without Slurm's commands?): make scontrol, slurm.conf and munge's socket "
                 f"available there; {FALLBACK}", id="no scontrol in the container"),
])
def test_a_requeue_that_fails_says_the_fix_and_still_75(slurm, message):
    slurm.calls.clear()
    t, _ = termination(run=slurm)
    assert t.finish() == (REQUEUE_EXIT_CODE, f"checkpoint saved on SIGUSR1; {message}")


SUPERVISED = {**JOB, "MPI_RESOLVER_SUPERVISED": "1"}
TO_SUPERVISE = "supervise requeues the job"


@pytest.mark.parametrize("sig, requeue, on_time_limit, also, code, what", [
    (USR1, True, False, None, REQUEUE_EXIT_CODE,
     f"checkpoint saved on SIGUSR1; {TO_SUPERVISE}"),
    (USR1, False, False, None, REQUEUE_EXIT_CODE,
     f"checkpoint saved on SIGUSR1; {TO_SUPERVISE}"),
    (USR1, True, False, TERM, REQUEUE_EXIT_CODE,  # SIGTERM on top: supervise asks why
     f"checkpoint saved on SIGUSR1; {TO_SUPERVISE}"),
    (TERM, True, True, None, REQUEUE_EXIT_CODE, f"checkpoint saved on SIGTERM; {TO_SUPERVISE}"),
    (TERM, True, False, None, TERMINATED_EXIT_CODE,
     "checkpoint saved on SIGTERM; not requeued: SIGTERM ends the job (requeue_on_time_limit="
     "True requeues after the time limit)"),
])
def test_under_supervise_the_code_alone_and_no_scontrol(sig, requeue, on_time_limit, also,
                                                        code, what):
    """supervise sets MPI_RESOLVER_SUPERVISED=1: worker 0 runs no scontrol, and the code says
    what follows (75: run again, supervise requeues; 143: stop)."""
    slurm = Scontrol("COMPLETING", "TimeLimit")
    t, coord = termination(sig, requeue=requeue, on_time_limit=on_time_limit, run=slurm,
                           env=SUPERVISED, also=also)
    assert t.finish() == (code, what)
    assert slurm.calls == []
    assert coord.calls == [("barrier", LEFT), ("publish", f"{code} {what}"),
                           ("leave", "mpi_resolver_exit_read", LEFT)]


@pytest.mark.parametrize("value", ["0", "", "yes"])
def test_only_supervise_s_own_word_leaves_the_requeue_to_it(value):
    slurm = Scontrol()
    t, _ = termination(run=slurm, env={**JOB, "MPI_RESOLVER_SUPERVISED": value})
    assert t.finish() == (REQUEUE_EXIT_CODE, f"checkpoint saved on SIGUSR1; {REQUEUED}")
    assert slurm.calls == [["requeue", "12"]]


def test_not_in_a_job_is_a_requeue_that_could_not_be_done():
    t, _ = termination(env={})
    code, what = t.finish()
    assert code == REQUEUE_EXIT_CODE
    assert what.endswith("SLURM_JOB_ID=None: not in a Slurm job, so there is no job to "
                         "requeue; run the training with srun inside sbatch, or pass "
                         "requeue=False")  # the exit line goes on after it


def test_the_outcome_outside_a_job_is_not_done():
    t, _ = termination(env={})
    outcome = t._requeue()
    assert outcome.done is False and outcome.message.startswith("SLURM_JOB_ID=None")


def test_a_worker_that_did_not_save_is_said():
    t, _ = termination(coordinator=Coordinator(saved=False))
    assert t.finish() == (REQUEUE_EXIT_CODE, (
        "checkpoint saved on SIGUSR1 (not every worker said it had saved: worker 0's "
        f"checkpoint is whole); {REQUEUED}"))


@pytest.mark.parametrize("told, expected", [
    pytest.param("75 checkpoint saved on SIGUSR1; requeued", (75, "checkpoint saved on "
                                                                  "SIGUSR1; requeued"),
                 id="worker 0's word"),
    pytest.param("143 x", (143, "x"), id="its code, whatever it is"),
])
def test_other_workers_take_worker_0_s_code(told, expected):
    run = Scontrol()
    t, coord = termination(coordinator=Coordinator(chief=False, told=told), run=run)
    assert t.finish() == expected
    assert run.calls == []  # only worker 0 requeues
    assert coord.calls == [("barrier", LEFT), ("read", LEFT),
                           ("leave", "mpi_resolver_exit_read", LEFT)]


@pytest.mark.parametrize("sig, code", [(USR1, REQUEUE_EXIT_CODE), (TERM, TERMINATED_EXIT_CODE)])
def test_without_worker_0_s_word_the_signal_decides(sig, code):
    t, coord = termination(sig, coordinator=Coordinator(chief=False, told=None))
    assert t.finish() == (code, "worker 0 did not say whether it requeued the job")
    assert coord.calls == [("barrier", LEFT), ("read", LEFT)]  # worker 0 is gone: no word


@pytest.mark.parametrize("announced, what", [
    pytest.param("TERM", f"checkpoint saved on SIGTERM; not requeued: {NOT_ASKED}",
                 id="a peer's SIGTERM"),
    pytest.param(None, f"checkpoint saved on SIGUSR1; {REQUEUED}",
                 id="nobody said: the warning signal"),
])
def test_a_save_a_peer_s_signal_started_goes_by_that_signal(announced, what):
    t, coord = termination(None, coordinator=Coordinator(event=announced))
    assert t.finish()[1] == what
    assert coord.calls[0] == ("event", DEFAULT_WAIT)


@pytest.mark.parametrize("grace, now, wait", [
    pytest.param(None, 101.5, DEFAULT_WAIT - 1.5, id="no grace period: the default's rest"),
    pytest.param(None, 128.0, 2.0, id="no grace period, 28 s gone: 2 s"),
    pytest.param(None, 127.0, 3.0, id="no grace period, 27 s gone: 3 s"),
    pytest.param(120, 101.5, 118.5, id="what is left of it"),
    pytest.param(120, 218.0, 2.0, id="118 s gone: 2 s left"),
    pytest.param(120, 219.0, 2.0, id="119 s gone: still 2 s"),
    pytest.param(120, 217.0, 3.0, id="117 s gone: 3 s"),
])
def test_waits_are_bounded_by_the_grace_period_left(grace, now, wait):
    t, coord = termination(grace=grace, now=now)
    t.finish()
    assert coord.calls[0] == ("barrier", wait)


def test_after_sigterm_the_waits_are_slurm_s_killwait_not_the_warning_s_grace():
    """The grace period is the warning signal's; SIGTERM gives KillWait (DEFAULT_WAIT)."""
    t, coord = termination(TERM, grace=120, now=101.5)
    t.finish()
    assert coord.calls[0] == ("barrier", DEFAULT_WAIT - 1.5)


def test_watch_announces_the_first_signal_once():
    t, coord = termination()
    assert t.watch() and t.watch()
    assert coord.calls == [("announce", "USR1")]


def test_watch_is_false_until_a_signal_comes():
    t, coord = termination(None)
    assert not t.watch()
    assert coord.calls == []


def test_watch_warns_once_of_a_handler_another_library_took(caplog):
    taken = Displaced(USR1, "libnccl.so.2 (/opt/nccl/lib/libnccl.so.2)")
    t, _ = termination(None, displaced=[taken])
    t.watch()
    t.watch()
    assert [r.getMessage() for r in caplog.records] == [
        "mpi_resolver: SIGUSR1 is now handled by libnccl.so.2 (/opt/nccl/lib/libnccl.so.2), "
        "not by mpi_resolver: that signal will not save a checkpoint; another signal: "
        "--signal=USR2@N with signal='USR2' (NCCL 2.12 took USR1 this way)."]


def test_watch_says_when_tensorflow_took_sigterm(caplog):
    taken = Displaced(TERM, "libtensorflow_cc.so.2 (/venv/tensorflow/libtensorflow_cc.so.2)")
    t, _ = termination(None, displaced=[taken])
    t.watch()
    assert caplog.records[0].getMessage().endswith(
        "that signal will not save a checkpoint; create SlurmTerminationConfig after "
        "tf.distribute.MultiWorkerMirroredStrategy (the strategy takes SIGTERM when it is "
        "built).")


@pytest.mark.parametrize("took, grace, needed", [
    pytest.param(5.0, 20.0, None, id="10 s margin: 15 s needed, 20 given"),
    pytest.param(5.0, 15.0, None, id="exactly the save plus 10 s"),
    pytest.param(5.0, 14.9, 15, id="just short of it"),
    pytest.param(30.0, 60.0, None, id="twice the save"),
    pytest.param(30.0, 59.0, 60, id="less than twice"),
    pytest.param(30.5, 59.0, 61, id="rounded up"),
    pytest.param(None, 10.0, None, id="no signal of our own: nothing measured"),
    pytest.param(50.0, None, None, id="no grace period given"),
])
def test_slow_save(took, grace, needed):
    warning = slow_save(took, grace, USR1)
    if needed is None:
        assert warning is None
    else:
        assert warning == (
            f"the checkpoint was written {took:.1f} s after SIGUSR1, and the grace period is "
            f"{grace:g} s: too short to be sure the save ends before Slurm's kill. Ask for "
            f"the signal at least {needed} s before the end (the save time plus as long "
            f"again, 10 s at least): #SBATCH --signal=USR1@{needed}, and "
            f"grace_period={needed}.")


@pytest.mark.parametrize("sig, warned", [
    pytest.param(USR1, True, id="the warning signal: 5 s after it, 15 s needed, 12 given"),
    pytest.param(TERM, False, id="SIGTERM: KillWait bounds it, not the grace period"),
])
def test_a_slow_save_is_warned_of_after_the_warning_signal_only(sig, warned, caplog):
    termination(sig, grace=12.0, now=105.0)[0].finish()
    said = [r.getMessage() for r in caplog.records if "the grace period is 12 s" in
            r.getMessage()]
    assert len(said) == (1 if warned else 0), said


def test_a_worker_waits_for_worker_0_s_word_as_long_as_the_grace_period_leaves():
    t, coord = termination(coordinator=Coordinator(chief=False, told="75 x"), grace=120,
                           now=101.5)
    assert t.finish() == (75, "x")
    assert coord.calls == [("barrier", 118.5), ("read", 118.5),
                           ("leave", "mpi_resolver_exit_read", 118.5)]


def test_watch_warns_once_per_signal_whoever_took_it_next(caplog):
    """A second library taking the same signal later is not warned of again (one warning a
    signal, not one a library)."""
    first = Displaced(USR1, "libnccl.so.2 (/opt/nccl/lib/libnccl.so.2)")
    t, _ = termination(None, displaced=[first])
    t.watch()
    t.watcher._displaced = [Displaced(USR1, "libother.so (/opt/other/libother.so)")]
    t.watch()
    assert [r.getMessage().split(" is now handled by ")[1].split(",")[0]
            for r in caplog.records] == ["libnccl.so.2 (/opt/nccl/lib/libnccl.so.2)"]


ENDS = ("SIGTERM came during the save and Slurm ends the job (scancel, or Slurm's requeue or "
        "preemption, which requeues it itself)")


@pytest.mark.parametrize("slurm, code, what", [
    pytest.param(Scontrol("COMPLETING"), TERMINATED_EXIT_CODE,
                 f"checkpoint saved on SIGUSR1; not requeued: {ENDS}",
                 id="scancel during the warning's save: not requeued, 143"),
    pytest.param(Scontrol("COMPLETING", "TimeLimit"), REQUEUE_EXIT_CODE,
                 f"checkpoint saved on SIGUSR1; {REQUEUED}",
                 id="the time limit during the warning's save: requeued as the warning asked"),
    pytest.param(Scontrol("RUNNING"), REQUEUE_EXIT_CODE,
                 f"checkpoint saved on SIGUSR1; {REQUEUED}",
                 id="scancel --signal=TERM alone: the job runs on, requeued"),
    pytest.param(Scontrol(error=FileNotFoundError()), TERMINATED_EXIT_CODE,
                 "checkpoint saved on SIGUSR1; not requeued: scontrol could not say why "
                 "SIGTERM came", id="scontrol cannot say: not requeued"),
])
def test_sigterm_on_top_of_the_warning_asks_why(slurm, code, what):
    slurm.calls.clear()
    slurm.timeouts.clear()
    t, _ = termination(USR1, also=TERM, run=slurm)
    assert t.finish() == (code, what)
    assert slurm.calls[0] == ["show", "job", "-o", "12"]


def test_the_warning_alone_never_asks_scontrol_why():
    slurm = Scontrol("COMPLETING")
    t, _ = termination(USR1, run=slurm)
    assert t.finish()[0] == REQUEUE_EXIT_CODE
    assert slurm.calls == [["requeue", "12"]]


def test_a_time_limit_requeue_outside_a_job_is_a_line_not_an_exception():
    t, _ = termination(TERM, on_time_limit=True, env={})
    code, what = t.finish()
    assert code == TERMINATED_EXIT_CODE
    assert what.startswith("checkpoint saved on SIGTERM; not requeued: SLURM_JOB_ID=None: not "
                           "in a Slurm job")


@pytest.mark.parametrize("requeue, code", [
    pytest.param((0, ""), REQUEUE_EXIT_CODE, id="requeued: 75"),
    pytest.param((1, "Requested operation is presently disabled for job 12"),
                 TERMINATED_EXIT_CODE, id="not requeued after the time limit: 143"),
])
def test_after_the_time_limit_75_only_where_the_requeue_worked(requeue, code):
    t, _ = termination(TERM, on_time_limit=True, run=Scontrol("COMPLETING", "TimeLimit",
                                                             requeue=requeue))
    assert t.finish()[0] == code


def test_a_failed_warning_requeue_is_still_75_for_the_batch_script():
    slurm = Scontrol(requeue=(1, "Requested operation is presently disabled for job 12"))
    assert termination(USR1, run=slurm)[0].finish()[0] == REQUEUE_EXIT_CODE


def test_a_failed_save_is_requeued_only_where_a_checkpoint_advanced(caplog):
    """A save that fails on the warning signal (a read-only mount, a full quota) must not
    requeue the job for ever from step 0: without supervise, worker 0 requeues only where a
    checkpoint advanced in this run, else the job ends with exits.SAVE_FAILED."""
    t, coord = termination(USR1, grace=12.0, now=105.0)
    assert t.finish(40, "No space left on device", advanced=True) == (REQUEUE_EXIT_CODE, (
        "the save on SIGUSR1 failed (No space left on device); the job resumes from the newest "
        f"checkpoint that restores; {REQUEUED}"))
    assert not caplog.records  # no slow-save warning for a save that did not happen
    t, coord = termination(USR1, grace=12.0, now=105.0)
    assert t.finish(40, "Read-only file system", advanced=False) == (74, (
        "the save on SIGUSR1 failed (Read-only file system) and no checkpoint advanced in this "
        "run: not requeued (a requeue would redo the run and fail the same save)"))
    assert [c[0] for c in coord.calls[-2:]] == ["publish", "leave"]
    t, coord = termination(USR1, grace=12.0, now=105.0)  # a caller that cannot tell: resumed
    assert t.finish(40, "No space left on device")[0] == REQUEUE_EXIT_CODE


@pytest.mark.parametrize("advanced", [True, False])
def test_under_supervise_a_failed_save_is_74_and_supervise_judges(advanced):
    t, _ = termination(USR1, env=SUPERVISED)
    assert t.finish(40, "Read-only file system", advanced=advanced) == (74, (
        "the save on SIGUSR1 failed (Read-only file system); supervise requeues the job where "
        "a checkpoint advanced in this run, else it ends"))


def test_the_manifest_carries_the_requeue_choices_for_supervise():
    t, _ = termination(USR1, requeue=False, on_time_limit=True)
    assert t.policy.settings() == {"signal": "USR1", "requeue": False,
                                   "requeue_on_time_limit": True}


def test_each_save_meets_under_its_own_step():
    t, coord = termination(coordinator=Coordinator(chief=False, told="75 x"))
    t.finish(40)
    assert coord.calls == [("barrier", LEFT, "_40"), ("read", LEFT, "_40"),
                           ("leave", "mpi_resolver_exit_40_read", LEFT)]
    t, coord = termination()
    code, what = t.finish(7)
    assert coord.calls[-2:] == [("publish", f"{code} {what}", "_7"),
                                ("leave", "mpi_resolver_exit_7_read", LEFT)]


def test_every_wait_shares_one_deadline():
    """The clock moves 1 s at each reading: each wait gets what is left, not a fresh bound."""
    ticks = iter(range(101, 200))
    slurm = Scontrol("COMPLETING", "TimeLimit")
    t, coord = termination(TERM, grace=None, on_time_limit=True, run=slurm,
                           clock=lambda: float(next(ticks)))
    t.finish()
    waits = [c[1] for c in coord.calls if c[0] == "barrier"] + slurm.timeouts
    assert waits == sorted(waits, reverse=True) and len(set(waits)) == len(waits)
    assert len(waits) == 3 and waits[0] < DEFAULT_WAIT - 1
