"""Which peers TensorFlow's gRPC would send through an HTTP proxy named by the environment, by
gRPC core's own rules (pure).

TensorFlow's workers reach each other over gRPC channels to ``dns:///host:port``
(tensorflow/core/distributed_runtime/rpc/grpc_channel.cc), and gRPC core tunnels a channel
through an HTTP CONNECT proxy named by the environment: with a proxy that cannot reach the
nodes, multi-worker training hangs. The rules are gRPC 1.74.0's, the gRPC TensorFlow 2.21
builds with (tensorflow/workspace2.bzl: grpc-1.74.0, no patch to these files; the wheel's
libtensorflow_cc.so.2 says core version 49.0.0, which is gRPC 1.74's), from
src/core/handshaker/http_connect/http_proxy_mapper.cc (GetHttpProxyServer, MapName,
AddressIncluded, ServerInCIDRRange) with src/core/util/uri.cc (URI::Parse),
src/core/util/host_port.cc (SplitHostPort) and src/core/lib/address_utils/ (StringToSockaddr,
grpc_sockaddr_mask_bits, grpc_sockaddr_match_subnet):

1. The proxy is the first of grpc_proxy, https_proxy, http_proxy that is set; lower case only
   (HTTP_PROXY is never read). Set but empty means no proxy: the later ones are not read.
2. Its value must be ``http://[user[:password]@]host[:port][/...]`` (port 443 where none is
   given), the scheme in any case (URI lowers it). ``https://`` or ``socks5://`` ("scheme not
   supported"), ``host:port`` without a scheme, or no host ("cannot parse") are logged as
   errors and mean NO proxy; the next variable is not tried.
3. The exemptions are no_grpc_proxy where it is set (even empty), else no_proxy; lower case.
4. The list is split on commas only (a space-separated list is one entry); empty pieces are
   skipped, then ASCII blanks around an entry stripped.
5. An entry exempts a host whose name ends with it, ASCII case ignored: ``example.com``,
   ``.example.com`` and also ``ample.com`` exempt ``node1.example.com``; ``node1`` exempts
   ``xnode1``; ``0.1.2.3`` exempts ``10.1.2.3``; an entry of blanks only (``node1, ``) exempts
   every host. ``*`` is no wildcard, and an entry with a port (``node1:2222``) exempts nothing.
6. An entry ``address/bits`` exempts a peer written as an address in that subnet: host bits of
   the entry ignored, bits at or above the address's width an exact match, 0 the whole family.
   Host names are not resolved for it. An IPv6 zone (``%eth0``) is taken to exist: gRPC asks
   the system (if_nametoindex), and reads the peer as a name where that fails.

The channel arguments grpc.http_proxy and grpc.enable_http_proxy would override 1 or turn all
of it off; TensorFlow sets neither. GRPC_ADDRESS_HTTP_PROXY with
GRPC_ADDRESS_HTTP_PROXY_ENABLED_ADDRESSES (matched on resolved addresses) is not modelled.

The rows of tests/unit/network/test_proxies.py's rule tables were also run against TensorFlow 2.21
itself (a worker's channel to the peer, a listening socket as the proxy; all but two whose proxy
host cannot be a local socket): all agree.

Newer gRPC (1.85.1 read) changes rule 5 only: an entry, a leading dot dropped, exempts that
host and its subdomains (``ample.com`` no longer exempts ``node1.example.com``, ``node1`` no
longer ``xnode1``), and an empty entry exempts nothing. The fix capture_message suggests
(host names, or ``.domain``) works under both. (gRPC's main branch has since added an HTTPS
proxy handshaker, not in 1.85.1.)
"""

from __future__ import annotations

import ipaddress
import string
from dataclasses import dataclass
from typing import Dict, Mapping, Optional, Sequence, Tuple, Union

from mpi_resolver.core.errors import FormatError
from mpi_resolver.core.values import is_port

PROXY_VARIABLES = ("grpc_proxy", "https_proxy", "http_proxy")
NO_PROXY_VARIABLES = ("no_grpc_proxy", "no_proxy")
#: Hosts a message names before "and N more".
SHOWN_HOSTS = 3

#: What absl::StripAsciiWhitespace and absl::SimpleAtoi strip (not Unicode blanks).
_BLANKS = " \t\n\v\f\r"
#: Characters URI::Parse allows in a query or a fragment (RFC 3986's, and '%').
_QUERY_CHARS = frozenset(string.ascii_letters + string.digits + "-._~!$&'()*+,;=:@/?%")
_UINT32_MAX = 0xFFFFFFFF

