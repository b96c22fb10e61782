"""The look-ups behind the ``address`` argument: a name's fully qualified name and IPv4
address, and an interface's IPv4 address on this node (the edge: DNS, an ioctl)."""

from __future__ import annotations

import fcntl
import ipaddress
import socket
import struct
from typing import Callable, Dict, Iterable

from mpi_resolver.core.errors import ResolutionError

_SIOCGIFADDR = 0x8915  # Linux: an interface's IPv4 address


def fqdn_of(host: str, getfqdn: Callable[[str], str] = socket.getfqdn) -> str:
    """Returns the fully qualified name of ``host``.

    Raises:
      ResolutionError: the resolver knows no longer name for it.
    """
    name = getfqdn(host)
    if "." not in name:
        raise ResolutionError(
            f"address='fqdn': the name service gives no fully qualified name for {host!r} "
            f"(it returned {name!r}); use address='host', 'ip' or '{{host}}.<domain>'.")
    return name


def ipv4_of(host: str, resolve: Callable[..., list] = socket.getaddrinfo) -> str:
    """Returns the IPv4 address ``host`` resolves to (the first the resolver gives).

    Raises:
      ResolutionError: it does not resolve, or only to a loopback address (which would point
        every other node at itself).
    """
    try:
        infos = resolve(host, None, socket.AF_INET, socket.SOCK_STREAM)
    except (OSError, UnicodeError) as e:
        raise ResolutionError(f"address='ip': {host!r} does not resolve to an IPv4 address "
                              f"({e}); use address='iface:NAME' or fix the name.") from None
    for info in infos:
        addr = info[4][0]
        if not ipaddress.ip_address(addr).is_loopback:
            return str(addr)
    raise ResolutionError(
        f"address='ip': {host!r} resolves only to a loopback address "
        f"({', '.join(sorted({i[4][0] for i in infos})) or 'none'}), which other nodes "
        "cannot reach (a 127.0.1.1 line in /etc/hosts?); use address='iface:NAME'.")


def names_by_lookup(kind: str, hosts: Iterable[str]) -> Dict[str, str]:
    """Returns {host: its fqdn or IPv4 address} (``kind`` 'fqdn' or 'ip'), one look-up each.

    Raises:
      ResolutionError: as fqdn_of or ipv4_of.
    """
    lookup = fqdn_of if kind == "fqdn" else ipv4_of
    return {host: lookup(host) for host in dict.fromkeys(hosts)}


def interface_ipv4(name: str, host: str) -> str:
    """Returns the IPv4 address of network interface ``name`` on this node (``host``).

    Raises:
      ResolutionError: no such interface, or it has no IPv4 address; names the interfaces
        this node has.
    """
    packed = struct.pack("256s", name.encode()[:15])
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            found = fcntl.ioctl(s.fileno(), _SIOCGIFADDR, packed)
    except OSError as e:
        have = ", ".join(n for _, n in socket.if_nameindex())
        raise ResolutionError(
            f"address='iface:{name}': {host} has no IPv4 address on interface {name!r} "
            f"({e.strerror or e}); its interfaces: {have}.") from None
    return socket.inet_ntoa(found[20:24])
