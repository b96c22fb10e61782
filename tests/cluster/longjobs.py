"""Drives requeued jobs on the throw-away cluster for tests/cluster/test_long_jobs.py: submits
a batch job, interrupts each run the way Slurm does (a signal, a requeue, the time limit,
scancel), lets a requeued job start again at once, and reads each run's part of the job's
appended output. Several jobs run at once, each driven by a thread of its own.

A requeued job waits for its BeginTime (the requeue + 121 s, Slurm's CredExpire + 1): once it
is PENDING with Reason=BeginTime and the requeue 2 s old (tests/harness/requeue.py),
``scontrol update JobId=J StartTime=now`` lets it start at the scheduler's next pass (about a
second); the requeue itself is real."""

from __future__ import annotations

import concurrent.futures
import os
import re
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence

from mpi_resolver.long_jobs.requeue import job_fields
from tests.harness.requeue import start_due
from tests.harness.slurm_cluster import SlurmCluster

#: How a run is interrupted: a signal as `#SBATCH --signal=USR1@N` sends it (to every task of
#: the job's steps), twice in a row (the second while saving), `scontrol requeue` (SIGTERM;
#: Slurm requeues the job), `scancel` (SIGTERM; the job ends), the time limit (nothing to
#: do but wait), or nothing (the run completes).
USR1, USR1_TWICE, REQUEUE, CANCEL, TIME_LIMIT, NONE = (
    "USR1", "USR1 twice", "scontrol requeue", "scancel", "time limit", "none")
#: Two more, for the restart policy: task 1's Python killed (SIGKILL), then, once supervise
#: restarts the step, the warning signal to the batch script (as `--signal=B:USR1@N` sends it)
#: while the restarted step starts; and the checkpoint directory made read-only on every node
#: (a bind mount remounted read-only), then the warning signal to the batch script.
WARN_AT_RESTART, READ_ONLY = "warned at the restart", "read-only"
#: For the job's report: task 1's Python killed (SIGKILL); once the restarted step trains
#: again, `mpi-resolver status` on its checkpoint directory (kept in Job.status), then the
#: warning signal to the batch script: a restart, then a requeue.
KILL_THEN_WARN = "killed, then warned"
STEPS_DONE = re.compile(r"^steps done: (\d+) \(resumed from (\d+)\)$", re.M)
_RUN = re.compile(r"^== job \d+ \(run (\d+)\)", re.M)
_PERIODIC = re.compile(r"checkpoint ckpt-\d+ at step \d+ \(periodic\)")
_FINAL = ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT")


#: Jobs the Driver runs at a time (8 tasks training at most), and the seconds between their
#: starts: a job's start takes about 16 s of CPU (the preflight, TensorFlow's import on both
#: tasks), 8 s of the machine's two cores.
AT_ONCE, STAGGER = 4, 10.0


@dataclass
class Job:
    """One batch job and how each of its runs is interrupted (``interrupts[i]`` for run
    i + 1, the first interrupted after the chief's first progress line of that run)."""

    name: str
    argv: List[str]
    interrupts: Sequence[str]
    output: Path
    env: Dict[str, str] = field(default_factory=dict)
    target: str = ""  #: what to signal: the job id, or '<array id>_<task>'
    #: What a run prints once it trains (the chief's progress): the interrupt waits for it.
    progress: str = "  step "
    #: Minutes of the requeued runs (`scontrol update TimeLimit=`), for a job whose first run
    #: ends at a short time limit: the next run's start (imports, the strategy: seconds, but a
    #: minute on a loaded 2-core machine) must not race the same limit.
    later_time_limit: Optional[int] = None
    #: Seconds a run may take to end once interrupted (or, uninterrupted, to complete): a
    #: hang's bound, which a job of more steps than the others raises with them.
    run_seconds: float = 300.0
    job_id: str = ""
    error: Optional[str] = None
    states: List[str] = field(default_factory=list)  #: the job's state after each run
    started: float = 0.0
    seconds: float = 0.0
    cleanups: List[List[str]] = field(default_factory=list)  #: commands run at the end
    status: str = ""  #: `mpi-resolver status`'s output, where an interrupt asked for it

    def text(self) -> str:
        return self.output.read_text(errors="replace") if self.output.exists() else ""

    def runs(self) -> List[str]:
        """Returns each run's part of the output: what follows its '== job J (run N)' line
        (the templates print it), or the whole output as one run."""
        text = self.text()
        starts = [m.start() for m in _RUN.finditer(text)]
        if not starts:
            return [text]
        return [text[a:b] for a, b in zip(starts, starts[1:] + [len(text)], strict=True)]

    def steps(self) -> List[tuple]:
        """Returns every run's (steps done, resumed from), in order."""
        return [tuple(int(g) for g in m.groups()) for m in STEPS_DONE.finditer(self.text())]

    def context(self) -> str:
        return f"{self.name} (job {self.job_id}): {self.error or ''}\n{self.text()[-6000:]}"


