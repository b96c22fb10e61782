"""A communicator wrapper that records the collectives and messages started through it, and
through the duplicates made from it, with the bytes each receive can bring (its buffer)."""

from __future__ import annotations

from typing import Any, List, Optional


def _recv_bytes(name: str, args: tuple) -> int:
    """Returns the bytes a receive of ``name`` can bring, from its receive buffer spec."""
    spec = args[1] if name != "Irecv" else args[0]
    if name == "Iallgatherv":
        return sum(spec[1][0])
    buf = spec[0] if isinstance(spec, (list, tuple)) else spec
    return len(buf)


class CountingComm:
    """Wraps a communicator; ``collectives`` and ``messages`` list what was started, in order,
    ``received`` adds up the receive buffers (for Irecv: its size, an upper bound)."""

    COLLECTIVES = {"Barrier", "Bcast", "Gather", "Allgather", "Iallgather", "Iallgatherv",
                   "Allreduce", "Iallreduce", "allgather", "bcast", "gather", "allreduce",
                   "Ibcast", "Igather", "Split", "Split_type", "Dup", "Idup", "Alltoall",
                   "barrier", "Ibarrier"}
    RECEIVES = {"Iallgather", "Iallgatherv", "Iallreduce", "Irecv"}

    def __init__(self, comm: Any, parent: Optional["CountingComm"] = None) -> None:
        self._comm = comm
        self._root = parent._root if parent is not None else self
        if parent is None:
            self.collectives: List[str] = []
            self.messages: List[str] = []
            self.received = 0

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._comm, name)
        root = self._root
        if name in self.COLLECTIVES:
            root.collectives.append(name)
        if name in ("Isend", "Irecv"):
            root.messages.append(name)
        if name == "Idup":
            def idup(*args: Any, **kwargs: Any) -> Any:
                dup, request = attr(*args, **kwargs)
                return CountingComm(dup, self), request
            return idup
        if name in self.RECEIVES:
            def receive(*args: Any, **kwargs: Any) -> Any:
                root.received += _recv_bytes(name, args)
                return attr(*args, **kwargs)
            return receive
        return attr
