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
import json
import struct
from dataclasses import dataclass, replace
from typing import Any, Callable, Dict, List, Optional, Protocol, Sequence, Tuple

from mpi_resolver.core.agreement import (FirstAgreement, FirstReport, NodeSummary, SecondAgreement,
                         SecondReport, plan_code)
from mpi_resolver.exchange.crosscheck import own_differences
from mpi_resolver.placement.host_names import same_host
from mpi_resolver.placement.layout import Runs, host_of_rank, ranks_on
from mpi_resolver.exchange.records import RECORD_BYTES, RankRecord

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

    def close(self) -> None:
        """Ends this rank's part in the exchange (frees what it holds); nothing after it."""


def gather_json(transport: Transport, data: Any) -> List[Any]:
    """Returns every rank's ``data`` (anything JSON holds), in rank order: two collectives,
    the lengths, then the texts (the rehearsals' reports: --deep's, --checkpoint-dir's)."""
    payload = json.dumps(data, separators=(",", ":")).encode()
    sizes = transport.allgather(struct.pack("<I", len(payload)), 4)
    parts = transport.allgatherv(payload, [struct.unpack("<I", s)[0] for s in sizes])
    return [json.loads(p) for p in parts]


@dataclass(frozen=True, kw_only=True)
class MpiFacts:
    """What the exchange told this rank."""

    rank: int
    size: int
    records: Optional[List[RankRecord]]  # every rank's record (step 5), else None
    hosts: Optional[List[str]]           # every rank's host (step 2 or 5), else None: Slurm's
    node: List[RankRecord]               # the records of this rank's node, in rank order
    per_task: Optional[int]              # the job's GPUs per task of divided lists (step 4)
    counts: Optional[Tuple[int, int]] = None  # (fewest, most) GPUs of any rank (step 4)
    ports: Optional[List[int]] = None    # every rank's picked port, where they need listing
    port_base: Optional[int] = None      # or the base every picked port follows (step 4)


def host_hash(host: str) -> bytes:
    return hashlib.blake2b(host.encode(errors="surrogateescape"), digest_size=8).digest()


def _first_report(record: RankRecord, size: int, slurm_runs: Optional[Runs],
                  aimed_base: Optional[int]) -> FirstReport:
    """Returns what this rank puts into step 1."""
    step = int(record.step, 16) if record.step else -1
    host_of: Optional[Callable[[int], str]] = None
    if slurm_runs is not None and sum(n for _, n in slurm_runs) == size:
        runs = slurm_runs
        host_of = lambda r: host_of_rank(runs, r)[0]  # noqa: E731
    checks = record.plan is not None and record.plan.endswith("+check")
    ok = not checks or not own_differences(record, size, host_of)
    placed = host_of is not None and same_host(host_of(record.rank), record.host)
    return FirstReport(plan=plan_code(record.plan), step=step, own_checks_ok=ok,
                       no_error=record.error is None, placed=placed,
                       picked_port=record.port is not None,
                       aimed_base=-1 if aimed_base is None else aimed_base)


def _record_ports(records: Sequence[RankRecord]) -> Optional[List[int]]:
    """Returns every rank's picked port, or None where ranks did not pick (fixed port_base)."""
    ports = [r.port for r in records if r.port is not None]
    return ports if len(ports) == len(records) else None


def _host_table(transport: Transport, host: str) -> List[str]:
    """Returns every rank's host (step 2): 12 bytes per rank, then one name per host."""
    name = host.encode(errors="surrogateescape")  # UTF-8, lone surrogates as their bytes
    table = transport.allgather(host_hash(host) + len(name).to_bytes(4, "little"),
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
    by_hash = {h: names[r].decode(errors="surrogateescape") for h, r in first.items()}
    return [by_hash[k] for k in keys]


def _all_records(transport: Transport, record: RankRecord) -> MpiFacts:
    """Returns the facts from one gather of every rank's record (step 5)."""
    records = [RankRecord.from_json(p.decode()) for p in
               transport.allgather(record.wire, RECORD_BYTES)]
    return MpiFacts(rank=transport.rank, size=transport.size, records=records,
                    hosts=[r.host for r in records],
                    node=[r for r in records if r.host == record.host], per_task=None,
                    ports=_record_ports(records))


def _node_records(transport: Transport, record: RankRecord, slurm_runs: Optional[Runs],
                  first: FirstAgreement) -> Tuple[List[RankRecord], Optional[List[str]]]:
    """Returns (the records of this rank's node, every rank's host where step 2 gathered
    them): steps 2 and 3."""
    rank = transport.rank
    hosts: Optional[List[str]] = None
    if first.slurm_placement_holds and slurm_runs is not None:
        peers = ranks_on(slurm_runs, host_of_rank(slurm_runs, rank)[0])
    else:
        hosts = _host_table(transport, record.host)
        peers = [r for r, h in enumerate(hosts) if h == hosts[rank]]
    sent = transport.exchange([r for r in peers if r != rank], record.wire)
    node_records = sorted([record] + [RankRecord.from_json(p.decode()) for p in sent.values()],
                          key=lambda r: r.rank)
    return node_records, hosts


def gather_facts(transport: Transport, record: RankRecord, *, slurm_runs: Optional[Runs],
                 node_summary: Callable[[List[RankRecord]], NodeSummary],
                 details: bool, aimed_base: Optional[int] = None) -> MpiFacts:
    """Returns what every rank's records say, through the steps of the module docstring.

    ``slurm_runs``: where Slurm's variables put every rank, where they say (the plan verifies
    them); ``node_summary(node records)`` says what a node's GPU lists give (a problem, or
    ranks with GPUs and ranks without in the job, makes every rank gather every record: the
    full table, which names the nodes). ``aimed_base``: the base this rank aimed its picked
    port (``record.port``) at, plus its local index.
    """
    rank, size = transport.rank, transport.size
    if details:
        return _all_records(transport, record)
    first = FirstAgreement.from_agreed(transport.allreduce_min(
        _first_report(record, size, slurm_runs, aimed_base).to_vector()))
    if not first.all_well:
        return _all_records(transport, record)
    node_records, hosts = _node_records(transport, record, slurm_runs, first)
    summary = node_summary(node_records)
    index = [r.rank for r in node_records].index(rank)
    got_aimed = record.port is None or (first.base is not None and
                                        record.port == first.base + index)
    second = SecondAgreement.from_agreed(transport.allreduce_min(SecondReport(
        per_task=summary.per_task, node_ok=not summary.problem,
        own_name=hosts is None or hosts[rank] == record.host,  # a hash shared by two names?
        aimed=got_aimed, fewest=summary.fewest, most=summary.most).to_vector()))
    if not (second.nodes_ok and second.names_own) or second.mixed_gpus:
        return _all_records(transport, record)
    facts = MpiFacts(rank=rank, size=size, records=None, hosts=hosts, node=node_records,
                     per_task=second.per_task, counts=(second.fewest, second.most))
    if record.port is None:  # fixed port_base: the layout counts up from it
        return facts
    if second.all_aimed:   # every rank got its aimed port: base + index on its node
        return replace(facts, port_base=first.base)
    ports = [int.from_bytes(p, "little") for p in
             transport.allgather(record.port.to_bytes(2, "little"), 2)]
    return replace(facts, ports=ports)