def show(cluster: SlurmCluster, target: str) -> Dict[str, str]:
    """Returns `scontrol show job -o TARGET`'s fields (empty where it fails)."""
    return job_fields(cluster.run(["scontrol", "show", "job", "-o", target], timeout=30).stdout)


def job_task_pids(cluster: SlurmCluster, job_id: str) -> Dict[int, int]:
    """{task: PID} of job ``job_id``'s Python tasks on ``cluster`` (their environment names
    the job and the cluster's slurm.conf; processes of the emulated nodes are this
    machine's)."""
    marks = {f"SLURM_CONF={cluster.env['SLURM_CONF']}".encode(),
             f"SLURM_JOB_ID={job_id}".encode()}
    out: Dict[int, int] = {}
    for entry in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes().split(b"\0")
            if not any(b"train" in part for part in cmdline[1:2]):
                continue
            environ = Path(f"/proc/{entry}/environ").read_bytes().split(b"\0")
        except OSError:
            continue  # gone meanwhile
        task = [v for v in environ if v.startswith(b"SLURM_PROCID=")]
        if marks <= set(environ) and task and b"SLURM_STEP_ID=batch" not in environ:
            out[int(task[0].split(b"=")[1])] = int(entry)
    return out


def wait_for(condition: Callable[[], bool], seconds: float, what: str) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {seconds:g} s waiting for {what}")
        time.sleep(0.2)


