"""mpi-resolver supervise: runs a step (``srun ...``, ``mpirun ...``), reads its launcher's
report of a failed task, and runs it again in the same allocation as the restart policy
(long_jobs/restarts) says; the edge: the subprocess, its stderr, the signals.

It imports neither mpi4py nor TensorFlow and resolves nothing: it runs in the batch script,
one process, beside the step.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from typing import IO, List, Mapping, Optional, Sequence

from mpi_resolver.core.errors import ResolutionError
from mpi_resolver.long_jobs.requeue import (SCONTROL_TIMEOUT, Runner, job_ending, requeue,
                                             requeue_target, run_scontrol)
from mpi_resolver.long_jobs.restarts import (FAILURES_TO_LEAVE_OUT, REQUEUED_EXIT,
                                              SIGTERM_EXIT, STOP_TIMEOUT, SUPERVISED_ENV,
                                              Action, RunEnd, decide, left_out,
                                              requeue_refusal, say)
from mpi_resolver.long_jobs.srun_options import job_nodes, read_srun
from mpi_resolver.long_jobs.step_report import StepReport

PREFIX = "mpi-resolver supervise: "
#: Passed on to the step, and the end of restarts: Slurm's SIGTERM (time limit, scancel,
#: requeue), a hang-up. SIGINT is noted only: a terminal sends it to the step's processes too.
_FORWARDED = (signal.SIGTERM, signal.SIGHUP)
#: Noted and not acted on: a warning signal sent with `scancel --full` reaches the tasks
#: itself (and its default action would end supervise, leaving the step behind).
_NOTED = (signal.SIGINT, signal.SIGUSR1, signal.SIGUSR2)


def _say(line: Optional[str]) -> None:
    """Prints supervise's own ``line`` (nothing for None) on stderr, prefixed."""
    if line:
        sys.stderr.write(PREFIX + line + "\n")
        sys.stderr.flush()


class _Stop:
    """The signal that told supervise to stop (None until one came), passed on to the
    running step."""

    def __init__(self) -> None:
        self.signal: Optional[int] = None
        self.at: Optional[float] = None  # when it came (time.monotonic)
        self.child: Optional[subprocess.Popen] = None

    def handle(self, number: int, _frame: object) -> None:
        """Notes a stop signal (the first one counts) and passes SIGTERM and SIGHUP on;
        SIGUSR1 and SIGUSR2 change nothing."""
        if number in (signal.SIGUSR1, signal.SIGUSR2):
            return
        if self.signal is None:
            self.signal, self.at = number, time.monotonic()
        if number != signal.SIGINT:
            self.forward(number)

    def forward(self, number: int) -> None:
        """Sends ``number`` to the running step, if one runs."""
        if self.child is not None and self.child.poll() is None:
            self.child.send_signal(number)

    def install(self) -> None:
        """Makes ``handle`` the handler of every signal supervise takes (the step, a new
        program, gets the default actions back)."""
        for number in _FORWARDED + _NOTED:
            signal.signal(number, self.handle)


def _copy(source: IO[bytes], report: StepReport) -> None:
    """Copies the step's stderr to supervise's as it comes, unchanged, and feeds its lines
    to ``report``."""
    out = sys.stderr.buffer
    pending = b""
    while chunk := os.read(source.fileno(), 65536):
        out.write(chunk)
        out.flush()
        *lines, pending = (pending + chunk).split(b"\n")
        for line in lines:
            report.feed(line.decode(errors="replace"))
    if pending:
        report.feed(pending.decode(errors="replace"))


def _wait(child: subprocess.Popen, stop: _Stop, stop_timeout: float) -> int:
    """Returns the child's exit status (128 + N for signal N), killing it where it has not
    ended ``stop_timeout`` seconds after a stop signal."""
    deadline: Optional[float] = None
    while True:
        try:
            status = child.wait(timeout=0.2)
            return status if status >= 0 else 128 - status
        except subprocess.TimeoutExpired:
            pass
        if stop.signal is not None and deadline is None:
            deadline = time.monotonic() + stop_timeout
        if deadline is not None and time.monotonic() > deadline:
            _say(f"the step did not end within {stop_timeout:g} s of "
                 f"{signal.Signals(stop.signal or signal.SIGTERM).name}: killed (SIGKILL)")
            child.kill()
            deadline = float("inf")


#: Seconds to read what the step wrote after it ended (its report is in the pipe by then).
READER_GRACE = 5.0


