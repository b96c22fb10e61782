"""One-line logs of the 'mpi_resolver' logger, each message once per process, on standard
error as they are ('mpi_resolver: ...') where nobody configured logging: as Python's last
resort prints them, and still so after a library's ``logging.warning()`` set up the root
logger with basicConfig's defaults (absl in TensorFlow's save, Orbax, do: the lines would
then read 'WARNING:mpi_resolver:mpi_resolver: ...'). Where the script configured logging,
the lines go to its handlers, in its format.
"""

from __future__ import annotations

import logging
import sys
from typing import Iterable, Set

__all__ = ["logger", "log_once", "log_each", "unconfigured"]

logger = logging.getLogger("mpi_resolver")
_logged: Set[str] = set()


def unconfigured(root: logging.Logger) -> bool:
    """Returns whether nobody configured logging: ``root`` has no handler, or only the one a
    bare ``logging.basicConfig()`` makes (to standard error, in BASIC_FORMAT), which Python's
    ``logging.warning()`` and its kin make by themselves for any library that calls them."""
    return all(type(h) is logging.StreamHandler and h.stream in (sys.stderr, sys.__stderr__)
               and h.formatter is not None and h.formatter._fmt == logging.BASIC_FORMAT
               for h in root.handlers)


class _AsTheyAre(logging.Handler):
    """Writes each record's message alone to standard error where logging is unconfigured,
    and then keeps it from the root's handlers (decided for each record: propagation is
    looked at after this handler ran)."""

    def emit(self, record: logging.LogRecord) -> None:
        mine = unconfigured(logging.getLogger())
        logger.propagate = not mine
        if mine:
            try:
                sys.stderr.write(record.getMessage() + "\n")
                sys.stderr.flush()
            except Exception:  # noqa: BLE001 - as logging's own handlers do
                self.handleError(record)


logger.addHandler(_AsTheyAre())


def log_once(message: str, level: int = logging.WARNING) -> None:
    """Logs ``message`` unless this process logged it before."""
    if message not in _logged:
        _logged.add(message)
        logger.log(level, "mpi_resolver: %s", message)


def log_each(messages: Iterable[str], level: int = logging.WARNING) -> None:
    """Logs each of ``messages`` once per process (log_once)."""
    for message in messages:
        log_once(message, level)
