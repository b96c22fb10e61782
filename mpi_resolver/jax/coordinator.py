"""The JAX processes' meeting point for long jobs: JAX's coordination service (its key-value
store and barriers, started by ``jax.distributed.initialize``), as
long_jobs.termination.Coordinator asks, and the choices every process must share (which
checkpoint to restore, the next periodic save, whether the directory may be used). Alone (one
process) it answers at once. Importing this module imports JAX.
"""

from __future__ import annotations

import contextlib
from typing import Any, List, Optional

import jax

from mpi_resolver.long_jobs.agreement import LEAVE_WITHIN, all_values, chief_value, leave_last
from mpi_resolver.long_jobs.termination import _EVENT, _EXIT, _SAVED

__all__ = ["JaxCoordinator", "AGREE_WITHIN"]

#: Seconds a process waits for process 0's word on a shared choice: process 0 is at most a
#: step away, or reading a checkpoint.
AGREE_WITHIN = 600.0


def _client() -> Any:
    """Returns JAX's distributed runtime client (None where JAX runs alone)."""
    from jax._src import distributed

    return distributed.global_state.client


class JaxCoordinator:
    """long_jobs.termination.Coordinator over JAX's coordination service; process 0 is the
    chief (the one that saves and requeues); ``rank`` and ``size``: this process's index and
    the processes' count."""

    def __init__(self) -> None:
        self.rank, self.size = jax.process_index(), jax.process_count()
        self.client = _client() if self.size > 1 else None
        self.chief = self.rank == 0

    def announce(self, event: str) -> None:
        if self.client is not None:
            with contextlib.suppress(Exception):  # already set: another process was first
                self.client.key_value_set(_EVENT, event)

    def event(self, seconds: float) -> Optional[str]:
        return self.get(_EVENT, seconds)

    def barrier(self, seconds: float, tag: str = "") -> bool:
        if self.client is None:
            return True
        try:
            self.client.wait_at_barrier(_SAVED + tag, int(seconds * 1000))
            return True
        except Exception:  # noqa: BLE001 - JAX's timeout: not every process saved in time
            return False

    def publish(self, text: str, tag: str = "") -> None:
        if self.client is not None:
            with contextlib.suppress(Exception):
                self.client.key_value_set(_EXIT + tag, text)

    def read(self, seconds: float, tag: str = "") -> Optional[str]:
        return self.get(_EXIT + tag, seconds)

    def agree(self, key: str, value: str, what: str, seconds: float = AGREE_WITHIN) -> str:
        """Returns process 0's ``value`` for ``key`` on every process (process 0: its own);
        ``what`` says what it is, for the message. Each key is set once: callers make keys
        of their own.

        Raises:
          ResolutionError: process 0's value did not come within ``seconds``.
        """
        if self.client is None:
            return value
        return chief_value(self.chief, self.client.key_value_set, self.get, key, value,
                           what=what, seconds=seconds, who="process 0")

    def gather(self, key: str, value: str, what: str,
               seconds: float = AGREE_WITHIN) -> List[str]:
        """Returns every process's ``value`` for ``key``, in process order (alone: its own);
        ``what`` says what they are, for the message. Each key is used once.

        Raises:
          ResolutionError: a process's value did not come within ``seconds``.
        """
        if self.client is None:
            return [value]
        return all_values(self.rank, self.size, self.client.key_value_set, self.get, key,
                          value, what=what, seconds=seconds, who="process")

    def leave(self, key: str, seconds: float = LEAVE_WITHIN) -> None:
        """Ends this process's part where every process ends right after an agreement: process 0,
        whose process holds the coordination service, returns once every other said under
        ``key`` that it read all it needs (within ``seconds``), the others at once
        (agreement.leave_last)."""
        if self.client is not None:
            leave_last(self.rank, self.size, self.put, self.get, key, seconds=seconds)

    def put(self, key: str, value: str) -> None:
        """Sets ``key`` (a key is set once: a second set is passed over)."""
        if self.client is not None:
            with contextlib.suppress(Exception):
                self.client.key_value_set(key, value)

    def drop(self, key: str) -> None:
        """Deletes ``key`` (passed over where it cannot be)."""
        if self.client is not None:
            with contextlib.suppress(Exception):
                self.client.key_value_delete(key)

    def get(self, key: str, seconds: float) -> Optional[str]:
        """Returns ``key``'s value, None where it is not set within ``seconds``."""
        if self.client is None:
            return None
        try:
            value = self.client.blocking_key_value_get(key, int(seconds * 1000))
        except Exception:  # noqa: BLE001 - not set within the time
            return None
        return value.decode() if isinstance(value, bytes) else value
