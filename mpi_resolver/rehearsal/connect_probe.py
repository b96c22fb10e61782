"""Listening and dialling for ``check --connect`` (the edge: sockets, name resolution, threads).

A rank listens as TensorFlow's gRPC server will: on every address of its node on the port of
its ClusterSpec address (``::`` dual-stack, else ``0.0.0.0``; SO_REUSEADDR), accepting and
closing in a daemon thread. It dials its peers (_connect_pairs.peers_of) by the exact names of
the ClusterSpec, resolved as gRPC resolves them (getaddrinfo, SOCK_STREAM, addresses in the
order the system gives), and reports each dial that fails as a Failure of one of ``KINDS``.
"""

from __future__ import annotations

import errno
import json
import os
import selectors
import socket
import threading
import time
from dataclasses import astuple, dataclass
from typing import AbstractSet, Callable, Dict, List, Optional, Sequence, Tuple, TypeVar

from mpi_resolver.rehearsal.connect_pairs import peers_of
from mpi_resolver.network.host_addresses import is_own
from mpi_resolver.core.errors import ResolutionError
from mpi_resolver.core.tables import text_table

NO_NAME = "name does not resolve"
THIS_HOST = "resolves to an address of this host"
REFUSED = "refused"
TIMED_OUT = "timed out"
UNREACHABLE = "unreachable"
OTHER = "connection failed"
KINDS = (NO_NAME, THIS_HOST, REFUSED, TIMED_OUT, UNREACHABLE, OTHER)

#: Where a listener binds by default: every address, IPv6 dual-stack first (as gRPC).
ALL_ADDRESSES = ("::", "0.0.0.0")
#: At most this many dials of one rank at once; a rank's dials beyond it wait for a thread.
MAX_DIALS_AT_ONCE = 64
BACKLOG = max(socket.SOMAXCONN, 1024)

Resolve = Callable[..., Sequence[Tuple]]
A = TypeVar("A")
T = TypeVar("T")


@dataclass(frozen=True)
class Failure:
    """One dial that failed: from which rank and host, to which rank and address, the kind
    (one of KINDS), what the system said and the likely fix."""
    from_rank: int
    from_host: str
    to_rank: int
    to_address: str
    kind: str
    detail: str
    fix: str

    def to_json(self) -> str:
        """Returns the failure as a compact JSON array (gathered over MPI)."""
        return json.dumps(astuple(self), separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str) -> Failure:
        """Returns the failure ``to_json`` wrote.

        Raises:
          ResolutionError: ``text`` is not one.
        """
        try:
            fields = json.loads(text)
            return cls(int(fields[0]), str(fields[1]), int(fields[2]), *map(str, fields[3:7]))
        except (ValueError, TypeError, IndexError, KeyError) as e:
            raise ResolutionError(f"not a connection failure: {text[:80]!r} ({e}).") from e


def split_address(address: str) -> Tuple[str, int]:
    """Returns (host, port) of 'host:port' or '[v6]:port'.

    Raises:
      ResolutionError: no port, or not a number from 1 to 65535.
    """
    host, _, port = address.rpartition(":")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ResolutionError(f"address {address!r}: expected host:port, port 1 to 65535.")
    return host, int(port)


