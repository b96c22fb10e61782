"""Long jobs for real on the two-node cluster (Slurm's default KillWait, 30 s): examples/
train.py --checkpoint-dir under examples/train.sbatch, interrupted the way Slurm interrupts
jobs, requeued, and resumed at the saved step until the planned total.

Every job below runs at once (a Driver thread each, tests/cluster/longjobs.py), so the file
takes about as long as its longest job (the time limit's: a minute and Slurm's next look).
Each test then reads its job's appended output, run by run."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Dict

import pytest

from tests.cluster import test_signals, test_stale_signal
from tests.cluster.conftest import ROOT
from tests.cluster.longjobs import (CANCEL, KILL_THEN_WARN, NONE, READ_ONLY, REQUEUE,
                                    TIME_LIMIT, USR1, USR1_TWICE, WARN_AT_RESTART, Driver, Job)
from tests.docs.blocks import assert_sample, block
from tests.unit.cli.test_report import plotted

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

PY = sys.executable
OLDEST = ROOT / ".venv-tf215" / "bin" / "python"
TEMPLATE = str(ROOT / "examples" / "train.sbatch")
TRAIN = str(ROOT / "examples" / "train.py")
EPOCHS, STEPS = 4, 250
TOTAL = EPOCHS * STEPS
REPORT_TOTAL = TOTAL  # the report's job (see jobs())
TRAIN_ARGS = ["--epochs", str(EPOCHS), "--steps-per-epoch", str(STEPS), "--log-every", "50"]
EXITED_75 = re.compile(r"task \d: Exited with exit code 75")
#: The time limit's jobs train until it comes (a minute, and Slurm's next look): paced, each step
#: held to PACE seconds (tests/harness/paced_train.py), the wait costs little CPU.
PACED = str(ROOT / "tests" / "harness" / "paced_train.py")
TIME_LIMIT_SCRIPT = """#!/bin/bash
echo "== job $SLURM_JOB_ID (run $(( ${{SLURM_RESTART_COUNT:-0}} + 1 )))"
srun --mpi=pmix --kill-on-bad-exit=1 python {paced} {train} --epochs 1 \\
  --steps-per-epoch 10000000 --log-every 25 --port-base 25170 --checkpoint-dir {ckpt} \\
  --requeue-on-time-limit
"""
#: The time limit's job under supervise, with the templates' traps and wait.
SUPERVISED_TIME_LIMIT_SCRIPT = """#!/bin/bash
echo "== job $SLURM_JOB_ID (run $(( ${{SLURM_RESTART_COUNT:-0}} + 1 )))"
export MPI_RESOLVER_CHECKPOINT_DIR={ckpt}
trap 'interrupted=1' TERM
python -m mpi_resolver supervise -- srun --mpi=pmix --kill-on-bad-exit=1 python {paced} {train} \\
  --epochs 1 --steps-per-epoch 10000000 --log-every 25 --port-base 25190 \\
  --checkpoint-dir {ckpt} --requeue-on-time-limit &
pid=$!
while :; do
  interrupted=0
  status=0
  wait "$pid" || status=$?
  [ "$interrupted" -eq 1 ] || break
