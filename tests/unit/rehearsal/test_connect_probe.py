"""_connect_probe and _host_addresses: listening and dialling for real, on loopback only
(127.0.0.1, ::1, localhost; ports found by binding port 0), and the failure report."""

from __future__ import annotations

import errno
import shutil
import socket
import subprocess
import sys
import threading
import time
from contextlib import contextmanager
from typing import Iterator, List

import pytest

from mpi_resolver.rehearsal import connect_probe as _connect_probe
from mpi_resolver.rehearsal.connect_probe import (NO_NAME, OTHER, REFUSED, THIS_HOST, TIMED_OUT,
                                         UNREACHABLE, Failure, classify, dial, dial_peers,
                                         failure_table, fix_for, listen, run_bounded,
                                         split_address)
from mpi_resolver.core.errors import ResolutionError
from mpi_resolver.network.host_addresses import (is_own, parse_fib_trie, parse_if_inet6,
                                          this_host_addresses)
from tests.conftest import ROOT, own_network

pytestmark = pytest.mark.unit

LOOPBACK = ("127.0.0.1",)


def free_port(host: str = "127.0.0.1") -> int:
    """Returns a port nothing listens on now (the system's pick for port 0, released)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


@contextmanager
def full_listener() -> Iterator[int]:
    """Yields the port of a loopback listener that takes no more connections: backlog 0,
    never accepting, its queue filled until a connection times out (Linux then drops SYNs)."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(0)
    port = server.getsockname()[1]
    held: List[socket.socket] = []
    try:
        for _ in range(16):
            c = socket.socket()
            held.append(c)
            c.settimeout(0.2)
            try:
                c.connect(("127.0.0.1", port))
            except TimeoutError:
                break
        else:
            raise AssertionError("the listener's queue never filled")
        yield port
    finally:
        for s in held + [server]:
            s.close()


def fake_resolve(*addresses: str):
    """Returns a getaddrinfo that resolves any name to ``addresses``, in that order."""
    def resolve(host, port, type=0):
        return [(socket.AF_INET6 if ":" in a else socket.AF_INET, socket.SOCK_STREAM, 6, "",
                 (a, port)) for a in addresses]
    return resolve


def no_connection(*args):
    raise AssertionError("dialled an address that should not be dialled")


# --- dial: each kind of failure for real --------------------------------------------------

def test_a_listening_peer_is_dialled_by_address_and_by_name():
    with listen(f"localhost:{free_port()}", LOOPBACK) as listener:
        for name in ("127.0.0.1", "localhost"):
            assert dial(f"{name}:{listener.port}", 2.0, set(), remote=False) is None
        deadline = time.monotonic() + 2
        while listener.accepted < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert listener.accepted == 2


def test_ipv6_loopback_listens_and_is_dialled():
    port = free_port("::1")
    with listen(f"[::1]:{port}", ("::1",)):
        assert dial(f"[::1]:{port}", 2.0, set(), remote=False) is None


@pytest.mark.parametrize("name, remote, kind, detail, fix", [
    pytest.param("127.0.0.1", False, REFUSED, "127.0.0.1: connection refused",
                 "nothing listens on port {port} on 127.0.0.1: the rank there did not start",
                 id="a closed port: refused"),
    pytest.param("node1.invalid", False, NO_NAME, "", "the node name is not in DNS or "
                 "/etc/hosts on here; use --address fqdn/ip", id="a name that never resolves"),
    pytest.param("a..b", False, NO_NAME, "label", "not in DNS", id="a name no resolver takes"),
    pytest.param("localhost", True, THIS_HOST, "localhost -> 127.0.0.1",
                 "localhost resolves to 127.0.0.1, an address of this host (often a 127.0.1.1 "
                 "line in /etc/hosts)", id="another node's name resolving to loopback"),
    pytest.param("127.0.1.1", True, THIS_HOST, "127.0.1.1 -> 127.0.1.1",
                 "127.0.1.1 resolves to 127.0.1.1", id="127.0.1.1 is loopback"),
])
def test_a_dial_that_fails_says_why_and_the_fix(name, remote, kind, detail, fix):
    port = free_port()
    start = time.monotonic()
    failure = dial(f"{name}:{port}", 2.0, set(), remote=remote, from_rank=3, to_rank=5,
                   from_host="here")
    assert time.monotonic() - start < 2.0
    assert failure is not None
    assert (failure.from_rank, failure.from_host, failure.to_rank, failure.to_address,
            failure.kind) == (3, "here", 5, f"{name}:{port}", kind)
    assert detail in failure.detail
    assert fix.format(port=port) in failure.fix


