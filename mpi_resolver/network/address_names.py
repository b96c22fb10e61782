"""Each node's name in the ClusterSpec under the ``address`` rule: formatted, looked up, or
each node's own interface address gathered over MPI; every rank ends with the same names
(pure but for the look-ups and the transport it is given)."""

from __future__ import annotations

import hashlib
from typing import Callable, Dict, List, Optional, Sequence

from mpi_resolver.network.address_lookup import interface_ipv4, names_by_lookup
from mpi_resolver.placement.addresses import AddressRule, formatted
from mpi_resolver.core.errors import ResolutionError
from mpi_resolver.exchange.collectives import Transport

_IPV4_TEXT = 15  # bytes of the longest dotted IPv4 address
_ERROR_BYTES = 300


def node_names(rule: AddressRule, hosts: Sequence[str], placement: Sequence[str],
               rank: int, transport: Optional[Callable[[], Transport]], *,
               lookup: Callable[[str, Sequence[str]], Dict[str, str]] = names_by_lookup,
               interface: Callable[[str, str], str] = interface_ipv4) -> Dict[str, str]:
    """Returns {host: its name in the ClusterSpec} for ``hosts`` (the job's nodes; this rank
    runs on ``placement[rank]``). ``transport()`` starts a new exchange over MPI (None: no
    MPI): 'iface' gathers every rank's interface address with it; 'fqdn' and 'ip' check with
    it that every rank looked up the same names.

    Raises:
      ResolutionError: a look-up that fails (on every rank alike over MPI), 'iface' without
        MPI, or ranks that looked up different names.
    """
    if rule.kind in ("host", "format"):
        return {h: formatted(rule, h) for h in hosts}
    if rule.kind == "iface":
        if transport is None:
            raise ResolutionError(
                f"address='{rule}' needs MPI: each node's own address of {rule.value} is "
                "gathered over MPI. Launch with `srun --mpi=pmix` or mpirun (source='auto'), "
                "or use address='ip' or a name such as '{host}-" + rule.value + "'.")
        return _gathered(transport(), rule.value, placement, rank, interface)
    names = lookup(rule.kind, hosts)
    if transport is not None:
        _check_same(transport(), names, rule)
    return names


def _gathered(t: Transport, name: str, placement: Sequence[str], rank: int,
              interface: Callable[[str, str], str]) -> Dict[str, str]:
    """Returns {host: the address of interface ``name`` there}, each rank saying its own."""
    try:
        own, error = interface(name, placement[rank]), ""
    except ResolutionError as e:
        own, error = "", str(e)
    try:
        if t.allreduce_min([int(not error)])[0] == 0:
            _raise_first(t, error)
        addresses = [b.decode() for b in t.allgather(own.encode(), _IPV4_TEXT)]
    finally:
        t.close()
    names: Dict[str, str] = {}
    for host, address in zip(placement, addresses, strict=True):
        names.setdefault(host, address)
    return names


def _raise_first(t: Transport, error: str) -> None:
    """Raises, on every rank, the first rank's error (gathered, cut to _ERROR_BYTES)."""
    errors: List[bytes] = t.allgather(error.encode()[:_ERROR_BYTES], _ERROR_BYTES)
    first = next(r for r, e in enumerate(errors) if e)
    raise ResolutionError(f"rank {first}: {errors[first].decode(errors='replace')}")


def _check_same(t: Transport, names: Dict[str, str], rule: AddressRule) -> None:
    """Raises ResolutionError unless every rank looked up the same ``names``."""
    digest = hashlib.blake2b(repr(sorted(names.items())).encode(), digest_size=7).digest()
    value = int.from_bytes(digest, "big")
    try:
        low, negated_high = t.allreduce_min([value, -value])
    finally:
        t.close()
    if low != -negated_high:
        raise ResolutionError(
            f"address='{rule}': the ranks' name service gave them different answers for the "
            "nodes' names, so their ClusterSpecs would differ; fix the name service, or use "
            "address='iface:NAME'.")
