"""`mpi-resolver check --connect`: every rank listens on the host:port its ClusterSpec entry
names, as TensorFlow's gRPC server will, and dials its peers (_connect_pairs) by the names
in the ClusterSpec; the failures are gathered over MPI and reported once, by rank 0 (the
edge: sockets and MPI; the parts are _connect_probe and _connect_pairs).

Without MPI (``--source slurm``), each rank dials its own peers and reports its own
failures: with no barrier to say when every peer listens, a refused dial is tried again
until the timeout, and each rank listens until twice the timeout has passed.
"""

from __future__ import annotations

import json
import struct
import time
from dataclasses import dataclass
from typing import Callable, Dict, List, Optional, Sequence, Tuple

from mpi_resolver.rehearsal.connect_pairs import pattern_of
from mpi_resolver.rehearsal.connect_probe import (REFUSED, Failure, Listener, dial, dial_peers,
                                                  failure_table, listen)
from mpi_resolver.core.errors import ResolutionError
from mpi_resolver.exchange.collectives import Transport
from mpi_resolver.network.host_addresses import this_host_addresses
from mpi_resolver.placement.layout import Layout

#: The kind of a failure to listen on a rank's own address (a port another process holds).
CANNOT_LISTEN = "cannot listen"
_RETRY = 0.2  # seconds between dials of a refused peer, without MPI


@dataclass(frozen=True)
class ConnectReport:
    """What --connect found: every failure (this rank's alone without MPI), the dials made,
    the ranks that took part, the pattern of dials and the seconds it took."""

    failures: List[Failure]
    connections: int
    ranks: int
    pattern: str
    seconds: float
    gathered: bool

    @property
    def ok(self) -> bool:
        """True when every connection shown was made."""
        return not self.failures

    def text(self) -> str:
        """Returns the report rank 0 prints (or each rank without MPI)."""
        who = "the job's" if self.gathered else "this rank's"
        head = (f"{who} {self.connections} connection(s) among {self.ranks} rank(s), "
                f"{self.pattern}, in {self.seconds:.1f} s")
        if not self.failures:
            return f"CONNECT OK: {head}."
        return (f"CONNECT FAILED: {len(self.failures)} of {head} failed "
                f"(TensorFlow's gRPC would wait for these for ever):\n"
                f"{failure_table(self.failures)}")

    def as_json(self) -> Dict:
        """Returns the report for `check --json`."""
        return {"ok": not self.failures, "connections": self.connections,
                "ranks": self.ranks, "pattern": self.pattern,
                "seconds": round(self.seconds, 3), "gathered": self.gathered,
                "failures": [json.loads(f.to_json()) for f in self.failures]}


def node_ranks(layout: Layout) -> List[List[int]]:
    """Returns the ranks of each node, nodes in the order of their first rank."""
    nodes: Dict[str, List[int]] = {}
    for rank, host in enumerate(layout.placement):
        nodes.setdefault(host, []).append(rank)
    return list(nodes.values())


def connect_check(layout: Layout, rank: int, host: str, timeout: float,
                  transport: Optional[Transport]) -> ConnectReport:
    """Returns the report of --connect for this rank: listen on its address, (with MPI: wait
    until every rank listens), dial its peers, (with MPI: wait until every rank has dialled,
    then gather every failure).

    Raises:
      ExchangeTimeout: a rank did not reach a barrier in time (MPI).
    """
    start = time.monotonic()
    addresses, nodes = layout.addresses, node_ranks(layout)
    failures: List[Failure] = []
    listener = _listen(addresses[rank], rank, host, failures)
    try:
        if transport is not None:
            transport.allreduce_min([0])  # every rank listens before any rank dials
            found, dials = dial_peers(rank, addresses, nodes, timeout, this_host_addresses(),
                                      from_host=host)
            failures += found
            transport.allreduce_min([0])  # every rank has dialled: listeners may close
            failures, dials = _gather(transport, failures, dials)
        else:
            found, dials = _dial_until(rank, addresses, nodes, timeout, host)
            failures += found
            _sleep_until(start + 2 * timeout)  # others may dial this rank until then
    finally:
        if listener is not None:
            listener.close()
    return ConnectReport(failures, dials, len(addresses), pattern_of(len(nodes)),
                         time.monotonic() - start, transport is not None)


def _listen(address: str, rank: int, host: str, failures: List[Failure]
            ) -> Optional[Listener]:
    """Returns the listener on ``address``, or None with the failure added to ``failures``."""
    try:
        return listen(address)
    except ResolutionError as e:
        failures.append(Failure(rank, host, rank, address, CANNOT_LISTEN, str(e),
                                "free that port on that node, or pick another with "
                                "--port-base (or --port-base auto)"))
        return None


def _dial_until(rank: int, addresses: Sequence[str], nodes: Sequence[Sequence[int]],
                timeout: float, host: str) -> Tuple[List[Failure], int]:
    """Returns dial_peers' answer, refused dials tried again until ``timeout`` has passed
    (without MPI nothing says when a peer listens)."""
    own = this_host_addresses()
    local = next(set(ranks) for ranks in nodes if rank in ranks)
    deadline = time.monotonic() + timeout
    failures, dials = dial_peers(rank, addresses, nodes, timeout, own, from_host=host)
    while any(f.kind == REFUSED for f in failures) and time.monotonic() < deadline:
        time.sleep(_RETRY)
        left = max(deadline - time.monotonic(), 0.1)
        again = [f if f.kind != REFUSED else dial(
            f.to_address, left, own, from_rank=rank, to_rank=f.to_rank, from_host=host,
            remote=f.to_rank not in local) for f in failures]
        failures = [f for f in again if f is not None]
    return failures, dials


def _sleep_until(moment: float, clock: Callable[[], float] = time.monotonic) -> None:
    left = moment - clock()
    if left > 0:
        time.sleep(left)


def _gather(transport: Transport, failures: List[Failure], dials: int
            ) -> Tuple[List[Failure], int]:
    """Returns (every rank's failures in rank order, the job's dials), gathered over MPI."""
    payload = "\n".join(f.to_json() for f in failures).encode()
    heads = transport.allgather(struct.pack("<II", len(payload), dials), 8)
    sizes = [struct.unpack("<II", h) for h in heads]
    parts = transport.allgatherv(payload, [n for n, _ in sizes])
    every = [Failure.from_json(line) for part in parts
             for line in part.decode().splitlines() if line]
    return every, sum(d for _, d in sizes)


def run_connect(layout: Layout, rank: int, timeout: float) -> ConnectReport:
    """Returns connect_check's report for this rank, over MPI where the resolution started it
    (bounded: every barrier within three timeouts and 10 s).

    Raises:
      ExchangeTimeout: a rank did not arrive in time.
    """
    from mpi_resolver.exchange.transport import MpiTransport, mpi_initialized, world

    host = layout.host_of(rank)[0]
    if not mpi_initialized():
        return connect_check(layout, rank, host, timeout, None)
    transport = MpiTransport(world()[0], 3 * timeout + 10)
    try:
        return connect_check(layout, rank, host, timeout, transport)
    finally:
        transport.close()