def test_a_peer_that_takes_no_more_connections_times_out_within_the_timeout():
    with full_listener() as port:
        start = time.monotonic()
        failure = dial(f"127.0.0.1:{port}", 0.3, set(), remote=False)
        took = time.monotonic() - start
    assert failure is not None and failure.kind == TIMED_OUT
    assert 0.25 < took < 1.0
    assert failure.detail == "127.0.0.1: no answer within the timeout"
    assert f"check the firewall for port {port}" in failure.fix


def test_a_remote_name_resolving_to_one_of_this_host_s_addresses_is_not_dialled(monkeypatch):
    monkeypatch.setattr(_connect_probe, "_connect", no_connection)
    failure = dial("node2:8888", 1.0, {"192.0.2.7"}, remote=True,
                   resolve=fake_resolve("192.0.2.9", "192.0.2.7"))
    assert failure is not None and failure.kind == THIS_HOST
    assert failure.detail == "node2 -> 192.0.2.7"
    assert failure.fix.startswith("node2 resolves to 192.0.2.7, an address of this host")


@pytest.mark.parametrize("remote", [True, False], ids=["remote", "same node"])
def test_a_name_resolving_elsewhere_or_a_peer_of_this_node_is_dialled(monkeypatch, remote):
    tried = []
    monkeypatch.setattr(_connect_probe, "_connect", lambda *a: tried.append(a[3]))
    own = {"192.0.2.7"}
    assert dial("node2:8888", 1.0, own, remote=remote,
                resolve=fake_resolve("192.0.2.9" if remote else "192.0.2.7")) is None
    assert tried == [("192.0.2.9" if remote else "192.0.2.7", 8888)]


def test_every_address_of_a_name_is_tried_in_the_order_given():
    port = free_port()
    with listen(f"x:{port}", LOOPBACK):
        assert dial(f"x:{port}", 2.0, set(), remote=False,
                    resolve=fake_resolve("::1", "127.0.0.1")) is None
    failure = dial(f"x:{port}", 2.0, set(), remote=False,
                   resolve=fake_resolve("::1", "127.0.0.1"))
    assert failure is not None and failure.kind == REFUSED
    assert failure.detail == "::1: connection refused; 127.0.0.1: connection refused"


def test_the_kind_is_the_first_address_s_and_the_detail_names_each():
    with full_listener() as port:
        failure = dial(f"x:{port}", 0.3, set(), remote=False,
                       resolve=fake_resolve("::1", "127.0.0.1"))
    assert failure is not None and failure.kind == REFUSED
    assert failure.detail == "::1: connection refused; 127.0.0.1: no answer within the timeout"


def test_a_name_without_addresses_does_not_resolve():
    failure = dial("x:1", 1.0, set(), resolve=fake_resolve())
    assert failure is not None and (failure.kind, failure.detail) == (NO_NAME, "x has no address")


def test_a_resolution_that_takes_the_whole_timeout_leaves_no_time_to_connect(monkeypatch):
    monkeypatch.setattr(_connect_probe, "_connect", no_connection)

    def slow(host, port, type=0):
        time.sleep(0.2)
        return fake_resolve("127.0.0.1")(host, port)

    failure = dial("x:1", 0.1, set(), remote=False, resolve=slow)
    assert failure is not None and failure.kind == TIMED_OUT


