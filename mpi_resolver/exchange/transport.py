"""The MPI edge: mpi4py imported lazily, and the exchange's transport on its own duplicate of
the communicator, every wait bounded by one deadline (see protocol.py for the steps)."""

from __future__ import annotations

import ctypes
import glob
import json
import os
import sys
import time
from typing import Any, Dict, List, Optional, Sequence, Tuple

from mpi_resolver.core.errors import ExchangeTimeout, MissingDependencyError, ResolutionError
from mpi_resolver.launch.mpi_library import MpiLibrary


# Tags of the failure path only (see MpiTransport._missing): the one time mpi_resolver sends
# on the user's communicator is when the exchange's own duplicate of it could not be made.
_TAG_ARRIVE = 30571
_TAG_VERDICT = 30572
_TAG_NODE = 1  # on the duplicate, which no one else uses
_FIX = ("They may have died, be stuck before creating the resolver, or be slow to start; "
        "raise timeout= (--timeout) if start-up is just slow.")


def import_mpi() -> Any:
    """Returns mpi4py's MPI module (importing it initialises MPI).

    Raises:
      MissingDependencyError: mpi4py or its MPI library is not installed.
    """
    try:
        from mpi4py import MPI
    except ImportError as e:
        raise MissingDependencyError(
            f"mpi4py could not be imported ({e}). Install it with `pip install mpi4py` and an "
            "MPI library (Debian: `apt-get install openmpi-bin libopenmpi-dev`), or use "
            "source='slurm' to resolve from Slurm's variables alone.") from e
    return MPI


def mpi_initialized() -> bool:
    """Returns True when this process has already started MPI (without starting it)."""
    mod = sys.modules.get("mpi4py.MPI")
    return bool(mod is not None and mod.Is_initialized() and not mod.Is_finalized())


def finalize() -> None:
    """Ends MPI where this process started it (and has not ended it); else does nothing."""
    if mpi_initialized():
        sys.modules["mpi4py.MPI"].Finalize()


def mpi_library() -> Optional[MpiLibrary]:
    """Returns the MPI library mpi4py loads, read without starting MPI (mpi4py >= 4 loads it
    through its _mpiabi module; MPI_Get_library_version may be called before MPI_Init), or
    None where mpi4py or its library cannot be loaded."""
    try:
        if mpi_initialized():
            text = import_mpi().Get_library_version()
        else:
            from mpi4py import _mpiabi  # mpi4py >= 4 (the floor in pyproject.toml)

            lib = _mpiabi._dlopen_libmpi()  # type: ignore[attr-defined, unused-ignore]
            buf, n = ctypes.create_string_buffer(8192), ctypes.c_int()
            if lib.MPI_Get_library_version(buf, ctypes.byref(n)) != 0:
                return None
            text = buf.value.decode("utf-8", "replace")
    except Exception:  # noqa: BLE001 - any failure means "cannot tell", never an error
        return None
    return MpiLibrary(text, _open_mpi_pmix_components() if "Open MPI" in text else frozenset())


def _open_mpi_pmix_components() -> frozenset:
    """Returns the names of the PMIx components beside the loaded libmpi ('ext3x', 's2')."""
    try:
        with open("/proc/self/maps") as f:
            paths = {line.split()[-1] for line in f if "libmpi.so" in line}
    except OSError:
        return frozenset()
    found = set()
    for path in paths:  # <libdir>/openmpi*/ (Open MPI's own layout), Debian's multiarch layout
        here = os.path.dirname(path)
        for pattern in ("openmpi*/mca_pmix_*.so", "openmpi/lib/openmpi*/mca_pmix_*.so"):
            for component in glob.glob(os.path.join(here, pattern)):
                found.add(os.path.basename(component)[len("mca_pmix_"):-len(".so")])
    return frozenset(found)


def world(comm: Any = None) -> Tuple[Any, int, int]:
    """Returns (communicator, rank, size): ``comm`` or MPI.COMM_WORLD (which starts MPI)."""
    if comm is None:
        comm = import_mpi().COMM_WORLD
    return comm, comm.Get_rank(), comm.Get_size()


def wait_for_all(seconds: float, start: bool = False) -> None:
    """Waits, at most ``seconds``, until every rank of COMM_WORLD gets here. Where this process
    has not started MPI: starts it if ``start`` (every rank of the launch must do the same),
    else returns at once."""
    if not mpi_initialized() and not start:
        return
    _wait(import_mpi().COMM_WORLD.Ibarrier(), time.monotonic() + seconds)


def _ranges(ranks: List[int]) -> str:
    """Returns ranks as a compact list: [1, 2, 3, 7] -> '1-3,7'."""
    spans: List[List[int]] = []
    for r in ranks:
        if spans and spans[-1][1] == r - 1:
            spans[-1][1] = r
        else:
            spans.append([r, r])
    return ",".join(str(a) if a == b else f"{a}-{b}" for a, b in spans)


