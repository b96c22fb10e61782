"""The processes' agreements over a coordination service's key-value store (framework-free:
the edges pass their store's ``put`` and ``get``): process 0's value for all, every process's
value for all, and the way out where every process ends right after one."""

from __future__ import annotations

import time
from typing import Callable, List, Optional

from mpi_resolver.core.errors import ResolutionError

__all__ = ["chief_value", "all_values", "leave_last", "LEAVE_WITHIN"]

#: Seconds the chief waits, before it ends, for the others to have read an agreement: they
#: are reading already (a value put), so a process that has not said so by then has died.
LEAVE_WITHIN = 60.0

Put = Callable[[str, str], None]
Get = Callable[[str, float], Optional[str]]


def chief_value(chief: bool, put: Put, get: Get, key: str, value: str, *,
                what: str, seconds: float, who: str = "worker 0") -> str:
    """Returns the chief's ``value`` for ``key`` on every worker: the chief ``put``s it and
    keeps its own; another worker ``get``s it within ``seconds``. ``what`` and ``who`` (the
    chief, in the framework's words) are for the message.

    Raises:
      ResolutionError: the chief's value did not come within ``seconds``.
    """
    if chief:
        put(key, value)
        return value
    told = get(key, seconds)
    if told is None:
        raise ResolutionError(f"{who} did not say {what} within {seconds:g} s: is it still "
                              "running? Its output says why it stopped.")
    return told


def all_values(rank: int, size: int, put: Put, get: Get, key: str, value: str, *,
               what: str, seconds: float, who: str = "worker") -> List[str]:
    """Returns every worker's ``value`` for ``key``, in rank order: this one (``rank`` of
    ``size``) ``put``s its own under ``key``/``rank`` and ``get``s the others', all within
    one bound of ``seconds``. ``what`` and ``who`` (a worker, in the framework's words) are
    for the message.

    Raises:
      ResolutionError: a worker's value did not come within ``seconds``.
    """
    put(f"{key}/{rank}", value)
    said, deadline = [], time.monotonic() + seconds
    for other in range(size):
        one = get(f"{key}/{other}", max(deadline - time.monotonic(), 0.001))
        if one is None:
            raise ResolutionError(f"{who} {other} did not say {what} within {seconds:.0f} s: "
                                  "is it still running?")
        said.append(one)
    return said


def leave_last(rank: int, size: int, put: Put, get: Get, key: str, *,
               seconds: float) -> List[int]:
    """Where every process ends right after an agreement (one error raised on all, or an exit
    agreed): process ``rank`` (of ``size``) other than 0 ``put``s under ``key``/``rank`` that
    it has read all it needs, and goes; process 0, whose process holds the coordination
    service (its end closes it: a read still under way would fail), ``get``s every other's
    word first, all within one bound of ``seconds``. Returns the processes that did not say
    it in time (process 0; none elsewhere)."""
    if rank != 0:
        put(f"{key}/{rank}", "read")
        return []
    deadline = time.monotonic() + seconds
    return [other for other in range(1, size)
            if get(f"{key}/{other}", max(deadline - time.monotonic(), 0.001)) is None]
