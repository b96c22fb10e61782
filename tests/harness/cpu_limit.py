"""A process's CPU limited for real, by PID (for the slow-rank benchmark and tests): SIGSTOP
for STOPPED seconds of every PERIOD, as cpulimit(1) does, so that it runs 70 % of its time
whatever else the machine runs (a CPU quota's share would shrink with the machine's load);
and processes pinned to one CPU (``pin``), so that whatever else the machine runs weighs the
same on the ranks of one step."""

from __future__ import annotations

import os
import signal
import threading
import time
from typing import List

__all__ = ["Limit", "STOPPED", "PERIOD", "pin", "cpus"]

#: SIGSTOP for this long of every PERIOD seconds: the limited process runs 70 % of its time.
STOPPED, PERIOD = 0.03, 0.1


class Limit(threading.Thread):
    """Holds ``pid`` to 70 % of its time from start() until stop() or its end."""

    def __init__(self, pid: int) -> None:
        super().__init__(daemon=True)
        self.pid, self.done = pid, threading.Event()

    def run(self) -> None:
        try:
            while not self.done.is_set():
                os.kill(self.pid, signal.SIGSTOP)
                time.sleep(STOPPED)
                os.kill(self.pid, signal.SIGCONT)
                time.sleep(PERIOD - STOPPED)
        except ProcessLookupError:
            pass

    def stop(self) -> None:
        """Ends the limit and leaves the process running."""
        self.done.set()
        self.join(1)
        try:
            os.kill(self.pid, signal.SIGCONT)
        except ProcessLookupError:
            pass


def cpus() -> List[int]:
    """Returns the CPUs this process may run on, in order."""
    return sorted(os.sched_getaffinity(0))


def pin(pid: int, cpu: int) -> None:
    """Pins every thread of process ``pid`` (and the threads they start) to ``cpu``."""
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            os.sched_setaffinity(int(tid), {cpu})
        except (ProcessLookupError, FileNotFoundError):
            pass  # the thread ended meanwhile