done
exit "$status"
"""
#: The report's job: train.py paced in the job's first allocation (its first run and the
#: restarted one, which must still train when status has answered and the warning comes), at
#: its own pace once requeued (SLURM_RESTART_COUNT >= 1) to the end.
FIRST_ALLOCATION_PACED = """import os, runpy, sys
first = os.environ.get("SLURM_RESTART_COUNT", "0") == "0"
sys.argv = [{paced!r}, "--pace", "0.05" if first else "0", {train!r}, *sys.argv[1:]]
runpy.run_path({paced!r}, run_name="__main__")
"""
#: train.py as a container without Slurm's commands would run it: no scontrol on PATH.
NO_SCONTROL = """import os, runpy, sys
os.environ["PATH"] = os.path.dirname(sys.executable)
sys.argv[0] = {train!r}
sys.path.insert(0, os.path.dirname({train!r}))
runpy.run_path({train!r}, run_name="__main__")
"""


def slug(name: str) -> str:
    """Returns a job's name as its directory's: no blanks (paths go unquoted into scripts)."""
    return name.replace(" ", "-")


def env(tmp: Path, name: str, python: str = PY, **extra: str) -> Dict[str, str]:
    """The job's variables: this checkout, ``python`` first on PATH, quiet TensorFlow, one
    thread per worker, train.py, and a checkpoint directory of its own."""
    return {"PATH": f"{Path(python).parent}:/usr/bin:/bin:/usr/sbin:/sbin",
            "PYTHONPATH": str(ROOT), "TF_CPP_MIN_LOG_LEVEL": "2", "OMP_NUM_THREADS": "1",
            "PYTHONDONTWRITEBYTECODE": "1", "TRAIN": TRAIN,
            "CHECKPOINT_DIR": str(tmp / slug(name) / "ckpt"), **extra}


@pytest.fixture(scope="module")
def jobs(longjob_cluster, tmp_path_factory) -> Dict[str, Job]:
    """Runs every job (Driver: at most AT_ONCE at a time, 10 s apart); returns them by name
    once all are done. The signal table's jobs (test_signals.py) and test_stale_signal.py's
    job run meanwhile."""
    # pytest's base directory is made on first use, and not thread-safe: made here, before
    # the early measurements' threads ask for directories in it (two threads once made two,
    # and every later mktemp failed: "longjobs is not a normalized and relative path")
    tmp_path_factory.getbasetemp()
    test_signals.EARLY.start(longjob_cluster, tmp_path_factory)
    test_stale_signal.EARLY.start(longjob_cluster, tmp_path_factory)
    tmp = tmp_path_factory.mktemp("longjobs")
    driver = Driver(longjob_cluster)

    def template(name, interrupts, *args, python=PY, sbatch=(), **extra):
        (tmp / slug(name)).mkdir()
        return driver.add(Job(name, [*sbatch, TEMPLATE, *TRAIN_ARGS, *args], interrupts,
                              tmp / slug(name) / "out.txt", env(tmp, name, python, **extra)))

    # first: the time limit's jobs wait a minute for it (Driver: at most AT_ONCE at a time)
    (tmp / "time-limit").mkdir()
    script = tmp / "time-limit" / "job.sh"
    script.write_text(TIME_LIMIT_SCRIPT.format(paced=PACED, train=TRAIN,
                                               ckpt=tmp / "time-limit" / "ckpt"))
    driver.add(Job("time limit", ["-N2", "--ntasks-per-node=1", "--time=1", str(script)],
                   [TIME_LIMIT, CANCEL], tmp / "time-limit" / "out.txt",
                   env(tmp, "time limit"), later_time_limit=10))  # the 2nd run ends by scancel
    (tmp / "time-limit-supervised").mkdir()
    script = tmp / "time-limit-supervised" / "job.sh"
    script.write_text(SUPERVISED_TIME_LIMIT_SCRIPT.format(
        paced=PACED, train=TRAIN, ckpt=tmp / "time-limit-supervised" / "ckpt"))
    driver.add(Job("time limit, supervised", ["-N2", "--ntasks-per-node=1", "--time=1",
                                              str(script)],
                   [TIME_LIMIT, CANCEL], tmp / "time-limit-supervised" / "out.txt",
                   env(tmp, "time limit, supervised"), later_time_limit=10))
    template("warned at the restart", [WARN_AT_RESTART, NONE], "--port-base", "25195",
             "--checkpoint-every", "50").progress = "  step 100: "  # the save at 50 on disk
    # the report's job: its restarted run must still train when status has answered and the
    # warning comes (unpaced, 1,000 steps once ended first under the load of the benchmarks'
    # clusters beside it; 4,000 cost 40 CPU-s more): paced in the first allocation
    (tmp / "paced-train-first-allocation.py").write_text(
        FIRST_ALLOCATION_PACED.format(paced=PACED, train=TRAIN))
    report = template("the report", [KILL_THEN_WARN, NONE], "--port-base", "25205",
                      "--checkpoint-every", "50", "--log-every", "10", "--epochs",
                      str(REPORT_TOTAL // STEPS),
                      TRAIN=str(tmp / "paced-train-first-allocation.py"))
    report.progress = "  step 60: "
    template("read-only", [READ_ONLY, NONE], "--port-base", "25200", "--checkpoint-every",
             "50").progress = "  step 100: "  # the save at step 50 made: progress in run 1
    # scontrol requeue, then the warning signal twice in the next run: one job for three tests
    template("requeued then warned twice", [REQUEUE, USR1_TWICE, NONE], "--port-base", "25110")
    template("TensorFlow 2.15.1", [USR1, NONE], "--port-base", "25150", python=str(OLDEST))
    # Keras's fit, in a step without scontrol: one job for both tests
    (tmp / "no-scontrol.py").write_text(NO_SCONTROL.format(train=TRAIN))
    template("fit, no scontrol", [USR1, NONE], "--fit", "--port-base", "25160",
             TRAIN=str(tmp / "no-scontrol.py"))
    template("node-local", [NONE], "--port-base", "25180",
             CHECKPOINT_DIR=f"/dev/shm/mpir-test-{uuid.uuid4().hex[:8]}")
    array = template("array task", [USR1, NONE], "--port-base", "auto",
                     sbatch=["--array=0-1"], CHECKPOINT_ROOT=str(tmp / "array-task" / "ckpt"))
    del array.env["CHECKPOINT_DIR"]  # the template's default: a directory per array task
    array.output = tmp / "array-task" / "out-1.txt"
    array.argv.insert(0, f"--output={tmp / 'array-task' / 'out-%a.txt'}")
    array.target = "JOB_1"
    driver.run()
    return {job.name: job for job in driver.jobs}


def resumed_runs(job: Job, runs: int) -> list:
    """Asserts the job ran ``runs`` times, each resuming where the last one saved and the last
    reaching the planned total; returns every run's (steps done, resumed from)."""
    steps = job.steps()
    assert len(steps) == runs, job.context()
    assert steps[0][1] == 0, job.context()
    for (done, _), (_, resumed) in zip(steps[:-1], steps[1:], strict=True):
        assert resumed == done, job.context()  # the next run starts at the saved step
    assert all(0 < done < TOTAL for done, _ in steps[:-1]), job.context()
    assert steps[-1][0] == TOTAL, job.context()
    return steps


