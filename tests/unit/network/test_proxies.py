"""_proxies: which peers TensorFlow's gRPC would send through a proxy, one row per gRPC rule, on
both sides of it.

Every rule is gRPC 1.74.0's (the gRPC TensorFlow 2.21 builds with); each table's comment names
the file and function. The rule tables' rows were also run against TensorFlow 2.21 itself (a
worker's channel to the peer, a listening socket as the proxy) and agreed.
"""

from __future__ import annotations

import pytest

from mpi_resolver.core.errors import FormatError
from mpi_resolver.network.proxies import (NO_PROXY_VARIABLES, PROXY_VARIABLES, ProxyCapture,
                                   capture_message, proxy_capture)

pytestmark = pytest.mark.unit

PROXY = "http://proxy.example.com:3128"
DEAD = "http://127.0.0.1:9"
TWO = ["node1:2222", "node2:2222"]
BOTH = ("node1", "node2")


def captured(env, peers):
    """Returns (variable, hosts) of the capture, or None."""
    capture = proxy_capture(env, peers)
    return None if capture is None else (capture.variable, capture.hosts)


def test_variable_names_are_grpcs_in_its_order():
    assert PROXY_VARIABLES == ("grpc_proxy", "https_proxy", "http_proxy")
    assert NO_PROXY_VARIABLES == ("no_grpc_proxy", "no_proxy")


@pytest.mark.parametrize("env, peers, expected", [
    # Measured with TensorFlow 2.21, two workers on node1 and node2.
    pytest.param({"HTTP_PROXY": DEAD}, TWO, None, id="measured: upper-case HTTP_PROXY alone"),
    pytest.param({"http_proxy": DEAD}, TWO, ("http_proxy", BOTH),
                 id="measured: http_proxy on a dead port captures both"),
    pytest.param({"https_proxy": DEAD}, TWO, ("https_proxy", BOTH),
                 id="measured: https_proxy on a dead port captures both"),
    pytest.param({"http_proxy": DEAD, "no_proxy": "node1,node2"}, TWO, None,
                 id="measured: no_proxy=node1,node2 exempts both"),
    # gRPC 1.74.0 http_proxy_mapper.cc, GetHttpProxyServer: grpc_proxy, then https_proxy, then
    # http_proxy (GetEnv: lower case only); the first SET wins.
    pytest.param({"grpc_proxy": PROXY, "https_proxy": PROXY, "http_proxy": PROXY}, TWO,
                 ("grpc_proxy", BOTH), id="grpc_proxy before https_proxy"),
    pytest.param({"https_proxy": PROXY, "http_proxy": PROXY}, TWO, ("https_proxy", BOTH),
                 id="https_proxy before http_proxy"),
    pytest.param({"HTTPS_PROXY": PROXY, "GRPC_PROXY": PROXY}, TWO, None,
                 id="upper-case names are not read"),
    pytest.param({}, TWO, None, id="no proxy variable"),
    # gRPC 1.74.0 http_proxy_mapper.cc, GetHttpProxyServer: "an empty value means don't use
    # proxy", and ends the search.
    pytest.param({"http_proxy": ""}, TWO, None, id="http_proxy set but empty"),
    pytest.param({"grpc_proxy": "", "https_proxy": PROXY}, TWO, None,
                 id="an empty grpc_proxy hides https_proxy"),
    pytest.param({"https_proxy": "", "http_proxy": PROXY}, TWO, None,
                 id="an empty https_proxy hides http_proxy"),
    pytest.param({"https_proxy": PROXY, "http_proxy": ""}, TWO, ("https_proxy", BOTH),
                 id="an empty later variable is not read"),
    pytest.param({"http_proxy": PROXY}, [], None, id="no peers"),
])
def test_which_variable(env, peers, expected):
    assert captured(env, peers) == expected