@pytest.mark.parametrize("error, kind, detail", [
    (socket.gaierror(-2, "Name or service not known"), NO_NAME, "Name or service not known"),
    (UnicodeError("label empty or too long"), NO_NAME, "label empty or too long"),
    (TimeoutError("timed out"), TIMED_OUT, "no answer within the timeout"),
    (ConnectionRefusedError(errno.ECONNREFUSED, "x"), REFUSED, "connection refused"),
    (OSError(errno.ENETUNREACH, "x"), UNREACHABLE, "Network is unreachable"),
    (OSError(errno.EHOSTUNREACH, "x"), UNREACHABLE, "No route to host"),
    (OSError(errno.ECONNRESET, "x"), OTHER, "Connection reset by peer"),
    (OSError("no errno"), OTHER, "no errno"),
], ids=["gaierror", "unicode", "timeout", "refused", "net unreachable", "host unreachable",
        "reset", "no errno"])
def test_classify(error, kind, detail):
    assert classify(error) == (kind, detail)


@pytest.mark.parametrize("kind, fix", [
    (NO_NAME, "the node name is not in DNS or /etc/hosts on n1; use --address fqdn/ip or fix "
              "the site's resolver"),
    (THIS_HOST, "n2 resolves to 127.0.1.1, an address of this host (often a 127.0.1.1 line in "
                "/etc/hosts); fix /etc/hosts or use --address ip/iface:NAME"),
    (REFUSED, "nothing listens on port 8888 on n2: the rank there did not start, or listens on "
              "another address"),
    (TIMED_OUT, "a firewall drops the packets, or the name resolves to an address this host "
                "cannot reach; check the firewall for port 8888 and the interface n2 resolves "
                "to"),
    (UNREACHABLE, "n1 has no route to 127.0.1.1; use --address with an address both nodes "
                  "reach"),
    (OTHER, "check the network between n1 and n2:8888"),
])
def test_each_kind_has_a_one_line_fix(kind, fix):
    assert fix_for(kind, "n2", 8888, "n1", "127.0.1.1") == fix


@pytest.mark.parametrize("address, parts", [
    ("node1:8888", ("node1", 8888)), ("[::1]:1", ("::1", 1)), ("10.0.0.1:65535",
                                                                ("10.0.0.1", 65535)),
])
def test_split_address(address, parts):
    assert split_address(address) == parts


@pytest.mark.parametrize("address", ["node1", ":8888", "node1:", "node1:0", "node1:65536",
                                     "node1:x", "[]:1"])
def test_split_address_rejects(address):
    with pytest.raises(ResolutionError, match="expected host:port, port 1 to 65535"):
        split_address(address)


# --- listen ---------------------------------------------------------------------------------

def test_a_port_another_socket_listens_on_cannot_be_listened_on():
    with socket.socket() as other:
        other.bind(("127.0.0.1", 0))
        other.listen(1)
        port = other.getsockname()[1]
        with pytest.raises(ResolutionError) as caught:
            listen(f"node1:{port}", LOOPBACK)
    assert str(caught.value) == (
        f"cannot listen on node1:{port}: port {port} is in use on node1 (another process holds "
        "it: an earlier run, another job's server). Stop that process, or pick other ports "
        "with --port-base (or --port-base auto).")


def test_a_port_in_time_wait_can_be_listened_on_again():
    port = free_port()
    with listen(f"x:{port}", LOOPBACK):
        assert dial(f"127.0.0.1:{port}", 2.0, set(), remote=False) is None
    with listen(f"x:{port}", LOOPBACK) as again:  # SO_REUSEADDR, as gRPC
        assert again.port == port


@pytest.mark.parametrize("port, why", [
    pytest.param(80, r"cannot listen on n1:80 \(ports below 1024 need root\): Permission "
                     "denied", id="a low port"),
    pytest.param(1024, r"cannot listen on n1:1024: Permission denied", id="1024: no hint"),
])
def test_a_port_this_process_may_not_listen_on(monkeypatch, port, why):
    def denied(self, address):
        raise PermissionError(errno.EACCES, "Permission denied")
    monkeypatch.setattr(socket.socket, "bind", denied)
    with pytest.raises(ResolutionError, match=why + "; TensorFlow's server could not either"):
        listen(f"n1:{port}", LOOPBACK)