class Driver:
    """Runs jobs side by side on ``cluster``, at most ``at_once`` at a time, their starts
    ``stagger`` seconds apart; each job's thread submits it and plays its runs. A job's runs
    import TensorFlow on both tasks and train: ten jobs at once (20 such tasks, their
    preflights too) put the load average of the 2-core machine at 29-38 for two minutes, in
    which a 4-rank step of the tests beside them (tests/cluster) could not start in 120 s."""

    def __init__(self, cluster: SlurmCluster, timeout: float = 400.0,
                 at_once: int = AT_ONCE, stagger: float = STAGGER) -> None:
        self.cluster, self.timeout, self.stagger = cluster, timeout, stagger
        self.at_once = at_once
        self.jobs: List[Job] = []
        self._slots = threading.Semaphore(at_once)
        self._turn = threading.Lock()
        self._next_start = 0.0
        #: The status command (``mpi-resolver status``, run from this checkout).
        self.status_command = [sys.executable, "-m", "mpi_resolver", "status"]

    def add(self, job: Job) -> Job:
        self.jobs.append(job)
        return job

    def run(self) -> None:
        threads = [threading.Thread(target=self._drive, args=(job,), daemon=True)
                   for job in self.jobs]
        for t in threads:
            t.start()
        waves = -(-len(self.jobs) // self.at_once)
        deadline = time.monotonic() + self.timeout * waves + self.stagger * len(self.jobs)
        for t in threads:
            t.join(max(0.0, deadline - time.monotonic()))
        for job in self.jobs:
            if job.job_id:
                self.cluster.run(["scancel", job.job_id], timeout=30)
            for args in job.cleanups:
                subprocess.run(args, capture_output=True, timeout=30)

    def _wait_turn(self) -> None:
        """Returns ``stagger`` seconds after the last job's start (at once for the first)."""
        with self._turn:
            now = time.monotonic()
            start = max(now, self._next_start)
            self._next_start = start + self.stagger
        time.sleep(start - now)

    def _drive(self, job: Job) -> None:
        with self._slots:
            self._wait_turn()
            job.started = time.monotonic()
            try:
                r = self.cluster.run(["sbatch", "--parsable", "--requeue", "--open-mode=append",
                                      f"--output={job.output}", *job.argv], env=job.env,
                                     timeout=30)
                if r.returncode != 0:
                    raise RuntimeError(f"sbatch failed: {r.stderr}")
                job.job_id = r.stdout.strip().split(";")[0]
                job.target = job.target.replace("JOB", job.job_id) or job.job_id
                for number, interrupt in enumerate(job.interrupts, 1):
                    self._play(job, number, interrupt)
                if job.target != job.job_id:  # an array task: the others end too, untouched
                    wait_for(lambda: self._array_ended(job), 300, "the array's other tasks")
            except Exception as e:  # noqa: BLE001 - the test reports it with the output
                job.error = f"{type(e).__name__}: {e}"
            job.seconds = time.monotonic() - job.started

    def _play(self, job: Job, number: int, interrupt: str) -> None:
        """Plays run ``number``: waits for it to start (its '== job J (run N)' line), interrupts
        it once its chief reported a step, then lets a requeued job start again."""
        wait_for(lambda: len(_RUN.findall(job.text())) >= number or self._ended(job), 300,
                 f"run {number}'s start")
        if len(_RUN.findall(job.text())) < number:
            raise RuntimeError(f"run {number} never started: the job ended ({job.states})")
        if interrupt not in (NONE, TIME_LIMIT):
            wait_for(lambda: job.progress in job.runs()[-1], 300, f"run {number}'s training")
            self._interrupt(job, interrupt)
        wait_for(lambda: self._between_runs(job), job.run_seconds, f"run {number}'s end")
        state = show(self.cluster, job.target)
        job.states.append(f"{state.get('JobState')} {state.get('Reason')} "
                          f"Restarts={state.get('Restarts')}")
        if state.get("Reason") == "BeginTime":
            self._settle(job, number)
            limit = [] if job.later_time_limit is None else [f"TimeLimit={job.later_time_limit}"]
            r = self.cluster.run(["scontrol", "update", f"JobId={job.target}", *limit,
                                  "StartTime=now"], timeout=30)
            if r.returncode != 0:
                raise RuntimeError(f"scontrol update of job {job.target} failed: {r.stderr}")

    def _settle(self, job: Job, number: int) -> None:
        """Waits until `StartTime=now` may be sent (tests/harness/requeue.py: the requeue
        2 s old; sent in its own second, the launch fails)."""
        last: Dict[str, str] = {}

        def due() -> bool:
            last.clear()
            last.update(show(self.cluster, job.target))
            return start_due(last, time.time())

        try:
            wait_for(due, 30, f"run {number}'s requeue to settle")
        except TimeoutError as e:
            seen = " ".join(f"{k}={last.get(k)}" for k in ("JobState", "Reason", "SubmitTime"))
            raise TimeoutError(f"{e}; last seen {seen} at {time.strftime('%H:%M:%S')}") from None

    def _interrupt(self, job: Job, interrupt: str) -> None:
        if interrupt == WARN_AT_RESTART:
            self._kill_then_warn(job)
            return
        if interrupt == KILL_THEN_WARN:
            self._kill_then_warn_training(job)
            return
        if interrupt == READ_ONLY:
            self._read_only(job)
            self._warn(job)
            return
        commands = {USR1: [["scancel", "--signal=USR1", job.target]],
                    USR1_TWICE: [["scancel", "--signal=USR1", job.target]] * 2,
                    REQUEUE: [["scontrol", "requeue", job.target]],
                    CANCEL: [["scancel", job.target]]}[interrupt]
        for argv in commands:
            r = self.cluster.run(argv, timeout=30)
            if r.returncode != 0:
                raise RuntimeError(f"{' '.join(argv)} failed: {r.stderr}")

    def _warn(self, job: Job) -> None:
        """The warning signal to the batch script, as `#SBATCH --signal=B:USR1@N` sends it."""
        r = self.cluster.run(["scancel", "--batch", "--signal=USR1", job.target], timeout=30)
        if r.returncode != 0:
            raise RuntimeError(f"scancel --batch --signal=USR1 failed: {r.stderr}")

    def _kill_then_warn(self, job: Job) -> None:
        """SIGKILLs task 1's Python; once supervise restarts the step, warns the batch
        script while the new step starts (its tasks' handlers not armed yet, or just)."""
        pids = job_task_pids(self.cluster, job.job_id)
        if 1 not in pids:
            raise RuntimeError(f"task 1 of job {job.job_id} not found: {pids}")
        os.kill(pids[1], signal.SIGKILL)
        wait_for(lambda: "restart 1 of" in job.runs()[-1], 120, "supervise's restart")
        self._warn(job)

    def _kill_then_warn_training(self, job: Job) -> None:
        """SIGKILLs task 1's Python; once the restarted step trains (a step's line after
        the restart), asks `mpi-resolver status`, then warns the batch script."""
        pids = job_task_pids(self.cluster, job.job_id)
        if 1 not in pids:
            raise RuntimeError(f"task 1 of job {job.job_id} not found: {pids}")
        os.kill(pids[1], signal.SIGKILL)

        def training_again() -> bool:
            after = job.runs()[-1].split("restart 1 of", 1)
            return len(after) == 2 and "  step " in after[1]

        def saved_again() -> bool:
            return bool(_PERIODIC.search(job.runs()[-1].split("restart 1 of", 1)[-1]))

        wait_for(training_again, 180, "the restarted step's training")
        wait_for(saved_again, 120, "the restarted step's first periodic save")  # for status
        r = subprocess.run([*self.status_command, job.env["CHECKPOINT_DIR"]],
                           capture_output=True, text=True, timeout=60)
        job.status = r.stdout + r.stderr
        self._warn(job)

    def _read_only(self, job: Job) -> None:
        """Makes the job's checkpoint directory read-only on every node (and here) at once,
        undone when the Driver ends (Job.cleanups): a read-only view of it (a bind mount
        nothing writes through, remounted read-only) mounted over it. Remounting a bind
        mount of the directory itself read-only fails (EBUSY) where the training opened a
        file for writing through it in between, as a save does."""
        directory = job.env["CHECKPOINT_DIR"]
        for i, prefix in enumerate([[], *(self.cluster.on_node(n)
                                          for n in self.cluster.node_names)]):
            view = f"{directory}.read-only-{i}"
            os.makedirs(view, exist_ok=True)
            for args in (["mount", "--bind", directory, view],
                         ["mount", "-o", "remount,ro,bind", view],
                         ["mount", "--bind", view, directory]):
                r = subprocess.run([*prefix, *args], capture_output=True, text=True, timeout=30)
                if r.returncode != 0:
                    raise RuntimeError(f"{' '.join(args)} failed: {r.stderr}")
            job.cleanups += [[*prefix, "umount", directory], [*prefix, "umount", view]]

    def _ended(self, job: Job) -> bool:
        return show(self.cluster, job.target).get("JobState") in _FINAL

    def _array_ended(self, job: Job) -> bool:
        """True once no task of ``job``'s array is in the queue (the run() that follows
        cancels what is left: a task still training would be cut)."""
        r = self.cluster.run(["squeue", "-h", "-j", job.job_id, "-o", "%i"], timeout=30)
        return r.returncode == 0 and not r.stdout.strip()

    def _between_runs(self, job: Job) -> bool:
        """True once the job is requeued and waits (PENDING, BeginTime) or has ended."""
        state = show(self.cluster, job.target)
        return (state.get("Reason") == "BeginTime" and state.get("JobState") == "PENDING") \
            or state.get("JobState") in _FINAL


class Early:
    """A measurement on the long-job cluster that test_long_jobs.py starts early, in a thread
    of its own, so that its minutes of waiting go by while the long jobs run; its module's
    fixture takes the answer (``result``), or measures then where nothing started it."""

    def __init__(self, measure: Callable[..., Any]) -> None:
        self.measure = measure
        self._started: Optional[concurrent.futures.Future] = None

    def start(self, *args: Any) -> None:
        pool = concurrent.futures.ThreadPoolExecutor(1)
        self._started = pool.submit(self.measure, *args)
        pool.shutdown(wait=False)

    def result(self, *args: Any, timeout: float = 600) -> Any:
        """Returns the early measurement's answer (once), else measure(*args)'s."""
        started, self._started = self._started, None
        return self.measure(*args) if started is None else started.result(timeout=timeout)