Address = Union[ipaddress.IPv4Address, ipaddress.IPv6Address]


@dataclass(frozen=True)
class ProxyCapture:
    """The proxy gRPC would use: its variable, the value (any user:password@ shown as ***@),
    and the peer hosts (no ports) it would reach through it, first seen first, once each."""

    variable: str
    proxy: str
    hosts: Tuple[str, ...]


def proxy_capture(env: Mapping[str, str], peers: Sequence[str]) -> Optional[ProxyCapture]:
    """Returns the proxy TensorFlow's gRPC would send some of ``peers`` ("host:port", as in the
    ClusterSpec) through, with those hosts; None where it would reach all of them directly.

    Raises:
      FormatError: ``peers`` is one string, or a peer is not "host:port".
    """
    hosts = peer_hosts(peers)
    chosen = _first_set(env, PROXY_VARIABLES)
    if chosen is None or proxy_server(chosen[1]) is None:
        return None
    variable, value = chosen
    exemptions = _first_set(env, NO_PROXY_VARIABLES)
    captured = tuple(host for host in hosts
                     if exemptions is None or not exempted(host, exemptions[1]))
    if not captured:
        return None
    return ProxyCapture(variable, _hidden_credentials(value), captured)


def _first_set(env: Mapping[str, str], names: Sequence[str]) -> Optional[Tuple[str, str]]:
    """Returns (name, value) of the first of ``names`` set in ``env``, empty or not, or None."""
    for name in names:
        if name in env:
            return name, env[name]
    return None


def proxy_server(value: str) -> Optional[str]:
    """Returns the host[:port] gRPC would connect to for proxy URI ``value``, or None where
    gRPC uses no proxy: empty, a scheme other than "http" (any case; so no need to check
    URI::Parse's rules for schemes), no "//", a query or fragment URI::Parse refuses, or no
    host."""
    scheme, colon, rest = value.partition(":")
    if not colon or scheme.lower() != "http" or not rest.startswith("//"):
        return None
    authority, tail = _cut(rest[2:], "/?#")
    if not _valid_tail(tail):
        return None
    host_port = authority[authority.rfind("@") + 1:]
    return host_port or None


def _cut(text: str, stops: str) -> Tuple[str, str]:
    """Returns ``text`` split before the first of the characters ``stops`` (all, '' if none)."""
    end = next((index for index, char in enumerate(text) if char in stops), len(text))
    return text[:end], text[end:]


def _valid_tail(tail: str) -> bool:
    """Returns False where URI::Parse refuses what follows a URI's authority: an empty query
    ("?" alone), or a query or fragment with characters RFC 3986 does not allow there."""
    _, rest = _cut(tail, "?#")
    query, fragment = _cut(rest, "#")
    if query == "?":
        return False
    return all(char in _QUERY_CHARS for char in query[1:] + fragment[1:])


def _hidden_credentials(value: str) -> str:
    """Returns proxy URI ``value`` with any user:password@ of its authority shown as ***@."""
    scheme, slashes, rest = value.partition("://")
    authority, tail = _cut(rest, "/?#")
    at = authority.rfind("@")
    if not slashes or at < 0:
        return value
    return f"{scheme}://***{authority[at:]}{tail}"


def peer_hosts(peers: Sequence[str]) -> Tuple[str, ...]:
    """Returns the host of each "host:port" peer ("[v6]:port" too), once each, in order.

    Raises:
      FormatError: ``peers`` is one string, or a peer is not "host:port" (naming it).
    """
    if isinstance(peers, (str, bytes)):
        raise FormatError(f"peers={peers!r}: expected a list of 'host:port' strings, not one "
                          "string.")
    hosts: Dict[str, None] = {}
    for index, peer in enumerate(peers):
        split = _split_host_port(peer) if isinstance(peer, str) else None
        if split is None or not split[0] or not _is_port_text(split[1]):
            raise FormatError(f"peers[{index}]={peer!r}: expected 'host:port' as in the "
                              "ClusterSpec, e.g. 'node1:2222'.")
        hosts.setdefault(split[0], None)
    return tuple(hosts)


def _is_port_text(text: Optional[str]) -> bool:
    """Returns True for a port written in ASCII digits, 1 to 65535."""
    return (text is not None and text.isascii() and text.isdigit() and len(text) <= 5
            and is_port(int(text)))