def run_once(argv: Sequence[str], stop: _Stop, stop_timeout: float) -> RunEnd:
    """Returns how one run of the step ended.

    Raises:
      ResolutionError: the command cannot be run (not found, not executable).
    """
    started = time.monotonic()
    report = StepReport()
    try:
        child = subprocess.Popen(list(argv), stderr=subprocess.PIPE,
                                 env={**os.environ, SUPERVISED_ENV: "1"})
    except OSError as e:
        raise ResolutionError(f"supervise could not run {argv[0]!r}: {e.strerror}; check "
                              "the command's name and PATH.") from e
    stop.child = child
    if stop.signal not in (None, signal.SIGINT):  # came while the step was starting
        stop.forward(stop.signal)
    assert child.stderr is not None
    reader = threading.Thread(target=_copy, args=(child.stderr, report), daemon=True)
    reader.start()
    status = _wait(child, stop, stop_timeout)
    # A process the step left behind (a daemon, mpirun's helpers) may hold the pipe open:
    # what srun and mpirun report is read by then; do not wait for it to close.
    reader.join(READER_GRACE)
    child.stderr.close()
    return RunEnd(status, report.first, stop.signal, time.monotonic() - started)


def supervise(command: Sequence[str], max_restarts: int, *,
              job_nodes: Optional[int] = None, stop_timeout: float = STOP_TIMEOUT) -> int:
    """Runs ``command`` until it ends in a way the policy does not restart; returns the exit
    status (the step's own on success and 75, the last failure's when the restarts are used
    up). ``job_nodes``: the allocation's nodes (SLURM_JOB_NUM_NODES), for spare nodes."""
    stop = _Stop()
    stop.install()
    srun = read_srun(command)
    spare = srun.spare(job_nodes) if srun is not None else 0
    failed: List[Optional[str]] = []
    argv, restarts = list(command), 0
    while True:
        end = run_once(argv, stop, stop_timeout)
        decision = decide(end, restarts, max_restarts)
        _say(say(decision, end, max_restarts, os.path.basename(command[0]), restarts))
        if decision.action is Action.REQUEUED:
            return requeue_job(end.stop_signal, stop.at, os.environ)
        if decision.action is not Action.RESTART:
            return decision.status
        failed.append(end.failure.node if end.failure is not None else None)
        argv = _next_argv(command, failed, spare)
        restarts = decision.restart


#: Seconds from Slurm's SIGTERM to its SIGKILL where nothing says (KillWait's default).
KILL_WAIT = 30.0


def requeue_job(stop_signal: Optional[int], since: Optional[float], env: Mapping[str, str],
                run: Runner = run_scontrol) -> int:
    """Requeues the job after the step's exit 75 where the policy allows (``stop_signal``:
    the signal that came to supervise, at ``since`` on time.monotonic; after SIGTERM
    scontrol is asked why, within what is left of KillWait); says what it did; returns the
    exit status: 75 (to run again), or 143 where the job ends."""
    try:
        target = requeue_target(env)
    except ResolutionError:  # mpirun without Slurm: nobody to requeue the job
        _say(f"the step asks to run again; SLURM_JOB_ID={env.get('SLURM_JOB_ID')!r}: not in a "
             f"Slurm job, so no job is requeued: exit {REQUEUED_EXIT}")
        return REQUEUED_EXIT

    def left() -> float:
        if since is None:
            return SCONTROL_TIMEOUT
        return max(KILL_WAIT - (time.monotonic() - since), 2.0)

    ending = job_ending(target, run, left()) if stop_signal == signal.SIGTERM else None
    refusal = requeue_refusal(stop_signal, ending)
    if refusal is not None:
        _say(f"job {target} is not requeued: {refusal}: exit {SIGTERM_EXIT}")
        return SIGTERM_EXIT
    outcome = requeue(target, socket.gethostname(), REQUEUED_EXIT, run, left(),
                      fallback=False)
    _say(f"{outcome.message}: exit {REQUEUED_EXIT}")
    return REQUEUED_EXIT


def _next_argv(command: Sequence[str], failed: Sequence[Optional[str]], spare: int) -> List[str]:
    """Returns the next run's command line: srun's with the nodes that failed twice left out
    where the job has spare nodes (said once each), else the command as given."""
    srun = read_srun(command)
    nodes = left_out(failed, spare)
    if srun is None or not nodes:
        return list(command)
    argv = srun.leaving_out(nodes)
    if left_out(failed[:-1], spare) != nodes:
        more = f"{spare} node{'s' * (spare != 1)} more than the step"
        _say(f"{nodes[-1]} failed {FAILURES_TO_LEAVE_OUT} times: the next run leaves it out "
             f"({argv[srun.program_at]}; the job has {more})")
    return argv


def main(command: Sequence[str], max_restarts: int) -> int:
    """Runs ``mpi-resolver supervise``, the allocation's node count from SLURM_JOB_NUM_NODES;
    returns the exit status (2 where the command cannot be run, as exec)."""
    try:
        return supervise(command, max_restarts, job_nodes=job_nodes(os.environ))
    except ResolutionError as e:
        _say(f"error: {e}")
        return 2