#: Seconds of each wait in which _wait calls Test() back to back (yielding the CPU between).
_SPIN = 0.2


def _wait(request: Any, deadline: float, status: Any = None, spin: float = _SPIN) -> bool:
    """Returns True when ``request`` completes before ``deadline`` (time.monotonic()).

    Open MPI progresses a non-blocking collective only inside MPI calls, about one round per
    Test(): for the first _SPIN seconds it is called back to back (sched_yield between), so
    that a collective of several rounds (MPI_Comm_idup's context id takes a few all-reduces)
    completes in milliseconds where every rank is there, which after MPI_Init's fence they
    are; after that, sleeps doubling to 5 ms, so that a rank waiting longer for a late one
    does not keep a CPU from it. With the sleeps alone, the exchange of 4 ranks on 2 nodes
    took 0.19-0.29 s; with the spin, 0.02-0.04 s (benchmarks/jax_init.py's cluster, load 11).
    ``spin``: the seconds to spin (a large message's bytes move only as fast as Test() is
    called: exchange.part_link spins for the whole of a transfer its peer has begun)."""
    spin_until = time.monotonic() + spin
    delay = 0.0002
    while not (request.Test() if status is None else request.Test(status)):
        now = time.monotonic()
        if now >= deadline:
            return False
        if now < spin_until:
            time.sleep(0)  # yields to another thread or process, then tests again
            continue
        time.sleep(delay)
        delay = min(delay * 2, 0.005)
    return True


