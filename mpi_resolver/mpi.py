"""One exchange of every rank's record over MPI, bounded by a timeout; mpi4py is imported lazily."""

from __future__ import annotations

import json
import sys
import socket
import time
from dataclasses import replace
from typing import Any, Callable, List, Mapping, Tuple

from .errors import MissingDependencyError, ResolutionError
from .options import Options
from .resolution import local_record
from .topology import RankRecord

__all__ = ["import_mpi", "mpi_initialized", "world", "exchange", "exchange_records",
           "record_exchange", "wait_for_all", "RECORD_BYTES"]

#: Bytes each rank sends in the exchange (a length prefix and its JSON record).
RECORD_BYTES = 1024
_TAG_ARRIVE = 30571
_TAG_VERDICT = 30572


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


def world(comm: Any = None) -> Tuple[Any, int, int]:
    """Returns (communicator, rank, size): ``comm`` or MPI.COMM_WORLD (which starts MPI)."""
    if comm is None:
        comm = import_mpi().COMM_WORLD
    return comm, comm.Get_rank(), comm.Get_size()


def wait_for_all(seconds: float) -> None:
    """Waits, at most ``seconds``, until every rank of COMM_WORLD gets here; returns at once
    where this process has not started MPI."""
    if not mpi_initialized():
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


def _wait(request: Any, deadline: float, status: Any = None) -> bool:
    """Returns True when ``request`` completes before ``deadline`` (time.monotonic())."""
    delay = 0.0002
    while not (request.Test() if status is None else request.Test(status)):
        if time.monotonic() >= deadline:
            return False
        time.sleep(delay)
        delay = min(delay * 2, 0.005)
    return True


def exchange(comm: Any, payload: bytes, timeout: float) -> List[bytes]:
    """Returns every rank's ``payload``, in rank order, from ONE collective (Iallgather).

    Each rank also sends rank 0 a one-byte note that it arrived, so that on a timeout the
    ranks can say which ranks never came.

    Raises:
      ResolutionError: ``payload`` is longer than RECORD_BYTES - 4, or the exchange did not
        complete within ``timeout`` seconds (naming the ranks that did not answer).
    """
    MPI = import_mpi()
    rank, size = comm.Get_rank(), comm.Get_size()
    if len(payload) > RECORD_BYTES - 4:
        raise ResolutionError(
            f"rank {rank}'s record is {len(payload)} bytes, more than {RECORD_BYTES - 4}.")
    send = bytearray(RECORD_BYTES)
    send[:4] = len(payload).to_bytes(4, "little")
    send[4:4 + len(payload)] = payload
    recv = bytearray(RECORD_BYTES * size)
    start = time.monotonic()
    deadline = start + timeout
    one = bytearray(b"\x01")
    if rank == 0:
        arrivals = [(r, comm.Irecv([bytearray(1), MPI.BYTE], source=r, tag=_TAG_ARRIVE))
                 for r in range(1, size)]
    else:
        arrivals = [(0, comm.Isend([one, MPI.BYTE], dest=0, tag=_TAG_ARRIVE))]
    gather = comm.Iallgather([send, MPI.BYTE], [recv, MPI.BYTE])
    if not _wait(gather, deadline):
        raise ResolutionError(_timeout_message(comm, MPI, rank, arrivals, timeout))
    for _, request in arrivals:
        _wait(request, time.monotonic() + max(1.0, timeout))
    out = []
    for r in range(size):
        chunk = recv[r * RECORD_BYTES:(r + 1) * RECORD_BYTES]
        n = int.from_bytes(chunk[:4], "little")
        out.append(bytes(chunk[4:4 + n]))
    return out


def _timeout_message(comm: Any, MPI: Any, rank: int, arrivals: list, timeout: float) -> str:
    """Returns the timeout error text; rank 0 tells the others which ranks never arrived."""
    fix = ("They may have died, be stuck before creating the resolver, or be slow to start; "
           "raise timeout= (--timeout) if start-up is just slow.")
    if rank == 0:
        missing = [r for r, request in arrivals if not request.Test()]
        verdict = json.dumps(missing[:10000]).encode()
        arrived = sorted(set(range(1, comm.Get_size())) - set(missing))
        sends = [comm.Isend([verdict, MPI.BYTE], dest=r, tag=_TAG_VERDICT) for r in arrived]
        for request in sends:
            _wait(request, time.monotonic() + 1.0)
    else:
        buf = bytearray(1 << 17)
        status = MPI.Status()
        request = comm.Irecv([buf, MPI.BYTE], source=0, tag=_TAG_VERDICT)
        grace = min(5.0, max(1.0, timeout / 5))
        if _wait(request, time.monotonic() + grace, status):
            missing = json.loads(bytes(buf[:status.Get_count(MPI.BYTE)]))
        else:
            request.Cancel()
            return (f"the MPI exchange of mpi_resolver did not complete within {timeout:g} s: "
                    "rank 0 did not answer either, so which ranks are missing is unknown. "
                    + fix)
    if not missing:
        return (f"the MPI exchange of mpi_resolver did not complete within {timeout:g} s, "
                "though every rank arrived; the MPI network may be stalled. " + fix)
    return (f"the MPI exchange of mpi_resolver did not complete within {timeout:g} s: "
            f"rank(s) {_ranges(missing)} did not reach it. " + fix)


def exchange_records(comm: Any, record: RankRecord, timeout: float) -> List[RankRecord]:
    """Returns every rank's RankRecord, in rank order (one exchange; see ``exchange``).

    A record too long to send (a very long CUDA_VISIBLE_DEVICES) is replaced by one that
    carries the error, so that every rank raises instead of waiting.
    """
    payload = record.to_json().encode()
    if len(payload) > RECORD_BYTES - 4:
        payload = replace(record, visible=None, error=(
            f"its record is {len(payload)} bytes, more than the {RECORD_BYTES - 4} the "
            "exchange allows (CUDA_VISIBLE_DEVICES too long?); pass gpus_per_node."
        )).to_json().encode()
    return [RankRecord.from_json(p.decode()) for p in exchange(comm, payload, timeout)]


def record_exchange(opts: Options, env: Mapping[str, str], plan: Any,
                    comm: Any = None) -> Callable[[], Tuple[int, List[RankRecord]]]:
    """Returns exchange() for resolution.resolve: it starts MPI (``comm`` or COMM_WORLD),
    makes this rank's record and returns (this rank, every rank's record)."""
    def run() -> Tuple[int, List[RankRecord]]:
        communicator, rank, size = world(comm)
        record = local_record(opts, env, plan.launch, rank, size, socket.gethostname())
        return rank, exchange_records(communicator, record, opts.timeout)

    return run