# gRPC 1.74.0 http_proxy_mapper.cc, GetHttpProxyServer, with src/core/util/uri.cc URI::Parse
# (which lowers the scheme): an http URI with a host, or no proxy at all (logged as an error;
# the next variable is not tried).
@pytest.mark.parametrize("value, used", [
    pytest.param("http://proxy:3128", True, id="http://host:port"),
    pytest.param("http://proxy", True, id="http://host without a port"),
    pytest.param("http://proxy:3128/", True, id="a trailing slash"),
    pytest.param("http://user:secret@proxy:3128", True, id="user and password"),
    pytest.param("http://@proxy:3128", True, id="an empty user"),
    pytest.param("proxy:3128", False, id="host:port without a scheme cannot be parsed"),
    pytest.param("10.0.0.1:3128", False, id="address:port without a scheme"),
    pytest.param("1http://proxy:3128", False, id="a scheme starts with a letter"),
    pytest.param("https://proxy:3128", False, id="https scheme not supported"),
    pytest.param("socks5://proxy:1080", False, id="socks5 scheme not supported"),
    pytest.param("HTTP://proxy:3128", True, id="the scheme in upper case (URI lowers it)"),
    pytest.param("hTTp://proxy:3128", True, id="the scheme in mixed case"),
    pytest.param("http:proxy:3128", False, id="no // so no authority"),
    pytest.param("http://", False, id="an empty authority"),
    pytest.param("http:///proxy", False, id="a path but no authority"),
    pytest.param("http://user@X", True, id="a one-letter host after a user"),
    pytest.param("http://a@b@", False, id="the host follows the last @"),
    pytest.param("http://user@", False, id="user but no host"),
    pytest.param(":3128", False, id="an empty scheme"),
    pytest.param("ht_tp://proxy:3128", False, id="a character no scheme has"),
    pytest.param("http://proxy:3128?", False, id="an empty query is refused"),
    pytest.param("http://proxy:3128/?X=b", True, id="a query"),
    pytest.param("http://proxy:3128/# a", False, id="a blank in a fragment is refused"),
    pytest.param("http://proxy:3128/#ab", True, id="a fragment"),
    pytest.param("http://proxy:3128/? a", False, id="a blank in a query is refused"),
    pytest.param("http://proxy:3128/X b", True, id="a path is not checked"),
])
def test_proxy_value_formats(value, used):
    expected = ("http_proxy", BOTH) if used else None
    assert captured({"http_proxy": value}, TWO) == expected


def test_a_refused_value_does_not_fall_back_to_the_next_variable():
    env = {"https_proxy": "https://proxy:3128", "http_proxy": "http://proxy:3128"}
    assert captured(env, TWO) is None
    assert captured({"http_proxy": "http://proxy:3128"}, TWO) == ("http_proxy", BOTH)


# gRPC 1.74.0 http_proxy_mapper.cc, MapName: no_grpc_proxy where it is SET (even empty), else
# no_proxy; never both.
@pytest.mark.parametrize("exemptions, expected", [
    pytest.param({"no_grpc_proxy": "node1,node2"}, None, id="no_grpc_proxy exempts"),
    pytest.param({"no_grpc_proxy": "node1,node2", "no_proxy": ""}, None,
                 id="no_grpc_proxy before an empty no_proxy"),
    pytest.param({"no_grpc_proxy": "", "no_proxy": "node1,node2"}, BOTH,
                 id="an empty no_grpc_proxy hides no_proxy"),
    pytest.param({"no_grpc_proxy": "node1", "no_proxy": "node2"}, ("node2",),
                 id="the lists are not merged"),
    pytest.param({"no_proxy": "node1"}, ("node2",), id="no_proxy exempts the host it names"),
    pytest.param({"NO_PROXY": "node1,node2"}, BOTH, id="upper-case NO_PROXY is not read"),
    pytest.param({"no_proxy": ""}, BOTH, id="an empty no_proxy exempts nothing"),
])
def test_which_exemption_list(exemptions, expected):
    result = captured({"http_proxy": PROXY, **exemptions}, TWO)
    assert result == (None if expected is None else ("http_proxy", expected))


