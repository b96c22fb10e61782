"""The MPI exchange, step by step, with the communication injected (pure but for ``Transport``).

A few collectives whatever the job's size, and every rank's record only where something
disagrees:

1. every rank reduces one vector (MIN): its plan, its own checks against Slurm, its step,
   whether it hit an error: every rank takes the same decision from it;
2. where they agree, where ranks run comes from Slurm's (now verified) variables, or, without
   Slurm or where they cannot say, from one gather of 12 bytes per rank plus the name of one
   rank per host;
3. the ranks of each node swap their records, point to point, for the node's GPUs;
4. one more reduction: the job's GPUs per task, whether any node's GPU lists conflict, and
   (port_base='auto') whether every rank got the port it aimed at: the job's base plus its
   index on its node; where one did not, one gather of 2 bytes per rank: every rank's port;
5. where anything disagrees (or ``details`` asks): one gather of every rank's record, from
   which every rank builds the same per-rank table.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Callable, Dict, List, Optional, Protocol, Sequence, Tuple

from ._host_names import same_host
from ._layout import Runs, host_of_rank, ranks_on
from ._records import RankRecord, own_differences

__all__ = ["Transport", "MpiFacts", "gather_facts", "RECORD_BYTES"]

#: Bytes a record may take in the gather of every rank's record.
RECORD_BYTES = 1024
_HOST_ENTRY = 12  # bytes per rank in the host table: 8 of hash, 4 of name length


class Transport(Protocol):
    """The communication ``gather_facts`` needs; mpi.MpiTransport is the real one."""

    rank: int
    size: int

    def allreduce_min(self, values: Sequence[int]) -> List[int]:
        """Returns the element-wise minimum of every rank's ``values``."""

    def allgather(self, payload: bytes, width: int) -> List[bytes]:
        """Returns every rank's ``payload`` (at most ``width`` bytes each), in rank order."""

    def allgatherv(self, payload: bytes, counts: Sequence[int]) -> List[bytes]:
        """Returns every rank's ``payload``; ``counts[r]`` is rank r's length."""

    def exchange(self, peers: Sequence[int], payload: bytes) -> Dict[int, bytes]:
        """Sends ``payload`` to each of ``peers`` and returns what each of them sent."""


@dataclass
class MpiFacts:
    """What the exchange told this rank."""

    rank: int
    size: int
    records: Optional[List[RankRecord]]  # every rank's record (step 5), else None
    hosts: Optional[List[str]]           # every rank's host (step 2 or 5), else None: Slurm's
    node: List[RankRecord]               # the records of this rank's node, in rank order
    per_task: Optional[int]              # the job's GPUs per task of divided lists (step 4)
    ports: Optional[List[int]] = None    # every rank's picked port, where they need listing
    port_base: Optional[int] = None      # or the base every picked port follows (step 4)


def _host_hash(host: str) -> bytes:
    return hashlib.blake2b(host.encode("utf-8", "surrogateescape"), digest_size=8).digest()


def _vector(mine: RankRecord, size: int, slurm_runs: Optional[Runs],
            aim: Optional[int]) -> List[int]:
    """Returns step 1's vector: [plan, -plan, step, -step, own checks ok, no error,
    Slurm's placement holds here, picked a port, -picked, aimed base, -aimed base]."""
    plans = ("slurm", "slurm+check", "mpi", "mpi+check")
    code = plans.index(mine.plan) if mine.plan in plans else len(plans)
    step = int(mine.step, 16) if mine.step else -1
    host_of: Optional[Callable[[int], str]] = None
    if slurm_runs is not None and sum(n for _, n in slurm_runs) == size:
        runs = slurm_runs
        host_of = lambda r: host_of_rank(runs, r)[0]  # noqa: E731
    ok = not (mine.plan or "").endswith("+check") or not own_differences(mine, size, host_of)
    placed = host_of is not None and same_host(host_of(mine.rank), mine.host)
    picked = int(mine.port is not None)
    base = -1 if aim is None else aim
    return [code, -code, step, -step, int(ok), int(mine.error is None), int(placed),
            picked, -picked, base, -base]


def _record_ports(records: Sequence[RankRecord]) -> Optional[List[int]]:
    """Returns every rank's picked port, or None where ranks did not pick (fixed port_base)."""
    ports = [r.port for r in records if r.port is not None]
    return ports if len(ports) == len(records) else None


