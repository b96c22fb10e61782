"""The step watchdog's backstop (the edge: faulthandler): faulthandler's own timer thread
needs no interpreter lock, so where a hung process holds it (a C extension spinning with the
lock held, a deadlock inside Python's own code), and the watchdog's Python thread never runs,
the backstop still writes every thread's stacks and ends the process (faulthandler's exit
status, 1, after its "Timeout (H:MM:SS)!" line) a margin after the step's limit. The peers
that only wait for it wait longer than that margin, so that the stuck process ends first and
is the one its launcher reports, and supervise blames.
"""

from __future__ import annotations

import faulthandler
import io
import time
from typing import Callable, Optional, TextIO

__all__ = ["Backstop", "margin", "MARGIN_MIN", "MARGIN_SHARE"]

#: The backstop fires this long after the step's limit at least ...
MARGIN_MIN = 10.0
#: ... and a tenth of the limit for long steps (a 300-s limit: 30 s more).
MARGIN_SHARE = 0.1
#: Seconds between two armings of faulthandler's timer (each one starts a thread).
REARM_EVERY = 1.0


def margin(limit: float) -> float:
    """Returns the seconds between a step's limit and its backstop."""
    return max(MARGIN_MIN, MARGIN_SHARE * limit)


class Backstop:
    """faulthandler's timer for the current step: ``arm(limit)`` at its start (at most once
    a REARM_EVERY seconds, or when the limit moves), ``cancel()`` while no step is watched.
    Without a real file to write to (``stream`` has no file descriptor) it does nothing."""

    def __init__(self, stream: Optional[TextIO], clock: Callable[[], float] = time.monotonic
                 ) -> None:
        self._stream, self._clock = stream, clock
        self._armed_at: Optional[float] = None
        self._limit: Optional[float] = None

    def usable(self) -> bool:
        """Returns whether faulthandler can write to the stream (a real file)."""
        try:
            return self._stream is not None and self._stream.fileno() >= 0
        except (AttributeError, ValueError, io.UnsupportedOperation):
            return False

    def arm(self, limit: float) -> None:
        """Ends the process with its stacks margin(limit) after ``limit`` seconds from now,
        unless armed again or cancelled first."""
        now = self._clock()
        recent = self._armed_at is not None and now - self._armed_at < REARM_EVERY
        if (recent and self._limit == limit) or not self.usable():
            return
        faulthandler.dump_traceback_later(limit + margin(limit), exit=True,
                                          file=self._stream)  # type: ignore[arg-type]
        self._armed_at, self._limit = now, limit

    def cancel(self) -> None:
        """No backstop until armed again."""
        if self._armed_at is not None:
            faulthandler.cancel_dump_traceback_later()
        self._armed_at = self._limit = None
