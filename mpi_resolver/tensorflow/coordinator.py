"""The workers' meeting point in TensorFlow: the coordination service's key-value store and
barriers, for the exit after a save and the choices every worker must share (the TensorFlow
edge; importing this module imports TensorFlow)."""

from __future__ import annotations

import contextlib
from typing import List, Optional

import tensorflow as tf
from tensorflow.python.eager import context

from mpi_resolver.long_jobs.agreement import LEAVE_WITHIN, all_values, chief_value, leave_last
from mpi_resolver.long_jobs.termination import _EVENT, _EXIT, _SAVED

__all__ = ["TfCoordinator", "AGREE_WITHIN"]

#: Seconds a worker waits for the chief's word on a shared choice (the checkpoint restored,
#: the next periodic save): the chief is at most a step away, or reading a checkpoint.
AGREE_WITHIN = 600.0


class TfCoordinator:
    """Coordinator over TensorFlow's coordination service (its key-value store and
    barriers) for worker ``rank`` of ``size`` (the chief's 0); alone (``multi`` False) it
    answers at once."""

    def __init__(self, chief: bool, multi: bool, rank: int = 0, size: int = 1) -> None:
        self.chief, self.multi = chief, multi
        self.rank, self.size = (rank, size) if multi else (0, 1)

    def announce(self, event: str) -> None:
        if self.multi:
            with contextlib.suppress(tf.errors.OpError):  # AlreadyExists: another was first
                context.context().set_config_key_value(_EVENT, event)

    def event(self, seconds: float) -> Optional[str]:
        return self.get(_EVENT, seconds)

    def barrier(self, seconds: float, tag: str = "") -> bool:
        if not self.multi:
            return True
        try:
            context.context().wait_at_barrier(_SAVED + tag, int(seconds * 1000))
            return True
        except tf.errors.OpError:
            return False

    def publish(self, text: str, tag: str = "") -> None:
        if self.multi:
            with contextlib.suppress(tf.errors.OpError):
                context.context().set_config_key_value(_EXIT + tag, text)

    def read(self, seconds: float, tag: str = "") -> Optional[str]:
        return self.get(_EXIT + tag, seconds)

    def agree(self, key: str, value: str, what: str, seconds: float = AGREE_WITHIN) -> str:
        """Returns the chief's ``value`` for ``key`` on every worker (the chief's own);
        ``what`` says what it is, for the message. Each key is set once: callers make keys
        of their own.

        Raises:
          ResolutionError: the chief's value did not come within ``seconds``.
        """
        if not self.multi:
            return value
        return chief_value(self.chief, context.context().set_config_key_value, self.get, key,
                           value, what=what, seconds=seconds)

    def gather(self, key: str, value: str, what: str,
               seconds: float = AGREE_WITHIN) -> List[str]:
        """Returns every worker's ``value`` for ``key``, in rank order (alone: its own);
        ``what`` says what they are, for the message. Each key is used once.

        Raises:
          ResolutionError: a worker's value did not come within ``seconds``.
        """
        if not self.multi:
            return [value]
        return all_values(self.rank, self.size, context.context().set_config_key_value,
                          self.get, key, value, what=what, seconds=seconds)

    def leave(self, key: str, seconds: float = LEAVE_WITHIN) -> None:
        """Ends this worker's part where every worker ends right after an agreement: worker 0,
        whose process holds the coordination service, returns once every other said under
        ``key`` that it read all it needs (within ``seconds``), the others at once
        (agreement.leave_last)."""
        if self.multi:
            leave_last(self.rank, self.size, self.put, self.get, key, seconds=seconds)

    def put(self, key: str, value: str) -> None:
        """Sets ``key`` (a key is set once: a second set is passed over)."""
        if self.multi:
            with contextlib.suppress(tf.errors.OpError):
                context.context().set_config_key_value(key, value)

    def drop(self, key: str) -> None:
        """Deletes ``key`` (passed over where it cannot be)."""
        if self.multi:
            with contextlib.suppress(tf.errors.OpError):
                context.context().delete_config_key_value(key)

    def get(self, key: str, seconds: float) -> Optional[str]:
        """Returns ``key``'s value, None where it is not set within ``seconds``."""
        if not self.multi:
            return None
        try:
            value = context.context().get_config_key_value(key, int(seconds * 1000))
        except tf.errors.OpError:
            return None
        return value.decode() if isinstance(value, bytes) else value
