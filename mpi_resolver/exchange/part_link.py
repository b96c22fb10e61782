"""Checkpoint parts between ranks over MPI (the node-local tier's partner copies and their
way back at a restore): point to point on a duplicate of the communicator, so that none of
its messages can match the user's; each part's size first, then its bytes; every transfer
bounded by a deadline, a rank that does not answer named, never waited for past it."""

from __future__ import annotations

import ctypes
import time
from typing import Any, Callable, Collection, Dict, List, Mapping, Optional, Tuple

from mpi_resolver.core.errors import ExchangeTimeout
from mpi_resolver.exchange.transport import _wait, import_mpi, mpi_initialized

__all__ = ["PartLink", "World"]

#: Each transfer's two tags: its count (every rank counts its transfers alike) in a range of
#: its own, so that a message a rank gave up on never matches a later transfer's.
_TAG_BASE, _TAG_SPAN = 10, 16000


class PartLink:
    """Transfers between the ranks of ``comm`` (its duplicate, made within ``seconds``:
    every rank makes its PartLink at the same point). ``sent`` and ``received``: bytes.

    Raises:
      ExchangeTimeout: the duplicate was not made within ``seconds`` (a rank is missing).
    """

    def __init__(self, comm: Any, seconds: float) -> None:
        self._MPI = import_mpi()
        self.rank, self.size = comm.Get_rank(), comm.Get_size()
        dup, request = comm.Idup()
        if not _wait(request, time.monotonic() + seconds):
            raise ExchangeTimeout(f"the ranks of this job did not all reach the node-local "
                                  f"tier's start within {seconds:g} s")
        self._comm = dup
        self.sent = self.received = 0
        self._count = 0

    def transfer(self, sends: Mapping[int, Any], sources: Collection[int], seconds: float,
                 into: Optional[Callable[[int, int], Any]] = None) -> Tuple[Dict[int, Any],
                                                                             List[int]]:
        """Sends each of ``sends`` (rank: bytes, or any buffer) and receives one part from
        each rank of ``sources``, all within ``seconds`` (every rank makes its transfers in
        the same order, one call each, with or without parts to send), each into the buffer
        ``into(rank, size)`` returns (else a bytearray); returns (the parts received, by
        rank, each the buffer MPI filled: no copy; the ranks that did not answer in time,
        sorted: a part not received or a send not taken)."""
        MPI, comm = self._MPI, self._comm
        deadline = time.monotonic() + seconds
        tag_size = _TAG_BASE + 2 * (self._count % _TAG_SPAN)
        tag_part, self._count = tag_size + 1, self._count + 1
        sizes = {s: bytearray(8) for s in sources}
        waiting = {s: comm.Irecv([sizes[s], MPI.BYTE], source=s, tag=tag_size)
                   for s in sources}
        outgoing = {d: (bytearray(len(b).to_bytes(8, "little")), b) for d, b in sends.items()}
        posted = {d: [comm.Isend([head, MPI.BYTE], dest=d, tag=tag_size),
                      comm.Isend([body, MPI.BYTE], dest=d, tag=tag_part)]
                  for d, (head, body) in outgoing.items()}
        received = self._receive(waiting, sizes, tag_part, deadline, seconds,
                                 into or (lambda _, size: bytearray(size)))
        late = [d for d, requests in posted.items()
                if not all(_wait(r, deadline, spin=seconds) for r in requests)]
        for d in late:
            _keep(posted[d], outgoing[d])
        self.sent += sum(len(b) for d, b in sends.items() if d not in late)
        return received, sorted(set(sources) - set(received) | set(late))

    def _receive(self, waiting: Mapping[int, Any], sizes: Mapping[int, bytearray],
                 tag: int, deadline: float, seconds: float,
                 into: Callable[[int, int], Any]) -> Dict[int, Any]:
        """Returns the parts received by ``deadline``, by rank: each rank's that told its
        size (``waiting``, into ``sizes``), then sent it (``tag``) into ``into``'s buffer."""
        parts: Dict[int, Any] = {}
        reading: Dict[int, Any] = {}
        for s, request in waiting.items():
            if _wait(request, deadline):
                parts[s] = into(s, int.from_bytes(sizes[s], "little"))
                reading[s] = self._comm.Irecv([parts[s], self._MPI.BYTE], source=s, tag=tag)
            else:
                self._give_up(request, sizes[s])
        received: Dict[int, Any] = {}
        for s, request in reading.items():  # its peer is sending: Test() back to back
            if _wait(request, deadline, spin=seconds):
                received[s] = parts[s]
                self.received += len(parts[s])
            else:
                self._give_up(request, parts[s])
        return received

    def _give_up(self, request: Any, buffer: Any) -> None:
        """Cancels a receive that did not complete; keeps it and its buffer."""
        request.Cancel()
        _keep(request, buffer)


def _keep(*given_up: Any) -> None:
    """Keeps requests given up on and their buffers until the process ends: MPI may still
    read or write such a buffer until MPI_Finalize, which mpi4py calls after the interpreter
    freed its objects (a send's buffer freed before it was seen crashed a rank there). A
    reference never dropped keeps each."""
    for one in given_up:
        ctypes.pythonapi.Py_IncRef(ctypes.py_object(one))


class World:
    """MPI's world as the node-local tier reaches it (long_jobs.local_saves.World): this
    process's rank, a PartLink over it, whether a thread beside the training may use it.
    Nothing here starts MPI: a process that has not started it has rank -1."""

    def rank(self) -> int:
        """Returns this process's rank in MPI's world, -1 where MPI does not run."""
        return int(import_mpi().COMM_WORLD.Get_rank()) if mpi_initialized() else -1

    def link(self, seconds: float) -> PartLink:
        """Returns a PartLink over MPI's world (every rank at the same point; see PartLink)."""
        return PartLink(import_mpi().COMM_WORLD, seconds)

    def threads_multiple(self) -> bool:
        """Returns whether MPI lets every thread call it (MPI_THREAD_MULTIPLE, what mpi4py
        asks for)."""
        mpi = import_mpi()
        return bool(mpi.Query_thread() == mpi.THREAD_MULTIPLE)