def requeued(job_id: str, head: str = "run 1") -> "re.Pattern[str]":
    """Returns supervise's line after a run whose tasks saved: the run, then the requeue."""
    return re.compile(rf"^mpi-resolver supervise: {re.escape(head)}[:;] .*; requeued job "
                      rf"{re.escape(job_id)} \(scontrol requeue {re.escape(job_id)}\): "
                      r"exit 75$", re.M)


def the_last_line_of_each_run_is_the_chief_s_steps_line(job: Job) -> None:
    for run in job.runs():
        chief = [ln for ln in run.splitlines()
                 if re.match(r"(  step |epoch |final test|resumed from|steps done)", ln)]
        assert chief and chief[-1].startswith("steps done: "), job.context()


def test_usr1_saves_requeues_and_the_next_run_finishes(jobs):
    """The warning signal as `#SBATCH --signal=USR1@N` sends it, twice in a row (the second
    while the workers save), in the job's second run: one checkpoint, every task exits 75,
    supervise requeues the job (the tasks run no scontrol), and the next run resumes at the
    saved step, appended to the same output file."""
    job = jobs["requeued then warned twice"]
    assert job.error is None, job.context()
    resumed_runs(job, 3)
    the_last_line_of_each_run_is_the_chief_s_steps_line(job)
    warned = job.runs()[1]
    assert warned.count("checkpoint saved on SIGUSR1") == 1, job.context()
    assert "checkpoint saved on SIGUSR1; supervise requeues the job; exit code 75" in warned
    assert requeued(job.job_id, "run 2").search(warned), job.context()
    assert len(EXITED_75.findall(warned)) == 2, job.context()  # both tasks
    assert job.states[1:] == ["PENDING BeginTime Restarts=2", "COMPLETED None Restarts=2"], \
        job.context()
    assert "resumed from the checkpoint in" in job.runs()[2], job.context()
    assert_sample(block("long-jobs-two-runs"), job.output.read_text(), job.context(),
                  ordered=False)


def test_scontrol_requeue_saves_on_sigterm_and_slurm_requeues(jobs):
    """`scontrol requeue`: SIGTERM to every task; the save, exit 143 (Slurm requeues the job
    itself, worker 0 does not), and the next run resumes."""
    job = jobs["requeued then warned twice"]
    assert job.error is None, job.context()
    resumed_runs(job, 3)
    first = job.runs()[0]
    assert "checkpoint saved on SIGTERM; not requeued: SIGTERM ends the job" in first, first
    assert "Exited with exit code 143" in first, job.context()
    assert "resumed from the checkpoint in" in job.runs()[1], job.context()