# gRPC 1.74.0 http_proxy_mapper.cc, AddressIncluded: split on ',' skipping empty pieces, then
# absl::StripAsciiWhitespace; ExactMatchOrSubdomain: absl::EndsWithIgnoreCase(host, entry).
# (gRPC 1.85.1 matches on label boundaries instead: its "ample.com", "node1 -> xnode1" and
# blank-entry rows would flip.)
@pytest.mark.parametrize("no_proxy, host, exempt", [
    pytest.param("node1 , node2", "node2", True, id="blanks around an entry are stripped"),
    pytest.param("\tnode9,\nnode2\r", "node2", True, id="tabs and newlines are stripped"),
    pytest.param("node1 node2", "node2", False, id="a space-separated list is one entry"),
    pytest.param("node1;node2", "node2", False, id="semicolons do not separate"),
    pytest.param(",,node2,", "node2", True, id="empty pieces are skipped"),
    pytest.param("node9, ", "node2", True, id="a blank entry exempts every host"),
    pytest.param("node9,,", "node2", False, id="an empty piece is skipped, not matched"),
    pytest.param("node9,\u00a0", "node2", False, id="a non-ASCII blank is not stripped"),
    pytest.param("node9,\udcff", "node2", False, id="an undecodable byte (os.environ)"),
    pytest.param(".example.com", "node1.example.com", True, id=".domain exempts its hosts"),
    pytest.param("example.com", "node1.example.com", True, id="domain exempts its hosts"),
    pytest.param("ample.com", "node1.example.com", True, id="any suffix exempts, even ample"),
    pytest.param("example.co", "node1.example.com", False, id="not a suffix"),
    pytest.param("example.com", "example.com", True, id="the exact name"),
    pytest.param(".example.com", "example.com", False, id=".domain is not the domain"),
    pytest.param("node1", "xnode1", True, id="node1 exempts xnode1 (suffix)"),
    pytest.param("node1", "node1x", False, id="node1 does not exempt node1x (prefix)"),
    pytest.param("anode1", "node1", False, id="an entry longer than the host"),
    pytest.param("NODE1.Example.COM", "node1.example.com", True, id="entry case ignored"),
    pytest.param("node1", "NODE1", True, id="host case ignored"),
    pytest.param("*", "node1", False, id="* is no wildcard"),
    pytest.param("*.example.com", "node1.example.com", False, id="*.domain is no wildcard"),
    pytest.param("node1:2222", "node1", False, id="an entry with a port exempts nothing"),
    pytest.param("10.1.2.3", "10.1.2.3", True, id="an address as text"),
    pytest.param("0.1.2.3", "10.1.2.3", True, id="an address's text suffix exempts it too"),
    pytest.param("10.1.2.30", "10.1.2.3", False, id="a longer address"),
])
def test_exemption_entries(no_proxy, host, exempt):
    result = captured({"http_proxy": PROXY, "no_proxy": no_proxy}, [f"{host}:2222"])
    assert result == (None if exempt else ("http_proxy", (host,)))


# gRPC 1.74.0 http_proxy_mapper.cc, ServerInCIDRRange, with StringToSockaddr
# (src/core/lib/address_utils/parse_address.cc), grpc_sockaddr_mask_bits and
# grpc_sockaddr_match_subnet (sockaddr_utils.cc), absl::SimpleAtoi.
@pytest.mark.parametrize("no_proxy, peer, exempt", [
    pytest.param("10.0.0.0/8", "10.1.2.3:2222", True, id="an address in the subnet"),
    pytest.param("10.0.0.0/8", "11.1.2.3:2222", False, id="an address outside it"),
    pytest.param("10.0.0.0/8", "node1:2222", False, id="a host name is not resolved"),
    pytest.param("10.1.2.3/8", "10.9.9.9:2222", True, id="the entry's host bits are ignored"),
    pytest.param("10.1.2.0/24", "10.1.2.255:2222", True, id="/24: last address in"),
    pytest.param("10.1.2.0/24", "10.1.3.0:2222", False, id="/24: next address out"),
    pytest.param("128.0.0.0/1", "200.0.0.1:2222", True, id="/1: the top bit in"),
    pytest.param("128.0.0.0/1", "100.0.0.1:2222", False, id="/1: the top bit out"),
    pytest.param("10.1.2.3/32", "10.1.2.3:2222", True, id="/32: that address"),
    pytest.param("10.1.2.4/32", "10.1.2.3:2222", False, id="/32: another"),
    pytest.param("10.1.2.4/31", "10.1.2.5:2222", True, id="/31: the pair"),
    pytest.param("10.1.2.4/99", "10.1.2.3:2222", False, id="/99: exact, another"),
    pytest.param("11.1.2.3/99", "11.1.2.3:2222", True, id="/99: exact, that address"),
    pytest.param("192.168.0.0/0", "10.1.2.3:2222", True, id="/0: every IPv4 address"),
    pytest.param("10.0.0.0/ 8", "10.1.2.3:2222", True, id="blanks after / are read"),
    pytest.param("10.0.0.0/8\u00a0", "10.1.2.3:2222", False, id="a non-ASCII blank is not"),
    pytest.param("10.0.0.0/+8", "10.1.2.3:2222", True, id="a + sign is read"),
    pytest.param("10.0.0.0/008", "10.1.2.3:2222", True, id="leading zeros are read"),
    pytest.param("10.0.0.0/-8", "10.1.2.3:2222", False, id="a - sign is refused"),
    pytest.param("10.0.0.0/x", "10.1.2.3:2222", False, id="bits not a number"),
    pytest.param("10.0.0.0/", "10.1.2.3:2222", False, id="no bits"),
    pytest.param("/8", "10.1.2.3:2222", False, id="no address"),
    pytest.param("11.1.2.3/4294967295", "11.1.2.3:2222", True, id="bits: uint32 maximum"),
    pytest.param("11.1.2.3/4294967296", "11.1.2.3:2222", False, id="bits: uint32 overflow"),
    pytest.param("11.1.2.3/" + "9" * 5000, "11.1.2.3:2222", False, id="bits: 5000 digits"),
    pytest.param("11.1.2.3/" + "0" * 5000 + "32", "11.1.2.3:2222", True,
                 id="bits: 5000 leading zeros"),
    pytest.param("10.0.0.0 /8", "10.1.2.3:2222", False, id="a blank before / is refused"),
    pytest.param("010.0.0.0/8", "10.1.2.3:2222", False, id="a leading zero is no address"),
    pytest.param("node/8", "10.1.2.3:2222", False, id="a name is no subnet"),
    pytest.param("fd00::/8", "[fd12::1]:2222", True, id="an IPv6 subnet"),
    pytest.param("[fd00::]/8", "[fd12::1]:2222", True, id="a bracketed IPv6 subnet"),
    pytest.param("[fd00::/8", "[fd12::1]:2222", False, id="an unmatched ["),
    pytest.param("fe00::/8", "[fd12::1]:2222", False, id="outside an IPv6 subnet"),
    pytest.param("0.0.0.0/0", "[fd12::1]:2222", False, id="IPv4 /0 is not IPv6"),
    pytest.param("::/0", "10.1.2.3:2222", False, id="IPv6 /0 is not IPv4"),
    pytest.param("fe80::/10", "[fe80::1%2]:2222", True, id="a zone id in digits is read"),
    pytest.param("fe80::/10", "[fe80::1%eth0]:2222", True, id="a named zone is taken to exist"),
    pytest.param("fe80::/10", "[fe80::1%]:2222", False, id="an empty zone is no address"),
    pytest.param("10.0.0.0/8", "10.1.2.3%2:2222", False, id="no zone on IPv4"),
])
def test_subnet_entries(no_proxy, peer, exempt):
    host = peer.rpartition(":")[0].strip("[]")
    result = captured({"http_proxy": PROXY, "no_proxy": no_proxy}, [peer])
    assert result == (None if exempt else ("http_proxy", (host,)))


