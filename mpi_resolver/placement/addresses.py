"""The address workers dial: which name or address of each node the ClusterSpec carries (the
``address`` argument, ``--address``) (pure; the look-ups are in _address_lookup).

- ``'host'`` (default, TensorFlow's): Slurm's node name, or the host name under mpirun;
- ``'fqdn'``: the node name's fully qualified name;
- ``'ip'``: the IPv4 address the node name resolves to;
- ``'iface:NAME'``: the IPv4 address of network interface NAME on each node (each node says
  its own, gathered over MPI);
- a format string with ``{host}``, such as ``'{host}-ib0'`` or ``'{host}.ib.cluster'``: the
  names a site gives its high-speed network.
"""

from __future__ import annotations

import re
import string
from dataclasses import dataclass, replace
from typing import Any, Mapping

from mpi_resolver.core.errors import FormatError
from mpi_resolver.placement.hostlist import check_host_name
from mpi_resolver.placement.layout import Layout

DEFAULT_ADDRESS = "host"
KINDS = ("host", "fqdn", "ip")
IFACE = "iface:"
_IFACE_NAME = re.compile(r"[A-Za-z0-9_.:@-]{1,15}")  # Linux: at most 15 bytes (IFNAMSIZ - 1)
_CHOICES = ("expected 'host', 'fqdn', 'ip', 'iface:NAME' (e.g. 'iface:ib0') or a name with "
            "'{host}' in it (e.g. '{host}-ib0')")


@dataclass(frozen=True)
class AddressRule:
    """How a node's address is made: ``kind`` one of KINDS, 'iface' or 'format'; ``value``
    the interface name or the format string."""

    kind: str = DEFAULT_ADDRESS
    value: str = ""

    def __str__(self) -> str:
        return {"iface": IFACE + self.value, "format": self.value}.get(self.kind, self.kind)


def parse_address(value: Any) -> AddressRule:
    """Returns the rule ``address`` names (a rule already: itself).

    Raises:
      FormatError: anything else, naming the argument and the choices.
    """
    if isinstance(value, AddressRule):
        return value
    if not isinstance(value, str):
        raise FormatError(f"address={value!r}: {_CHOICES}.")
    if value in KINDS:
        return AddressRule(value)
    if value.startswith(IFACE):
        name = value[len(IFACE):]
        if _IFACE_NAME.fullmatch(name) is None:
            raise FormatError(f"address={value!r}: {name!r} is not a network interface name "
                              "(1 to 15 letters, digits or _.:@-, e.g. 'iface:eth0').")
        return AddressRule("iface", name)
    if "{" in value or "}" in value:
        _check_format(value)
        return AddressRule("format", value)
    raise FormatError(f"address={value!r}: {_CHOICES}.")


def _check_format(value: str) -> None:
    """Raises FormatError where ``value`` holds no {host} or another field, or makes no host
    name of 'node1'."""
    try:
        fields = [(name, spec, conv) for _, name, spec, conv in string.Formatter().parse(value)
                  if name is not None]
    except ValueError as e:
        raise FormatError(f"address={value!r}: {e}; {_CHOICES}.") from None
    if not fields or any(f != ("host", "", None) for f in fields):
        raise FormatError(f"address={value!r}: only '{{host}}' may appear in braces; "
                          f"{_CHOICES}.")
    check_host_name(value.format(host="node1"), what=f"address={value!r} for node1")


def formatted(rule: AddressRule, host: str) -> str:
    """Returns the name ``rule`` ('host' or 'format') gives ``host``."""
    return rule.value.format(host=host) if rule.kind == "format" else host


def with_names(layout: Layout, names: Mapping[str, str]) -> Layout:
    """Returns ``layout`` whose addresses carry ``names[host]`` in place of each host (ports
    and everything else as they were)."""
    addresses = [f"{names[host]}:{layout.port_of(rank)}"
                 for rank, host in enumerate(layout.placement)]
    return replace(layout, addresses=addresses)