def test_fit_saves_and_resumes_at_the_next_batch(jobs):
    job = jobs["fit, no scontrol"]
    assert job.error is None, job.context()
    resumed_runs(job, 2)
    the_last_line_of_each_run_is_the_chief_s_steps_line(job)
    assert "training: model.fit, Keras 2" in job.runs()[1], job.context()


def test_a_job_interrupted_twice_resumes_from_the_second_checkpoint(jobs):
    """Requeued by scontrol, then warned (twice) in its second run: the third run resumes from
    the second run's checkpoint."""
    job = jobs["requeued then warned twice"]
    assert job.error is None, job.context()
    steps = resumed_runs(job, 3)
    assert steps[0][0] < steps[1][0], job.context()
    assert "checkpoint saved on SIGUSR1" in job.runs()[1], job.context()
    assert job.states[-1] == "COMPLETED None Restarts=2", job.context()


def test_tensorflow_2_15_1(jobs):
    job = jobs["TensorFlow 2.15.1"]
    assert job.error is None, job.context()
    resumed_runs(job, 2)
    assert "Keras 2.15" in job.text() or "training: custom loop, Keras 2.15" in job.text(), \
        job.context()


def test_without_scontrol_in_the_step_supervise_requeues(jobs):
    """The tasks have no scontrol (as in a container) and need none: they save and exit 75,
    and supervise, in the batch step, requeues the job."""
    job = jobs["fit, no scontrol"]
    assert job.error is None, job.context()
    resumed_runs(job, 2)
    first = job.runs()[0]
    assert "scontrol is not on" not in first, job.context()
    assert requeued(job.job_id).search(first), job.context()
    assert job.states[-1] == "COMPLETED None Restarts=1", job.context()


def test_an_array_task_is_requeued_by_its_own_name(jobs):
    """Task 1 of a two-task array job is interrupted: worker 0 requeues '<array job>_1' only,
    and it resumes from its own directory; task 0 runs once, untouched (its record is gone
    from slurmctld a minute after it ends, MinJobAge: its output says it)."""
    job = jobs["array task"]
    assert job.error is None, job.context()
    resumed_runs(job, 2)
    array = job.job_id
    assert requeued(f"{array}_1").search(job.runs()[0]), job.context()
    text = (job.output.parent / "out-0.txt").read_text()  # the other task, not interrupted
    assert len(re.findall(r"^== job \d+ \(run \d+\)", text, re.M)) == 1, text
    assert re.findall(r"^steps done: .*$", text, re.M) == [f"steps done: {TOTAL} (resumed "
                                                           "from 0)"], text
    assert sorted(os.listdir(job.output.parent / "ckpt")) == [f"{array}_0", f"{array}_1"]


def test_the_time_limit_requeues_where_asked_and_scancel_ends_the_job(jobs):
    """No warning signal: the time limit's SIGTERM saves, and worker 0 requeues
    (--requeue-on-time-limit, Slurm's Reason=TimeLimit); the next run resumes, and a user's
    scancel then saves once more and ends the job: not requeued, exit 143."""
    job = jobs["time limit"]
    assert job.error is None, job.context()
    (first_done, first_from), (second_done, second_from) = job.steps()
    assert first_from == 0 and second_from == first_done > 0, job.context()
    assert second_done > first_done, job.context()  # saved again on scancel
    first, second = job.runs()
    assert "checkpoint saved on SIGTERM; requeued job" in first, job.context()
    assert "checkpoint saved on SIGTERM; not requeued: Slurm ends the job" in second, \
        job.context()
    assert "Exited with exit code 143" in second or "exit code 143" in second, job.context()
    assert job.states == ["PENDING BeginTime Restarts=1", "CANCELLED None Restarts=1"], \
        job.context()