def test_hosts_are_first_seen_once_each_and_only_the_captured_ones():
    peers = ["node3:2222", "node1:2222", "node3:2223", "node2:2222"]
    env = {"http_proxy": PROXY, "no_proxy": "node1"}
    assert proxy_capture(env, peers) == ProxyCapture("http_proxy", PROXY, ("node3", "node2"))


@pytest.mark.parametrize("value, shown", [
    pytest.param("http://user:secret@proxy:3128/", "http://***@proxy:3128/", id="hidden"),
    pytest.param("http://Xu:s@proxy:3128", "http://***@proxy:3128", id="hidden, any letters"),
    pytest.param("http://@proxy:3128", "http://***@proxy:3128", id="an empty user"),
    pytest.param("http://u:s@proxy:3128/a://b", "http://***@proxy:3128/a://b",
                 id="the first :// ends the scheme"),
    pytest.param("http://a@b@proxy:3128", "http://***@proxy:3128", id="up to the last @"),
    pytest.param("http://proxy:3128/a@b", "http://proxy:3128/a@b", id="an @ in the path"),
    pytest.param("http://proxy:3128", "http://proxy:3128", id="no credentials"),
])
def test_credentials_are_hidden_in_the_capture(value, shown):
    assert proxy_capture({"http_proxy": value}, TWO).proxy == shown


# gRPC 1.74.0 src/core/util/host_port.cc, SplitHostPort, with the port a ClusterSpec requires.
@pytest.mark.parametrize("peers, bad", [
    pytest.param(["node1:2222", "node2"], "peers[1]='node2'", id="no port"),
    pytest.param(["node1:"], "peers[0]='node1:'", id="an empty port"),
    pytest.param([":2222"], "peers[0]=':2222'", id="an empty host"),
    pytest.param(["node1:x"], "peers[0]='node1:x'", id="a port not a number"),
    pytest.param(["node1:0"], "peers[0]='node1:0'", id="port 0"),
    pytest.param(["node1:65536"], "peers[0]='node1:65536'", id="port 65536"),
    pytest.param(["node1:2:3"], "peers[0]='node1:2:3'", id="two colons"),
    pytest.param(["node1:" + "9" * 5000], "peers[0]='node1:999", id="a 5000-digit port"),
    pytest.param(["[::1]"], "peers[0]='[::1]'", id="bracketed without a port"),
    pytest.param(["[::1:2222"], "peers[0]='[::1:2222'", id="an unmatched ["),
    pytest.param(["[::1]x:2222"], "peers[0]='[::1]x:2222'", id="text after ]"),
    pytest.param(["[::1]x2222"], "peers[0]='[::1]x2222'", id="text after ], digits"),
    pytest.param(["[::1]]:2222"], "peers[0]='[::1]]:2222'", id="the first ] closes"),
    pytest.param(["[node1]:2222"], "peers[0]='[node1]:2222'", id="a bracketed name"),
    pytest.param([None], "peers[0]=None", id="not a string"),
    pytest.param("node1:2222", "peers='node1:2222'", id="one string, not a list"),
])
def test_bad_peers_name_the_argument_even_without_a_proxy(peers, bad):
    for env in ({}, {"http_proxy": PROXY}):
        with pytest.raises(FormatError, match="expected") as info:
            proxy_capture(env, peers)
        assert str(info.value).startswith(bad)


