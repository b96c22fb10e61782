"""This host's IP addresses, and whether an address is one of them (the edge: /proc/net and
the resolver; the parsers are pure)."""

from __future__ import annotations

import ipaddress
import os
import socket
from typing import AbstractSet, FrozenSet, Set


def is_own(address: str, own_addresses: AbstractSet[str]) -> bool:
    """Returns True when ``address`` (an IP) is one of this host's: loopback, or one of
    ``own_addresses`` (IPv4-mapped IPv6 counts as its IPv4)."""
    ip = ipaddress.ip_address(address.split("%")[0])
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return ip.is_loopback or ip.compressed in own_addresses


def parse_fib_trie(text: str) -> Set[str]:
    """Returns the IPv4 addresses /proc/net/fib_trie lists as this host's (/32 host LOCAL)."""
    found, last = set(), None
    for line in text.splitlines():
        words = line.split()
        if len(words) == 2 and words[0] == "|--":
            last = words[1]
        elif last is not None and words[:1] == ["/32"] and words[-1:] == ["LOCAL"]:
            found.add(last)
    return found


def parse_if_inet6(text: str) -> Set[str]:
    """Returns the IPv6 addresses of /proc/net/if_inet6 (32 hex digits first on each line)."""
    return {ipaddress.IPv6Address(int(line.split()[0], 16)).compressed
            for line in text.splitlines() if line.strip()}


def this_host_addresses(proc: str = "/proc/net") -> FrozenSet[str]:
    """Returns this host's IP addresses: the kernel's local IPv4 (fib_trie) and IPv6
    (if_inet6) addresses and what this host's name resolves to; loopback addresses always."""
    found = {"127.0.0.1", "::1"}
    for name, parse in (("fib_trie", parse_fib_trie), ("if_inet6", parse_if_inet6)):
        try:
            with open(os.path.join(proc, name)) as f:
                found |= parse(f.read())
        except OSError:
            continue
    try:
        infos = socket.getaddrinfo(socket.gethostname(), None, type=socket.SOCK_STREAM)
    except OSError:
        infos = []
    found |= {str(info[4][0]).split("%")[0] for info in infos}
    return frozenset(ipaddress.ip_address(a).compressed for a in found)