def test_under_supervise_the_time_limit_requeues_and_scancel_ends_the_job(jobs):
    """The same under supervise: the tasks run no scontrol (exit 75 after the time limit's
    SIGTERM, as --requeue-on-time-limit asks); supervise, signalled too, asks scontrol why:
    the time limit → requeued; the user's scancel in the next run → not requeued, exit 143."""
    job = jobs["time limit, supervised"]
    assert job.error is None, job.context()
    (first_done, first_from), (second_done, second_from) = job.steps()
    assert first_from == 0 and second_from == first_done > 0, job.context()
    assert second_done > first_done, job.context()
    first, second = job.runs()
    assert "checkpoint saved on SIGTERM; supervise requeues the job; exit code 75" in first, \
        job.context()
    assert requeued(job.job_id, "SIGTERM at the time limit came to supervise; run 1").search(
        first), job.context()
    assert re.search(r"^mpi-resolver supervise: SIGTERM \(Slurm ends the job\) came to "
                     r"supervise; run 2: .*: Slurm ends the job \(scancel, or its own requeue "
                     r"or preemption\): exit 143$", second, re.M), job.context()
    assert "scontrol" not in "".join(ln for ln in (first + second).splitlines()
                                     if "supervise:" not in ln), job.context()
    assert job.states == ["PENDING BeginTime Restarts=1", "CANCELLED None Restarts=1"], \
        job.context()


def test_a_node_local_checkpoint_directory_fails_before_training(jobs):
    """/dev/shm: the template's mkdir made it on node1 (the batch script's node) only; the
    preflight names node2, where it is missing, and training never starts."""
    job = jobs["node-local"]
    assert job.error is None, job.context()
    text = job.text()
    assert "== training:" not in text, job.context()
    assert re.search(r"^CHECKPOINT DIR FAILED: /dev/shm/mpir-test-\w+: 1 of 2 nodes cannot use "
                     r"it", text, re.M), job.context()
    assert re.search(r"^node2 +missing .* create it on a shared file system", text, re.M), \
        job.context()
    assert job.states == ["FAILED NonZeroExitCode Restarts=0"], job.context()
    assert not os.path.exists(job.env["CHECKPOINT_DIR"])  # /dev/shm of this host, not a node's


def test_the_warning_during_a_restart_requeues_and_the_next_run_resumes(jobs):
    """Task 1 killed mid-run: supervise restarts the step; the warning signal comes to the
    batch script while the restarted step starts (its tasks die of it before their handlers
    are armed, or save): supervise knows it (the template's mark) and requeues the job from
    the newest checkpoint instead of counting a crash; the next run resumes from it."""
    job = jobs["warned at the restart"]
    assert job.error is None, job.context()
    first = job.runs()[0]
    assert re.search(r"^mpi-resolver supervise: run 1: task 1 on node2: Killed \(signal 9\), "
                     r".*: restart 1 of 3$", first, re.M), job.context()
    assert requeued(job.job_id, "the warning signal came to supervise; run 2").search(first), \
        job.context()
    assert job.states == ["PENDING BeginTime Restarts=1", "COMPLETED None Restarts=1"], \
        job.context()
    steps = job.steps()
    assert steps[-1][0] == TOTAL and steps[-1][1] > 0, job.context()  # resumed, not step 0


def test_a_read_only_checkpoint_directory_mid_run_is_no_storm_and_no_loop(jobs):
    """The job's checkpoint directory turns read-only mid-run (a bind mount remounted read-only
    on every node): the periodic saves fail with a warning each, no save storm; the save on
    the warning signal fails too: the tasks exit 74 and, a checkpoint having advanced in this
    run, supervise requeues once; the next run's preflight finds the directory unwritable and
    ends the job with 73, one table naming it: no requeue loop."""
    job = jobs["read-only"]
    assert job.error is None, job.context()
    first, second = job.runs()
    failed = re.findall(r"the checkpoint at step (\d+) was not saved \(.*Read-only file system",
                        first)
    assert 1 <= len(failed) <= 2 * TOTAL // 50, job.context()  # no storm: one a rule's interval
    assert re.search(r"the save on SIGUSR1 failed \(.*Read-only file system.*\); supervise "
                     r"requeues the job where a checkpoint advanced in this run, else it ends",
                     first), job.context()
    assert requeued(job.job_id, "the warning signal came to supervise; run 1").search(first), \
        job.context()
    assert "CHECKPOINT DIR FAILED" in second and "== training:" not in second, job.context()
    assert job.states == ["PENDING BeginTime Restarts=1", "FAILED NonZeroExitCode Restarts=1"], \
        job.context()