def _split_host_port(name: str) -> Optional[Tuple[str, Optional[str]]]:
    """Returns (host, port or None) as gRPC's SplitHostPort splits ``name``, or None where it
    refuses it: an unmatched '[', text after ']' but ':port', a bracketed host without ':'."""
    if name.startswith("["):
        end = name.find("]", 1)
        host, after = name[1:end], name[end + 1:]
        if end < 0 or ":" not in host or after[:1] not in ("", ":"):
            return None
        return host, after[1:] if after else None
    if name.count(":") == 1:
        host, _, port = name.partition(":")
        return host, port
    return name, None


def exempted(host: str, no_proxy: str) -> bool:
    """Returns True where gRPC's exemption list ``no_proxy`` exempts peer ``host`` (rules 4 to
    6 of the module's docstring: AddressIncluded)."""
    address = _address(host)
    for piece in no_proxy.split(","):
        if not piece:
            continue
        entry = piece.strip(_BLANKS)
        if _ends_with(host, entry) or (address is not None and _in_subnet(address, entry)):
            return True
    return False


def _ends_with(host: str, entry: str) -> bool:
    """Returns True where ``host`` ends with ``entry``, ASCII case ignored, byte by byte
    (absl::EndsWithIgnoreCase): an empty ``entry`` ends every host."""
    whole, tail = (text.encode("utf-8", "surrogateescape").lower() for text in (host, entry))
    return whole.endswith(tail)


def _address(host: str) -> Optional[Address]:
    """Returns ``host`` as an IPv4 or IPv6 address the way StringToSockaddr(host, 0) reads it
    (bracketed or not; an IPv6 zone, "%eth0", taken to exist), or None for a name."""
    joined = f"[{host}]:0" if host[:1] != "[" and ":" in host else f"{host}:0"
    split = _split_host_port(joined)
    for kind in (ipaddress.IPv4Address, ipaddress.IPv6Address):
        try:
            return kind(split[0]) if split else None
        except ValueError:
            pass
    return None


def _in_subnet(address: Address, entry: str) -> bool:
    """Returns True where ``entry`` is "address/bits" and ``address`` is in that subnet
    (ServerInCIDRRange): the entry's host bits ignored, bits at or above the width exact."""
    base, _, bits_text = entry.partition("/")
    network, bits = _address(base), _mask_bits(bits_text)
    if network is None or bits is None or network.version != address.version:
        return False
    shift = network.max_prefixlen - min(bits, network.max_prefixlen)
    return int(network) >> shift == int(address) >> shift


def _mask_bits(text: str) -> Optional[int]:
    """Returns ``text`` as absl::SimpleAtoi reads a uint32 (ASCII blanks around it and a '+'
    allowed, decimal digits), or None."""
    digits = text.strip(_BLANKS)
    digits = digits[1:] if digits.startswith("+") else digits
    if not digits.isascii() or not digits.isdigit():
        return None
    significant = digits.lstrip("0") or "0"
    if len(significant) > len(str(_UINT32_MAX)) or int(significant) > _UINT32_MAX:
        return None
    return int(significant)


def capture_message(capture: ProxyCapture) -> str:
    """Returns one line: the variable and its value, the hosts gRPC would send through it (at
    most SHOWN_HOSTS named), what that does to training, and the two fixes."""
    hosts = capture.hosts
    more = len(hosts) - SHOWN_HOSTS
    shown = ", ".join(hosts[:SHOWN_HOSTS]) + (f" and {more} more" if more > 0 else "")
    return (f"{capture.variable}={capture.proxy} is set: TensorFlow's gRPC would send worker "
            f"traffic to {shown} through that proxy, and training hangs. Unset it in the job "
            "(`unset http_proxy https_proxy grpc_proxy` before srun/mpirun, or in the sbatch "
            f"script), or exempt the nodes: {_no_proxy_fix(hosts)} (where no_grpc_proxy is "
            "set, gRPC reads it instead of no_proxy: add them there).")


def _no_proxy_fix(hosts: Tuple[str, ...]) -> str:
    """Returns the export that exempts all ``hosts``: their one domain (".example.com") where
    more than SHOWN_HOSTS names share it, else the hosts themselves."""
    domains = {host.partition(".")[2].lower() for host in hosts}
    if (len(hosts) > SHOWN_HOSTS and len(domains) == 1 and "" not in domains
            and all(_address(host) is None for host in hosts)):
        return f"`export no_proxy=.{domains.pop()},$no_proxy`"
    if len(hosts) > SHOWN_HOSTS:
        listed = ",".join(hosts[:SHOWN_HOSTS])
        return f"`export no_proxy={listed},...,$no_proxy` with all {len(hosts)} hosts"
    return f"`export no_proxy={','.join(hosts)},$no_proxy`"