def test_bad_peer_messages():
    with pytest.raises(FormatError) as one:
        proxy_capture({}, ["node1"])
    assert str(one.value) == ("peers[0]='node1': expected 'host:port' as in the ClusterSpec, "
                              "e.g. 'node1:2222'.")
    with pytest.raises(FormatError) as text:
        proxy_capture({}, "node1:2222")
    assert str(text.value) == ("peers='node1:2222': expected a list of 'host:port' strings, "
                               "not one string.")


@pytest.mark.parametrize("peer, host", [
    pytest.param("node1:65535", "node1", id="port 65535"),
    pytest.param("node1:1", "node1", id="port 1"),
    pytest.param("[::1]:2222", "::1", id="a bracketed IPv6 address"),
    pytest.param("[::1]:9", "::1", id="a bracketed IPv6 address, one-digit port"),
])
def test_good_peers(peer, host):
    assert captured({"http_proxy": PROXY}, [peer]) == ("http_proxy", (host,))


def nodes(count, domain=""):
    return tuple(f"node{i}{domain}" for i in range(1, count + 1))


def message(hosts, variable="http_proxy", proxy=PROXY):
    return capture_message(ProxyCapture(variable, proxy, hosts))


def test_message_names_the_variable_the_hosts_what_happens_and_both_fixes():
    assert message(("node1", "node2")) == (
        "http_proxy=http://proxy.example.com:3128 is set: TensorFlow's gRPC would send worker "
        "traffic to node1, node2 through that proxy, and training hangs. Unset it in the job "
        "(`unset http_proxy https_proxy grpc_proxy` before srun/mpirun, or in the sbatch "
        "script), or exempt the nodes: `export no_proxy=node1,node2,$no_proxy` (where "
        "no_grpc_proxy is set, gRPC reads it instead of no_proxy: add them there).")


@pytest.mark.parametrize("hosts, names, fix", [
    pytest.param(nodes(3), "node1, node2, node3 through",
                 "`export no_proxy=node1,node2,node3,$no_proxy`", id="three: all named"),
    pytest.param(nodes(4), "node1, node2, node3 and 1 more through",
                 "`export no_proxy=node1,node2,node3,...,$no_proxy` with all 4 hosts",
                 id="four: and 1 more"),
    pytest.param(nodes(4, ".c.example"), "node1.c.example, node2.c.example, node3.c.example "
                 "and 1 more", "`export no_proxy=.c.example,$no_proxy`",
                 id="four in one domain: the domain"),
    pytest.param(nodes(3, ".c.example"), "", "`export no_proxy=node1.c.example,"
                 "node2.c.example,node3.c.example,$no_proxy`", id="three in one domain: named"),
    pytest.param(("a.C.example", "b.c.example", "c.c.EXAMPLE", "d.c.example"), "",
                 "`export no_proxy=.c.example,$no_proxy`", id="the domain in any case"),
    pytest.param(nodes(3, ".c.example") + ("node4.d.example",), "",
                 "with all 4 hosts", id="two domains: no domain"),
    pytest.param(nodes(3, ".c.example") + ("node4",), "", "with all 4 hosts",
                 id="a short name: no domain"),
    pytest.param(("10.0.0.1", "11.0.0.1", "12.0.0.1", "13.0.0.1"), "",
                 "`export no_proxy=10.0.0.1,11.0.0.1,12.0.0.1,...,$no_proxy` with all 4",
                 id="addresses: no domain, though they end alike"),
])
def test_message_shows_three_hosts_and_the_shortest_correct_no_proxy(hosts, names, fix):
    text = message(hosts)
    assert names in text and fix in text and "\n" not in text
