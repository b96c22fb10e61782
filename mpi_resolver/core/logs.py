"""One-line logs of the 'mpi_resolver' logger, each message once per process."""

from __future__ import annotations

import logging
from typing import Iterable, Set


logger = logging.getLogger("mpi_resolver")
_logged: Set[str] = set()


def log_once(message: str, level: int = logging.WARNING) -> None:
    """Logs ``message`` unless this process logged it before."""
    if message not in _logged:
        _logged.add(message)
        logger.log(level, "mpi_resolver: %s", message)


def log_each(messages: Iterable[str], level: int = logging.WARNING) -> None:
    """Logs each of ``messages`` once per process (log_once)."""
    for message in messages:
        log_once(message, level)
