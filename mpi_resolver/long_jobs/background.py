"""A checkpoint written in the background: the step pays only the snapshot of its state (the
stall), a thread writes it (the write), one write in flight at the most; the next save, the
signal's save and the end of the training wait for it; a write that failed is kept until
someone asks (framework-free: the snapshot and the write are the caller's)."""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Optional

from mpi_resolver.core.logs import log_once
from mpi_resolver.long_jobs.journal import error_text

__all__ = ["Written", "BackgroundWrites", "write_now", "WRITE_NICE"]

#: What a background write's thread adds to its nice value: where it shares cores with the
#: training, the training's steps come first; on a node whose host cores idle (a GPU node's)
#: it changes nothing.
WRITE_NICE = 10


@dataclass(frozen=True)
class Written:
    """How one background write ended: the ``step`` saved, what the training paid for its
    snapshot (``stall``, seconds) and what the write took (``seconds``), its ``result`` (the
    checkpoint written) or its ``error`` (one line)."""

    step: int
    stall: float
    seconds: float
    result: Any = None
    error: Optional[str] = None


def write_now(step: int, stall: float, write: Callable[[], Any],
              then: Optional[Callable[[], Any]] = None,
              clock: Callable[[], float] = time.monotonic) -> Written:
    """Returns how ``write()`` (the state of ``step``, snapshot in ``stall`` seconds) ended,
    run here; once it is whole, ``then()`` (the older checkpoints' removal), not counted in
    the write's time (its error: one line, the write stays whole)."""
    began = clock()
    try:
        result, error = write(), None
    except Exception as e:  # noqa: BLE001 - disk full, quota: kept for the caller
        result, error = None, error_text(e)
    seconds = clock() - began
    if error is None and then is not None:
        try:
            then()
        except Exception as e:  # noqa: BLE001 - the checkpoint is whole all the same
            log_once(f"the checkpoint of step {step} is whole; the older ones were not "
                     f"removed: {error_text(e)}")
    return Written(step, stall, seconds, result, error)


class BackgroundWrites:
    """Runs each checkpoint's write in a thread of its own, one at a time: ``start`` waits
    for the write in flight first (what that waiting took is the caller's stall too);
    ``done`` (at each step) and ``wait`` (before a save that must be on disk) give each
    finished write once. ``last_seconds``: the newest finished write's time."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._thread: Optional[threading.Thread] = None
        self._finished: Optional[Written] = None
        self.last_seconds: Optional[float] = None

    @property
    def busy(self) -> bool:
        """Returns whether a write is in flight."""
        return self._thread is not None and self._thread.is_alive()

    @property
    def pending(self) -> bool:
        """Returns whether a write was started and its outcome not collected yet."""
        return self._thread is not None

    def start(self, step: int, stall: float, write: Callable[[], Any],
              then: Optional[Callable[[], Any]] = None) -> None:
        """Starts ``write()`` (the state of ``step``, snapshot in ``stall`` seconds) in the
        background; once it is whole, ``then()`` (the older checkpoints' removal) in the
        same thread, not counted in the write's time (its error: one line, the write stays
        whole). The caller has collected (``wait``) the write before it."""
        if self._thread is not None:
            raise RuntimeError("a checkpoint write is in flight or not collected: wait() first")

        def run() -> None:
            lower_priority()
            self._finished = write_now(step, stall, write, then, self._clock)

        self._thread = threading.Thread(target=run, name=f"mpi_resolver-save-{step}",
                                        daemon=True)
        self._thread.start()

    def done(self) -> Optional[Written]:
        """Returns the write that finished since the last call, None while it runs or where
        none was started."""
        if self._thread is None or self._thread.is_alive():
            return None
        return self._collect()

    def wait(self) -> Optional[Written]:
        """Returns the write in flight once it has finished (None where none was started or
        it was collected already)."""
        if self._thread is None:
            return None
        self._thread.join()
        return self._collect()

    def _collect(self) -> Optional[Written]:
        finished, self._finished, self._thread = self._finished, None, None
        if finished is not None:
            self.last_seconds = finished.seconds
        return finished



def lower_priority(by: int = WRITE_NICE) -> None:
    """Adds ``by`` to the calling thread's nice value (Linux: each thread has its own); where
    it cannot, leaves it."""
    try:
        tid = threading.get_native_id()
        os.setpriority(os.PRIO_PROCESS, tid, os.getpriority(os.PRIO_PROCESS, tid) + by)
    except OSError:
        pass
