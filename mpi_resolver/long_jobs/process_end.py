"""The end of a process after the save on Slurm's signal, for every framework: its exit code
whatever the framework's teardown does (TensorFlow's took seconds and once hung past KillWait
after a requeue; JAX's waits for its coordination service, measured past KillWait after the
time limit), so that supervise, or srun, sees the code in time."""

from __future__ import annotations

import atexit
import os
import sys
import threading

__all__ = ["end_with", "EXIT_WITHIN"]

#: Seconds the process may take to end after the save, its script's cleanup included.
EXIT_WITHIN = 10.0


def end_with(code: int, seconds: float) -> None:
    """Makes this process end with exit status ``code``: at the first at-exit handler (after
    the script's own code: its except and finally blocks), or after ``seconds`` whatever it is
    doing then."""
    def now() -> None:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)

    atexit.register(now)  # the last registered: the first to run
    timer = threading.Timer(seconds, now)
    timer.daemon = True
    timer.start()