def no_ipv6(monkeypatch, code: int) -> None:
    """Makes binding any IPv6 socket fail with ``code``."""
    real = socket.socket.bind

    def bind(self, address):
        if self.family == socket.AF_INET6:
            raise OSError(code, "no IPv6")
        return real(self, address)
    monkeypatch.setattr(socket.socket, "bind", bind)


@pytest.mark.parametrize("code", [errno.EAFNOSUPPORT, errno.EADDRNOTAVAIL])
def test_without_ipv6_the_next_address_is_bound_as_grpc_falls_back(monkeypatch, code):
    no_ipv6(monkeypatch, code)
    with listen(f"x:{free_port()}", ("::1", "127.0.0.1")) as listener:
        assert listener.sock.family == socket.AF_INET
    with pytest.raises(ResolutionError, match="no IPv6"):
        listen("x:1", ("::1",))  # the last: nothing to fall back to


def test_another_bind_error_does_not_fall_back(monkeypatch):
    no_ipv6(monkeypatch, errno.EADDRINUSE)
    with pytest.raises(ResolutionError, match="is in use"):
        listen("x:1", ("::1", "127.0.0.1"))


def test_no_address_to_bind():
    with pytest.raises(ResolutionError, match="cannot listen on x:1: no address to bind"):
        listen("x:1", ())


def test_by_default_every_address_is_bound_dual_stack_with_reuseaddr(monkeypatch):
    port = free_port("::1")
    bound = []
    real = socket.socket.bind

    def bind(self, address):  # records what it was asked, binds loopback instead
        bound.append((address[0], self.getsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR),
                      self.getsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY)))
        return real(self, ("::1", address[1]))
    monkeypatch.setattr(socket.socket, "bind", bind)
    with listen(f"x:{port}") as listener:
        assert listener.sock.getsockopt(socket.SOL_SOCKET, socket.SO_ACCEPTCONN) == 1
    assert bound == [("::", 1, 0)]


DUAL_STACK = '''
import socket, sys
from mpi_resolver.rehearsal.connect_probe import dial, listen
wild = sys.argv[1] == "wild"
with listen("x:8888") if wild else listen("x:8888", ("::1",)):
    for host in ("127.0.0.1", "[::1]") if wild else ("[::1]",):
        print(host, dial(f"{host}:8888", 2.0, set(), remote=False))
'''


def test_by_default_ipv4_and_ipv6_are_taken_on_one_port():
    """In a network namespace of its own (as root: it has loopback only) the default bind
    takes both; elsewhere only the IPv6 loopback bind is tried (binding every address would
    listen beyond loopback)."""
    argv = own_network([sys.executable, "-c", DUAL_STACK, "wild"])
    if argv[0] != "unshare":
        argv[-1] = "loopback"
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=30, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    expected = ["127.0.0.1 None", "[::1] None"] if argv[-1] == "wild" else ["[::1] None"]
    assert proc.stdout.splitlines() == expected


def test_a_listener_stops_accepting_when_closed_and_closes_once():
    listener = listen(f"x:{free_port()}", LOOPBACK)
    port = listener.port
    listener.close()
    listener.close()
    assert not listener._thread.is_alive()
    assert dial(f"127.0.0.1:{port}", 1.0, set(), remote=False).kind == REFUSED


# --- dial_peers and the bounded threads -----------------------------------------------------

@contextmanager
def listeners(count: int) -> Iterator[List[str]]:
    """Yields the addresses of ``count`` loopback listeners."""
    opened = [listen(f"127.0.0.1:{free_port()}", LOOPBACK) for _ in range(count)]
    try:
        yield [f"127.0.0.1:{x.port}" for x in opened]
    finally:
        for x in opened:
            x.close()