class MpiTransport:
    """_exchange.Transport over MPI: its own duplicate of ``comm`` (MPI_Comm_idup, bounded by
    ``timeout``), so that none of its messages can match the user's; non-blocking
    collectives, each waited for against one deadline. ``collectives`` and ``received``
    (bytes) count what it did.

    Raises:
      ExchangeTimeout: the ranks did not all arrive within ``timeout`` seconds (naming the
        ones that did not, as far as rank 0 can tell).
    """

    def __init__(self, comm: Any, timeout: float) -> None:
        self._MPI = import_mpi()
        self.rank, self.size = comm.Get_rank(), comm.Get_size()
        self.timeout = timeout
        self._deadline = time.monotonic() + timeout
        self.collectives = 1
        self.received = 0
        dup, request = comm.Idup()
        if not _wait(request, self._deadline):
            # An MPI collective cannot be cancelled: the pending duplicate is left behind, as
            # the job cannot go on without the missing ranks anyway.
            raise ExchangeTimeout(self._missing(comm))
        self._comm = dup

    def close(self) -> None:
        """Frees the duplicate (every request of the exchange has completed by then)."""
        comm, self._comm = self._comm, None
        if comm is not None:
            comm.Free()

    def _done(self, request: Any, what: str) -> None:
        if not _wait(request, self._deadline):
            raise ExchangeTimeout(
                f"the MPI exchange of mpi_resolver did not complete within {self.timeout:g} s:"
                f" every rank arrived, but {what} stalled (a rank died or is stuck, or the "
                f"MPI network is stalled). {_FIX}")

    def allreduce_min(self, values: Sequence[int]) -> List[int]:
        """_exchange.Transport.allreduce_min."""
        MPI = self._MPI
        send = bytearray(b"".join(int(v).to_bytes(8, "little", signed=True) for v in values))
        recv = bytearray(len(send))
        self.collectives += 1
        self._done(self._comm.Iallreduce([send, len(values), MPI.INT64_T],
                                         [recv, len(values), MPI.INT64_T], op=MPI.MIN),
                   "a reduction")
        self.received += len(recv)
        return [int.from_bytes(recv[i:i + 8], "little", signed=True)
                for i in range(0, len(recv), 8)]

    def allgather(self, payload: bytes, width: int) -> List[bytes]:
        """_exchange.Transport.allgather (fixed ``width`` + 4 bytes per rank on the wire)."""
        if len(payload) > width:
            raise ResolutionError(
                f"rank {self.rank}'s record is {len(payload)} bytes, more than {width}.")
        MPI, slot = self._MPI, width + 4
        send = bytearray(slot)
        send[:4] = len(payload).to_bytes(4, "little")
        send[4:4 + len(payload)] = payload
        recv = bytearray(slot * self.size)
        self.collectives += 1
        self._done(self._comm.Iallgather([send, MPI.BYTE], [recv, MPI.BYTE]), "a gather")
        self.received += len(recv)
        out = []
        for r in range(self.size):
            n = int.from_bytes(recv[r * slot:r * slot + 4], "little")
            out.append(bytes(recv[r * slot + 4:r * slot + 4 + n]))
        return out

    def allgatherv(self, payload: bytes, counts: Sequence[int]) -> List[bytes]:
        """_exchange.Transport.allgatherv."""
        MPI = self._MPI
        displs, total = [], 0
        for n in counts:
            displs.append(total)
            total += n
        recv = bytearray(max(total, 1))
        self.collectives += 1
        self._done(self._comm.Iallgatherv([bytearray(payload), len(payload), MPI.BYTE],
                                          [recv, (list(counts), displs), MPI.BYTE]),
                   "a gather of host names")
        self.received += total
        return [bytes(recv[d:d + n]) for d, n in zip(displs, counts, strict=True)]

    def exchange(self, peers: Sequence[int], payload: bytes) -> Dict[int, bytes]:
        """_exchange.Transport.exchange: point to point, at most RECORD_BYTES from each."""
        from mpi_resolver.exchange.records import RECORD_BYTES

        MPI = self._MPI
        buffers = {p: bytearray(RECORD_BYTES) for p in peers}
        statuses = {p: MPI.Status() for p in peers}
        receives = [(p, self._comm.Irecv([buffers[p], MPI.BYTE], source=p, tag=_TAG_NODE))
                    for p in peers]
        sends = [self._comm.Isend([bytearray(payload), MPI.BYTE], dest=p, tag=_TAG_NODE)
                 for p in peers]
        out = {}
        try:
            for p, request in receives:
                if not _wait(request, self._deadline, statuses[p]):
                    raise ExchangeTimeout(
                        f"the MPI exchange of mpi_resolver did not complete within "
                        f"{self.timeout:g} s: rank {p}, on this rank's node, did not send its "
                        f"record. {_FIX}")
                n = statuses[p].Get_count(MPI.BYTE)
                out[p] = bytes(buffers[p][:n])
                self.received += n
            for request in sends:
                self._done(request, "a send to a rank of this node")
        finally:
            for _, request in receives:
                if not request.Test():
                    request.Cancel()
        return out

    def _missing(self, comm: Any) -> str:
        """Returns the text for a duplicate that did not complete: rank 0 learns who arrived
        from one-byte notes on the user's communicator (the exchange's failure path only),
        and tells the others."""
        # Rank 0 collects notes for ``grace`` after its own deadline; a rank that arrived
        # before rank 0 reaches its deadline first, so it waits for the verdict longer than
        # that window (up to two of them and a second), or it would give up too early.
        grace = min(5.0, max(1.0, self.timeout / 5))
        missing = (self._collect_arrivals(comm, grace) if self.rank == 0 else
                   self._ask_rank_0(comm, 2 * grace + 1.0))
        head = f"the MPI exchange of mpi_resolver did not complete within {self.timeout:g} s: "
        if missing is None:
            return (head + "rank 0 did not answer either, so which ranks are missing is "
                    "unknown. " + _FIX)
        if not missing:
            return (head + "every rank arrived, but the exchange's communicator could not be "
                    "made; the MPI network may be stalled. " + _FIX)
        return head + f"rank(s) {_ranges(missing)} did not reach it. " + _FIX

    def _collect_arrivals(self, comm: Any, grace: float) -> List[int]:
        """Rank 0: returns the ranks whose note did not come within ``grace`` seconds, and
        sends that verdict to the others."""
        MPI = self._MPI
        notes = [(r, comm.Irecv([bytearray(1), MPI.BYTE], source=r, tag=_TAG_ARRIVE))
                 for r in range(1, self.size)]
        end = time.monotonic() + grace
        for _, request in notes:
            _wait(request, end)
        missing = [r for r, request in notes if not request.Test()]
        for r, request in notes:
            if r in missing:
                request.Cancel()
        verdict = json.dumps(missing[:10000]).encode()
        sends = [comm.Isend([verdict, MPI.BYTE], dest=r, tag=_TAG_VERDICT)
                 for r in range(1, self.size) if r not in missing]
        for request in sends:
            _wait(request, time.monotonic() + 1.0)
        return missing

    def _ask_rank_0(self, comm: Any, wait: float) -> Optional[List[int]]:
        """Any other rank: sends its note to rank 0; returns rank 0's verdict, or None where
        none came within ``wait`` seconds."""
        MPI = self._MPI
        comm.Isend([bytearray(b"\x01"), MPI.BYTE], dest=0, tag=_TAG_ARRIVE)
        buf, status = bytearray(1 << 17), MPI.Status()
        request = comm.Irecv([buf, MPI.BYTE], source=0, tag=_TAG_VERDICT)
        if _wait(request, time.monotonic() + wait, status):
            return json.loads(bytes(buf[:status.Get_count(MPI.BYTE)]))
        request.Cancel()
        return None