def _host_table(transport: Transport, host: str) -> List[str]:
    """Returns every rank's host (step 2): 12 bytes per rank, then one name per host."""
    name = host.encode("utf-8", "surrogateescape")
    table = transport.allgather(_host_hash(host) + len(name).to_bytes(4, "little"),
                                _HOST_ENTRY)
    first: Dict[bytes, int] = {}
    keys, counts = [], []
    for r, entry in enumerate(table):  # one pass: 100,000 ranks take tens of milliseconds
        key = entry[:8]
        keys.append(key)
        counts.append(int.from_bytes(entry[8:], "little") if first.setdefault(key, r) == r
                      else 0)
    names = transport.allgatherv(name if first[keys[transport.rank]] == transport.rank
                                 else b"", counts)
    by_hash = {h: names[r].decode("utf-8", "surrogateescape") for h, r in first.items()}
    return [by_hash[k] for k in keys]


def gather_facts(transport: Transport, mine: RankRecord, *, slurm_runs: Optional[Runs],
                 node_summary: Callable[[List[RankRecord]], Tuple[int, bool]],
                 details: bool = False, aim: Optional[int] = None) -> MpiFacts:
    """Returns what every rank's records say, through the steps of the module docstring.

    ``slurm_runs``: where Slurm's variables put every rank, where they say (the plan verifies
    them); ``node_summary(node records)`` returns (the GPUs per task that node's
    ranks could each take, or binding.NO_LIMIT; whether the node has a problem that every rank
    must see in the full table: conflicting GPU lists, or GPUs that cannot be allocated).
    ``aim``: the base this rank aimed its picked port (``mine.port``) at, plus its local index.
    """
    rank, size = transport.rank, transport.size
    payload = mine.wire
    if not details:
        agreed = transport.allreduce_min(_vector(mine, size, slurm_runs, aim))
        details = not (agreed[0] == -agreed[1] and agreed[2] == -agreed[3]
                       and agreed[4] == agreed[5] == 1 and agreed[7] == -agreed[8])
    if details:
        records = [RankRecord.from_json(p.decode()) for p in
                   transport.allgather(payload, RECORD_BYTES)]
        node = [r for r in records if r.host == mine.host]
        return MpiFacts(rank, size, records, [r.host for r in records], node, None,
                        _record_ports(records))
    hosts: Optional[List[str]] = None
    if agreed[6] == 1 and slurm_runs is not None:  # Slurm's placement holds on every rank
        peers = ranks_on(slurm_runs, host_of_rank(slurm_runs, rank)[0])
    else:
        hosts = _host_table(transport, mine.host)
        here = hosts[rank]
        peers = [r for r, h in enumerate(hosts) if h == here]
    peers = [r for r in peers if r != rank]
    sent = transport.exchange(peers, payload)
    node = sorted([mine] + [RankRecord.from_json(p.decode()) for p in sent.values()],
                  key=lambda r: r.rank)
    per_task, conflict = node_summary(node)
    own_name = hosts is None or hosts[rank] == mine.host  # a hash shared by two names?
    base = agreed[9] if agreed[9] == -agreed[10] and agreed[9] >= 0 else None
    aimed = mine.port is None or (base is not None and
                                  mine.port == base + [r.rank for r in node].index(rank))
    final = transport.allreduce_min([per_task, int(not conflict), int(own_name), int(aimed)])
    if final[1] == 1 and final[2] == 1:
        if mine.port is None:  # fixed port_base: the layout counts up from it
            return MpiFacts(rank, size, None, hosts, node, final[0])
        if final[3] == 1:      # every rank got its aimed port: base + index on its node
            return MpiFacts(rank, size, None, hosts, node, final[0], None, base)
        ports = [int.from_bytes(p, "little") for p in
                 transport.allgather(mine.port.to_bytes(2, "little"), 2)]
        return MpiFacts(rank, size, None, hosts, node, final[0], ports)
    records = [RankRecord.from_json(p.decode()) for p in
               transport.allgather(payload, RECORD_BYTES)]
    return MpiFacts(rank, size, records, [r.host for r in records],
                    [r for r in records if r.host == mine.host], None, _record_ports(records))