class Listener:
    """A listening socket with a daemon thread that accepts and closes until ``close``."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.port: int = sock.getsockname()[1]
        self.accepted = 0
        self.closed = False
        sock.setblocking(False)
        self._wake_r, self._wake_w = socket.socketpair()
        self._thread = threading.Thread(target=self._accept_loop, daemon=True,
                                        name=f"connect-listener-{self.port}")
        self._thread.start()

    def _accept_loop(self) -> None:
        with selectors.DefaultSelector() as sel:
            sel.register(self.sock, selectors.EVENT_READ)
            sel.register(self._wake_r, selectors.EVENT_READ)
            while True:
                ready = {key.fileobj for key, _ in sel.select()}
                if self._wake_r in ready:
                    return
                try:
                    conn, _ = self.sock.accept()
                except OSError:  # gone before we took it (non-blocking), or no descriptor left
                    time.sleep(0.01)
                    continue
                conn.close()
                self.accepted += 1

    def close(self) -> None:
        """Stops the accept loop and closes the socket (once); waits at most a second."""
        if self.closed:
            return
        self.closed = True
        self._wake_w.send(b"x")
        self._thread.join(1.0)
        for s in (self.sock, self._wake_r, self._wake_w):
            s.close()

    def __enter__(self) -> Listener:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def listen(address: str, bind_hosts: Sequence[str] = ALL_ADDRESSES) -> Listener:
    """Returns a Listener on the port of ``address`` ('host:port'), bound to the first of
    ``bind_hosts`` this system supports (default: every address, as TensorFlow's server).

    Raises:
      ResolutionError: the port is in use, or this process may not listen on it.
    """
    host, port = split_address(address)
    for i, bind_host in enumerate(bind_hosts):
        family = socket.AF_INET6 if ":" in bind_host else socket.AF_INET
        sock = None
        try:
            sock = socket.socket(family, socket.SOCK_STREAM)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6:
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
            sock.bind((bind_host, port))
            sock.listen(BACKLOG)
            return Listener(sock)
        except OSError as e:
            if sock is not None:
                sock.close()
            if e.errno in (errno.EAFNOSUPPORT, errno.EADDRNOTAVAIL) and i + 1 < len(bind_hosts):
                continue  # no IPv6 here: the next (gRPC falls back to IPv4 alike)
            raise _listen_error(host, port, e) from e
    raise ResolutionError(f"cannot listen on {host}:{port}: no address to bind.")


def _listen_error(host: str, port: int, e: OSError) -> ResolutionError:
    if e.errno == errno.EADDRINUSE:
        return ResolutionError(
            f"cannot listen on {host}:{port}: port {port} is in use on {host} (another process "
            "holds it: an earlier run, another job's server). Stop that process, or pick "
            "other ports with --port-base (or --port-base auto).")
    why = " (ports below 1024 need root)" if port < 1024 else ""
    return ResolutionError(f"cannot listen on {host}:{port}{why}: {e.strerror or e}; "
                           "TensorFlow's server could not either. Pass another --port-base.")


def classify(error: BaseException) -> Tuple[str, str]:
    """Returns (kind, detail) of an error of getaddrinfo or connect."""
    if isinstance(error, (socket.gaierror, UnicodeError)):
        return NO_NAME, str(getattr(error, "strerror", None) or error)
    if isinstance(error, TimeoutError):
        return TIMED_OUT, "no answer within the timeout"
    if isinstance(error, ConnectionRefusedError):
        return REFUSED, "connection refused"
    code = getattr(error, "errno", None)
    text = os.strerror(code) if isinstance(code, int) else str(error)
    if code in (errno.ENETUNREACH, errno.EHOSTUNREACH):
        return UNREACHABLE, text
    return OTHER, text


def fix_for(kind: str, host: str, port: int, from_host: str, resolved: str = "") -> str:
    """Returns the one-line likely fix of a failure of ``kind`` dialling host:port."""
    fixes = {
        NO_NAME: f"the node name is not in DNS or /etc/hosts on {from_host}; use --address "
                 "fqdn/ip or fix the site's resolver",
        THIS_HOST: f"{host} resolves to {resolved}, an address of this host (often a "
                   "127.0.1.1 line in /etc/hosts); fix /etc/hosts or use --address ip/iface:NAME",
        REFUSED: f"nothing listens on port {port} on {host}: the rank there did not start, or "
                 "listens on another address",
        TIMED_OUT: "a firewall drops the packets, or the name resolves to an address this host "
                   f"cannot reach; check the firewall for port {port} and the interface {host} "
                   "resolves to",
        UNREACHABLE: f"{from_host} has no route to {resolved or host}; use --address with an "
                     "address both nodes reach",
    }
    return fixes.get(kind, f"check the network between {from_host} and {host}:{port}")


def dial(address: str, timeout: float, own_addresses: AbstractSet[str], *, remote: bool = True,
         from_rank: int = 0, to_rank: int = 0, from_host: str = "",
         resolve: Resolve = socket.getaddrinfo) -> Optional[Failure]:
    """Returns None where ``address`` accepts a connection within ``timeout`` seconds, else the
    Failure. The name is resolved as gRPC resolves it and each address tried in turn; a
    ``remote`` peer (another node's) whose name resolves to an address of this host fails."""
    host, port = split_address(address)
    from_host = from_host or socket.gethostname()

    def failure(kind: str, detail: str, resolved: str = "") -> Failure:
        return Failure(from_rank, from_host, to_rank, address, kind, detail,
                       fix_for(kind, host, port, from_host, resolved))

    deadline = time.monotonic() + timeout
    try:
        infos = resolve(host, port, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError) as e:  # UnicodeError: a name no resolver takes ('a..b')
        return failure(*classify(e))
    if not infos:
        return failure(NO_NAME, f"{host} has no address")
    own = [info[4][0] for info in infos if is_own(info[4][0], own_addresses)]
    if remote and own:
        return failure(THIS_HOST, f"{host} -> {', '.join(own)}", own[0])
    errors = []
    for family, kind, proto, _, sockaddr in infos:
        left = deadline - time.monotonic()
        error = TimeoutError() if left <= 0 else _connect(family, kind, proto, sockaddr, left)
        if error is None:
            return None
        errors.append((sockaddr[0], classify(error)))
    first, (what, detail) = errors[0]
    tried = "; ".join(f"{a}: {d}" for a, (_, d) in errors)
    return failure(what, tried, first)


def _connect(family: int, kind: int, proto: int, sockaddr: Tuple,
             timeout: float) -> Optional[OSError]:
    """Returns the error of one connection, or None where it was accepted."""
    try:
        with socket.socket(family, kind, proto) as sock:
            sock.settimeout(timeout)
            sock.connect(sockaddr)
    except OSError as e:
        return e
    return None


def dial_peers(own_rank: int, addresses: Sequence[str], nodes: Sequence[Sequence[int]],
               timeout: float, own_addresses: AbstractSet[str], from_host: str = "",
               check_this_host: bool = True) -> Tuple[List[Failure], int]:
    """Returns (failures, dials made) of rank ``own_rank`` dialling its peers (peers_of), at
    most MAX_DIALS_AT_ONCE at a time: within about ``timeout`` seconds per MAX_DIALS_AT_ONCE
    peers, even where a name's resolution hangs (that dial is reported timed out). Without
    ``check_this_host`` (nodes emulated on one machine) no peer counts as remote.

    Raises:
      ResolutionError: ``own_rank`` is on none of ``nodes``, or an address is malformed.
    """
    peers = peers_of(own_rank, nodes)
    local = set(next(ranks for ranks in nodes if own_rank in ranks))
    from_host = from_host or socket.gethostname()
    targets = {peer: split_address(addresses[peer]) for peer in peers}

    def one(peer: int) -> Optional[Failure]:
        remote = check_this_host and peer not in local
        return dial(addresses[peer], timeout, own_addresses, remote=remote, from_rank=own_rank,
                    to_rank=peer, from_host=from_host)

    threads = min(len(peers), MAX_DIALS_AT_ONCE)
    wait = timeout * -(-len(peers) // threads) + 1
    failures = []
    for peer, (done, result) in zip(peers, run_bounded(one, peers, threads, wait), strict=True):
        if not done:
            result = Failure(own_rank, from_host, peer, addresses[peer], TIMED_OUT,
                             f"no answer in {wait:g} s (the name's resolution hung)",
                             fix_for(TIMED_OUT, *targets[peer], from_host))
        if result is not None:
            failures.append(result)
    return failures, len(peers)


def run_bounded(fn: Callable[[A], T], items: Sequence[A], threads: int,
                wait: float) -> List[Tuple[bool, Optional[T]]]:
    """Returns (finished, fn(item)) of each item, run on ``threads`` daemon threads; calls not
    finished within ``wait`` seconds are left running and reported not finished.

    Raises:
      Exception: the first a call raised.
    """
    results: List[Tuple[bool, Optional[T]]] = [(False, None)] * len(items)
    errors: List[Exception] = []
    queue = list(range(len(items)))[::-1]
    lock = threading.Lock()
    done = threading.Semaphore(0)

    def worker() -> None:
        while True:
            with lock:
                if not queue:
                    return
                index = queue.pop()
            try:
                results[index] = (True, fn(items[index]))
            except Exception as e:
                errors.append(e)
            done.release()

    for _ in range(threads):
        threading.Thread(target=worker, daemon=True, name="connect-dial").start()
    deadline = time.monotonic() + wait
    for _ in items:
        if not done.acquire(timeout=max(0.0, deadline - time.monotonic())):
            break
    if errors:
        raise errors[0]
    return list(results)


def failure_table(failures: Sequence[Failure], limit: Optional[int] = 100) -> str:
    """Returns the failures as a table for rank 0 to print, each (from host, to address,
    kind) once: its first rank, and how many more ranks of that host saw the same."""
    groups: Dict[Tuple[str, str, str], List[Failure]] = {}
    for f in sorted(failures, key=lambda f: (f.from_rank, f.to_rank)):
        groups.setdefault((f.from_host, f.to_address, f.kind), []).append(f)
    rows = []
    for same in groups.values():
        first = same[0]
        more = f", +{len(same) - 1} more" if len(same) > 1 else ""
        rows.append({"from rank/host": f"{first.from_rank} {first.from_host}{more}",
                     "to rank/host:port": f"{first.to_rank} {first.to_address}",
                     "error": f"{first.kind}: {first.detail}", "likely fix": first.fix})
    return text_table(rows, ("from rank/host", "to rank/host:port", "error", "likely fix"),
                      limit)