def test_a_one_node_job_dials_its_ring_and_reports_the_rank_that_does_not_listen():
    with listeners(3) as addresses:
        nodes = [[0, 1, 2]]
        assert dial_peers(0, addresses, nodes, 2.0, set(), "n1") == ([], 1)
        addresses[2] = f"127.0.0.1:{free_port()}"
        failures, made = dial_peers(1, addresses, nodes, 2.0, set(), "n1")
    assert made == 1
    assert [(f.from_rank, f.from_host, f.to_rank, f.kind) for f in failures] == [
        (1, "n1", 2, REFUSED)]


def test_a_one_rank_job_dials_its_own_address():
    with listeners(1) as addresses:
        assert dial_peers(0, addresses, [[0]], 2.0, set()) == ([], 1)
    assert dial_peers(0, addresses, [[0]], 2.0, set())[0][0].kind == REFUSED


def test_peers_on_other_nodes_resolving_to_this_host_fail_unless_emulated_here():
    with listeners(4) as addresses:
        nodes = [[0, 1], [2, 3]]
        failures, made = dial_peers(0, addresses, nodes, 2.0, set())
        assert (made, [(f.to_rank, f.kind) for f in failures]) == (1, [(2, THIS_HOST)])
        assert dial_peers(0, addresses, nodes, 2.0, set(), check_this_host=False) == ([], 1)


def test_63_peers_that_all_time_out_take_about_one_timeout():
    nodes = [[rank] for rank in range(64)]  # every pair of 64 nodes: 63 peers each
    with full_listener() as port:
        start = time.monotonic()
        failures, made = dial_peers(0, [f"127.0.0.1:{port}"] * 64, nodes, 0.5, set(),
                                    check_this_host=False)
        took = time.monotonic() - start
    assert made == 63 and {f.kind for f in failures} == {TIMED_OUT} and len(failures) == 63
    assert took < 1.8  # one round of dials at once (16 at a time would take 2 s)


def test_a_dial_that_hangs_is_reported_timed_out_after_the_wait(monkeypatch):
    release = threading.Event()

    def hangs(address, *args, **kwargs):
        release.wait(10)
    monkeypatch.setattr(_connect_probe, "dial", hangs)
    start = time.monotonic()
    try:
        failures, made = dial_peers(0, ["n1:1", "n2:2"], [[0], [1]], 0.2, set(), "n1")
    finally:
        release.set()
    assert time.monotonic() - start < 2.0
    assert [(f.to_rank, f.kind, f.detail) for f in failures] == [
        (1, TIMED_OUT, "no answer in 1.2 s (the name's resolution hung)")]
    assert "check the firewall for port 2 and the interface n2 resolves to" in failures[0].fix


def test_a_malformed_peer_address_is_an_error_before_any_dial():
    with pytest.raises(ResolutionError, match="address 'n2': expected host:port"):
        dial_peers(0, ["n1:1", "n2"], [[0], [1]], 0.2, set())


@pytest.mark.parametrize("threads, count", [(1, 5), (3, 5), (5, 5)])
def test_run_bounded_keeps_the_order_with_fewer_threads_than_calls(threads, count):
    assert run_bounded(lambda x: x * 10, list(range(count)), threads, 5.0) == [
        (True, x * 10) for x in range(count)]