def _durations(text: str) -> str:
    """Returns ``text`` with every duration ('6.42 s', '2.0 min', '1.5 h') as 'T s'."""
    return re.sub(r"\b\d+(?:\.\d+)? (?:s|min|h)\b", "T s", text)


def _report(directory: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([PY, "-m", "mpi_resolver", "report", directory, *args],
                          capture_output=True, text=True, timeout=120)


def test_the_report_tells_what_the_job_went_through(jobs, tmp_path):
    """Task 1 killed (supervise restarts the step), then the warning signal (the tasks save,
    supervise requeues), then the requeued run completes: the ledger's report has the three
    runs, the restart on node2 and the requeue with their causes, the steps lost as the
    output shows them (run 1's last step printed against run 2's resume), an ETTR, and a
    plot; status during run 2 showed
    the newest checkpoint and the rate; supervise's last line is the report's."""
    job = jobs["the report"]
    assert job.error is None, job.context()
    ckpt = job.env["CHECKPOINT_DIR"]
    proc = _report(ckpt, "--json")
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    runs = out["runs"]
    assert [(r["cause"], r["node"], r["then"]) for r in runs] == [
        ("SIGKILL", "node2", "restart"), ("USR1", None, "requeue"),
        ("completed", None, "end")], (out, job.context())
    assert (out["restarts"], out["requeues"], out["steps_done"], out["completed"]) == (
        1, 1, REPORT_TOTAL, True), out
    first, second = job.runs()
    before_kill = first.split("restart 1 of")[0]
    printed = max(map(int, re.findall(r"^  step (\d+): ", before_kill, re.M)))
    resumed = int(re.search(r"resumed from the checkpoint in .* at step (\d+)",
                            first.split("restart 1 of")[1]).group(1))
    assert runs[0]["steps_from"] == 0 and runs[1]["steps_from"] == resumed, out
    # worker 0 outlived its peer (the collective failed) and wrote the step it reached at
    # its exit: at least the last it printed, less than the next it would print (--log-every)
    assert printed - resumed <= out["steps_lost"] < printed - resumed + 10, (
        printed, resumed, out)
    assert out["steps_lost"] == runs[0]["lost"], out  # the signal's save loses nothing
    assert runs[2]["steps_from"] == runs[1]["steps_to"], out
    assert 0 < out["ettr"] < 1, out
    saves = re.findall(r"checkpoint ckpt-\d+ at step (\d+) \(periodic\) in \d+\.\d\d\d s, "
                       r"written in the background in \d+\.\d\d s$", first, re.M)
    assert saves and all(int(s) % 50 == 0 for s in saves), job.context()
    assert re.search(r"checkpoint ckpt-\d+ at step \d+ \(signal\) in ", first), job.context()
    text = _report(ckpt).stdout.splitlines()
    assert text[-1] in second, (text[-1], job.context())  # supervise's line at the end
    assert text[-1].startswith(f"job {job.job_id}: 3 runs, 1 restart (SIGKILL on node2), 1 "
                               f"requeue (USR1), {out['steps_lost']} steps lost, ETTR "), text
    assert re.search(r"^job \d+, run 2 \(running\), started .* ago$", job.status, re.M), \
        job.status
    assert re.search(r"^newest checkpoint: step \d+ \(periodic, .* to save\), .* ago$",
                     job.status, re.M), job.status
    assert re.search(r"^progress: step \d+, .* ago; [\d.]+ steps/s in this run$", job.status,
                     re.M), job.status
    assert re.search(rf"^expected end: step {REPORT_TOTAL} in about .* \(at \d\d:\d\d:\d\d\), at "
                     r"this "
                     r"run's rate", job.status, re.M), job.status  # train.py's total_steps
    # docs/long-jobs.md shows this job's report and status (their times and durations vary)
    assert_sample(_durations(block("report-sample")), _durations("\n".join(text)),
                  job.context())
    assert_sample(_durations(block("status-sample")), _durations(job.status), job.status)
    plot = tmp_path / "job.png"
    drawn = plotted("report", ckpt, "--plot", str(plot))  # matplotlib's .venv-plot
    assert drawn.returncode == 0, drawn.stderr
    assert plot.read_bytes()[:4] == b"\x89PNG"
