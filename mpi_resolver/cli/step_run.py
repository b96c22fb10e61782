"""One run of ``mpi-resolver supervise``'s step, the edge: the signals that come to supervise
(noted, and passed on to the step's process group), the step started in a process group of its
own (so that ending it ends mpirun's local ranks too, never only mpirun), its stderr copied
through and read by the launcher's report (step_report), its exit status.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from typing import IO, FrozenSet, List, Optional, Sequence, Set

from mpi_resolver.core.errors import ResolutionError
from mpi_resolver.long_jobs.causes import RunEnd
from mpi_resolver.long_jobs.restarts import SUPERVISED_ENV
from mpi_resolver.long_jobs.step_report import StepReport

__all__ = ["Signals", "run_once", "READER_GRACE", "say", "PREFIX", "CommandNotRun"]

PREFIX = "mpi-resolver supervise: "
#: Seconds to read what the step wrote after it ended (its report is in the pipe by then).
READER_GRACE = 5.0
#: The job's end (Slurm's SIGTERM: time limit, scancel, requeue) and a stop from a terminal:
#: passed on to the step, and no restart follows.
_STOPS = (signal.SIGTERM, signal.SIGHUP, signal.SIGINT)
#: Taken and noted: the warning signal is passed on to the step; another user signal is
#: only said (its default action would end supervise, leaving the step behind).
_USER = (signal.SIGUSR1, signal.SIGUSR2)
#: Seconds between two passes of the warning signal to the running step.
WARNING_AGAIN = 2.0


class CommandNotRun(ResolutionError):
    """The step's command cannot be run (not found, not executable): a usage error."""


def say(line: Optional[str]) -> None:
    """Prints supervise's own ``line`` (nothing for None) on stderr, prefixed."""
    if line:
        sys.stderr.write(PREFIX + line + "\n")
        sys.stderr.flush()


class Signals:
    """The signals that came to supervise (``came``, every one noted) and when the first
    stop came (``stopped_at``, time.monotonic); the running step's process group gets the
    stops and the warning signal (``warning``: its number; ``warned_at``: when it was last
    passed on) passed on. ``warned_file``: a
    file the batch script's trap creates when the warning signal comes to it (B:), so that
    supervise knows it whenever it came (before supervise started, between two runs)."""

    def __init__(self, warning: int, warned_file: Optional[str] = None) -> None:
        self.warning = warning
        self.warned_file = warned_file
        self.came: Set[int] = set()
        self.stopped_at: Optional[float] = None
        self.warned_at: Optional[float] = None  # the warning's last pass to the step
        self.child: Optional[subprocess.Popen] = None
        self._unwatched: Set[int] = set()

    def handle(self, number: int, _frame: object) -> None:
        """Notes a signal; passes a stop or the warning signal on to the running step."""
        self.came.add(number)
        if number in (int(s) for s in _STOPS) and self.stopped_at is None:
            self.stopped_at = time.monotonic()
        if number in (int(s) for s in _STOPS) or number == self.warning:
            self.forward(number)
        else:
            self._unwatched.add(number)

    def forward(self, number: int) -> None:
        """Sends ``number`` to the running step's process group, if a step runs."""
        child = self.child
        if child is not None and child.poll() is None:
            if number == self.warning:
                self.warned_at = time.monotonic()
            try:
                os.killpg(child.pid, number)
            except ProcessLookupError:
                pass

    def install(self) -> None:
        """Makes ``handle`` the handler of every signal supervise takes (the step, a new
        program, gets the default actions back)."""
        for number in {*(int(s) for s in _STOPS + _USER), self.warning}:
            signal.signal(number, self.handle)

    @property
    def stopping(self) -> bool:
        """Returns whether a stop (SIGTERM, SIGHUP, SIGINT) came."""
        return self.stopped_at is not None

    def snapshot(self) -> FrozenSet[int]:
        """Returns the signals that came so far; the warning signal too where the batch
        script's trap marked that it came (``warned_file`` exists: it came to the batch
        shell, and went to the tasks from there)."""
        if self.warned_file and os.path.exists(self.warned_file):
            self.came.add(self.warning)
        return frozenset(self.came)

    def unwatched(self) -> List[int]:
        """Returns the user signals that came and are not the warning signal (said once)."""
        out, self._unwatched = sorted(self._unwatched), set()
        return out


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


def _wait(child: subprocess.Popen, signals: Signals, stop_timeout: float) -> int:
    """Returns the child's exit status (128 + N for signal N), killing its process group
    where it has not ended ``stop_timeout`` seconds after a stop signal. Once the warning
    signal came (to supervise, or to the batch script, which marks it: ``warned_file``), it
    is passed on to the step, and again every WARNING_AGAIN seconds while the step runs: srun
    drops a signal that comes before it has launched its tasks (measured: a restarted step
    warned while it started trained to its end), and the package's tasks take it again
    harmlessly (one save)."""
    deadline: Optional[float] = None
    while True:
        try:
            status = child.wait(timeout=0.2)
            return status if status >= 0 else 128 - status
        except subprocess.TimeoutExpired:
            pass
        last = signals.warned_at  # passed on by handle(), at the step's start, or here
        if signals.warning in signals.snapshot() and (
                last is None or time.monotonic() - last >= WARNING_AGAIN):
            signals.forward(signals.warning)
        if signals.stopping and deadline is None:
            deadline = time.monotonic() + stop_timeout
        if deadline is not None and time.monotonic() > deadline:
            say(f"the step did not end within {stop_timeout:g} s of the stop: its process "
                "group killed (SIGKILL)")
            signals.forward(int(signal.SIGKILL))
            deadline = float("inf")


def run_once(argv: Sequence[str], signals: Signals, stop_timeout: float) -> RunEnd:
    """Returns how one run of the step ended.

    Raises:
      CommandNotRun: the command cannot be run (not found, not executable).
    """
    started = time.monotonic()
    report = StepReport()
    try:
        child = subprocess.Popen(list(argv), stderr=subprocess.PIPE, start_new_session=True,
                                 env={**os.environ, SUPERVISED_ENV: "1"})
    except OSError as e:
        raise CommandNotRun(f"supervise could not run {argv[0]!r}: {e.strerror}; check "
                              "the command's name and PATH.") from e
    signals.child = child
    for number in sorted(signals.came):  # came while the step was starting
        if number in (int(s) for s in _STOPS) or number == signals.warning:
            signals.forward(number)
    assert child.stderr is not None
    reader = threading.Thread(target=_copy, args=(child.stderr, report), daemon=True)
    reader.start()
    status = _wait(child, signals, stop_timeout)
    # A process the step left behind (a daemon, mpirun's helpers) may hold the pipe open:
    # what srun and mpirun report is read by then; do not wait for it to close.
    reader.join(READER_GRACE)
    child.stderr.close()
    signals.child = None
    return RunEnd(status, report, time.monotonic() - started)