def test_run_bounded_reports_calls_not_finished_and_raises_a_call_s_error():
    gate = threading.Event()
    try:
        assert run_bounded(lambda x: gate.wait(10) if x else x, [0, 1], 2, 0.2) == [
            (True, 0), (False, None)]
    finally:
        gate.set()
    with pytest.raises(ZeroDivisionError):
        run_bounded(lambda x: 1 // x, [1, 0], 2, 5.0)


# --- the report ----------------------------------------------------------------------------

A = Failure(3, "n1", 7, "n2:8888", REFUSED, "10.0.0.2: connection refused", "nothing listens")


def test_a_failure_is_a_compact_json_array():
    assert A.to_json() == ('[3,"n1",7,"n2:8888","refused","10.0.0.2: connection refused",'
                           '"nothing listens"]')


@pytest.mark.parametrize("failure", [
    A, Failure(0, "h", 1, "[::1]:1", THIS_HOST, 'quote " and \u00e9', ""),
])
def test_a_failure_goes_through_json(failure):
    assert Failure.from_json(failure.to_json()) == failure


@pytest.mark.parametrize("text", ["", "[1, 2]", '{"a": 1}', '["x", "h", 1, "a", "k", "d", "f"]'])
def test_a_failure_from_json_that_is_not_one(text):
    with pytest.raises(ResolutionError, match="not a connection failure"):
        Failure.from_json(text)


def test_the_failure_table_reports_each_host_address_and_kind_once():
    failures = [
        Failure(5, "n1", 7, "n2:8888", REFUSED, "10.0.0.2: connection refused", "nothing listens"),
        A,
        Failure(4, "n1", 7, "n2:8888", TIMED_OUT, "10.0.0.2: no answer", "a firewall"),
        Failure(9, "n3", 7, "n2:8888", REFUSED, "10.0.0.2: connection refused", "nothing listens"),
    ]
    assert failure_table(failures).splitlines() == [
        "from rank/host  to rank/host:port  error                                  likely fix",
        "3 n1, +1 more   7 n2:8888          refused: 10.0.0.2: connection refused  nothing "
        "listens",
        "4 n1            7 n2:8888          timed out: 10.0.0.2: no answer         a firewall",
        "9 n3            7 n2:8888          refused: 10.0.0.2: connection refused  nothing "
        "listens",
    ]
    assert failure_table(failures, limit=1).splitlines()[-1] == "... and 2 more rows"


# --- this host's addresses -----------------------------------------------------------------

FIB_TRIE = """Main:
  +-- 0.0.0.0/0 3 0 5
     |-- 0.0.0.0
        /0 universe UNICAST
     +-- 127.0.0.0/8 2 0 2
        +-- 127.0.0.0/31 1 0 0
           |-- 127.0.0.0
              /8 host LOCAL
           |-- 127.0.0.1
              /32 host LOCAL
        |-- 127.255.255.255
           /32 link BROADCAST
     +-- 10.1.0.0/16 2 0 2
           |-- 10.1.2.3
              /16 link UNICAST
              /32 host LOCAL
           |-- 10.1.2.4
              /32 host LOCAL
"""

IF_INET6 = """00000000000000000000000000000001 01 80 10 80       lo
fd000000000000000000000000000002 04 40 00 82     eth0

"""


def test_the_kernel_s_local_addresses_are_parsed():
    assert parse_fib_trie(FIB_TRIE) == {"127.0.0.1", "10.1.2.3", "10.1.2.4"}
    assert parse_if_inet6(IF_INET6) == {"::1", "fd00::2"}


@pytest.mark.parametrize("address, own", [
    ("127.0.0.1", True), ("127.0.1.1", True), ("::1", True), ("::ffff:127.0.1.1", True),
    ("10.1.2.3", True), ("::ffff:10.1.2.3", True), ("fd00::2", True), ("fd00:0::2%eth0", True),
    ("10.1.2.5", False), ("fd00::3", False), ("::ffff:10.1.2.5", False),
])
def test_is_own(address, own):
    assert is_own(address, {"10.1.2.3", "fd00::2"}) is own


def test_this_host_s_addresses_are_the_kernel_s_and_its_name_s(tmp_path):
    own = this_host_addresses()
    assert {"127.0.0.1", "::1"} <= own
    if shutil.which("ip"):  # what `ip -o addr` lists (read, never dialled)
        listed = subprocess.run(["ip", "-o", "addr"], capture_output=True, text=True).stdout
        assert {line.split()[3].split("/")[0] for line in listed.splitlines()} <= own
    (tmp_path / "fib_trie").write_text(FIB_TRIE)
    (tmp_path / "if_inet6").write_text(IF_INET6)
    assert {"10.1.2.3", "fd00::2", "127.0.0.1", "::1"} <= this_host_addresses(str(tmp_path))
    assert {"127.0.0.1", "::1"} <= this_host_addresses(str(tmp_path / "none"))
