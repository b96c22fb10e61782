"""Whether Slurm's signals still reach the watcher, for ``check --deep --signal`` after
TensorFlow's strategy and first all-reduce: every watched signal's handler is still the
watcher's (a library may have installed its own since, as NCCL 2.12 did for USR1), and each,
sent to this process, arrives (the edge: real signals, in the main thread)."""

from __future__ import annotations

import time
from typing import Callable, Optional, Tuple

from mpi_resolver.long_jobs.signals import SIGTERM
from mpi_resolver.long_jobs.watcher import Displaced, SignalWatcher

__all__ = ["unreached", "WAIT"]

#: Seconds a signal sent to this process may take to reach the watcher.
WAIT = 2.0


def _fix(d: Displaced) -> str:
    if d.signal.number == SIGTERM:
        return ("create SlurmTerminationConfig after the strategy and the libraries that take "
                "SIGTERM (TensorFlow's strategy does when it is built), so that it takes it back")
    return (f"use another signal than {d.signal.name}: #SBATCH --signal=USR2@SECONDS and "
            "SlurmTerminationConfig(signal='USR2') (train.py --signal USR2; NCCL 2.12 took "
            "USR1 like this)")


def unreached(watcher: SignalWatcher, wait: float = WAIT,
              clock: Callable[[], float] = time.monotonic,
              sleep: Callable[[float], None] = time.sleep) -> Optional[Tuple[str, str]]:
    """Returns (what is wrong, the likely fix) for the first watched signal that no longer
    reaches ``watcher``, or None where all do. Sends each watched signal to this process, once
    no other handler holds it, and waits up to ``wait`` seconds for it (main thread: Python
    runs signal handlers there); forgets the signals it sent."""
    for d in watcher.displaced():
        return (f"{d.signal.full_name}'s handler is now {d.owner}, installed after "
                "mpi_resolver's watcher: that signal would not save a checkpoint", _fix(d))
    try:
        for s in watcher.signals:
            watcher.forget()
            watcher.deliver(s.number)
            deadline = clock() + wait
            while watcher.arrival is None and clock() < deadline:
                sleep(0.01)
            if watcher.arrival is None:
                return (f"{s.full_name}, sent to this process, did not reach mpi_resolver's "
                        f"watcher within {wait:g} s",
                        "every thread blocks it (pthread_sigmask in a library): use another "
                        "signal, or find what blocks it (grep SigBlk /proc/PID/task/*/status)")
    finally:
        watcher.forget()
    return None
