"""start.py's wait for the coordinator (wait_for_coordinator, coordinator_answers): a task
other than 0 connects to JAX's coordinator only once its gRPC server speaks, so that JAX's one
connection is not refused and left to gRPC's 1 s reconnect backoff. Sockets on 127.0.0.1 only.
No JAX needed: where it is not installed (the suite's .venv), start.py is imported with a
stand-in ``jax`` module (the probe uses nothing of JAX), and forgotten again afterwards."""

from __future__ import annotations

import importlib
import socket
import sys
import threading
import time
import types

import pytest

pytestmark = pytest.mark.unit


def _load_start() -> types.ModuleType:
    """Returns mpi_resolver.jax.start, imported with a stand-in jax where JAX is missing."""
    try:
        import jax  # noqa: F401
    except ImportError:
        saved = {k: sys.modules.get(k) for k in ("jax", "mpi_resolver.jax.start")}
        sys.modules["jax"] = types.ModuleType("jax")
        try:
            return importlib.import_module("mpi_resolver.jax.start")
        finally:
            for k, v in saved.items():
                if v is None:
                    sys.modules.pop(k, None)
                else:
                    sys.modules[k] = v
    return importlib.import_module("mpi_resolver.jax.start")


START = _load_start()
coordinator_answers, wait_for_coordinator = START.coordinator_answers, START.wait_for_coordinator

#: An HTTP/2 SETTINGS frame's header as a gRPC server sends it first (length 24, type 4).
SETTINGS = b"\x00\x00\x18\x04\x00\x00\x00\x00\x00"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """A listener on 127.0.0.1 that sends ``first`` on every connection it accepts (or accepts
    none: ``first=None``, like the exchange's socket that only holds the port)."""

    def __init__(self, port: int, first: bytes | None) -> None:
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", port))
        self.sock.listen(8)
        self.first = first
        if first is not None:
            threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with conn:
                conn.sendall(self.first)
                time.sleep(0.05)

    def close(self) -> None:
        self.sock.close()


def test_a_grpc_server_answers() -> None:
    port = free_port()
    server = Server(port, SETTINGS)
    try:
        assert coordinator_answers("127.0.0.1", port, 1.0)
    finally:
        server.close()


@pytest.mark.parametrize("first", [None, b"HTTP/1.1 400\r\n", b""],
                         ids=["holds the port only", "another protocol", "closes at once"])
def test_what_is_not_a_grpc_server_does_not(first) -> None:
    port = free_port()
    server = Server(port, first)
    try:
        assert not coordinator_answers("127.0.0.1", port, 0.2)
    finally:
        server.close()


def test_a_refused_connection_does_not() -> None:
    assert not coordinator_answers("127.0.0.1", free_port(), 0.2)


def test_the_wait_ends_soon_after_the_coordinator_starts() -> None:
    port, servers = free_port(), []
    timer = threading.Timer(0.3, lambda: servers.append(Server(port, SETTINGS)))
    timer.start()
    start = time.monotonic()
    try:
        wait_for_coordinator(f"127.0.0.1:{port}", start + 20)
        took = time.monotonic() - start
    finally:
        timer.join()
        for s in servers:
            s.close()
    assert 0.25 < took < 0.3 + 0.5, took  # not gRPC's 1 s backoff, nor the deadline


def test_the_wait_ends_at_the_deadline_where_no_one_comes() -> None:
    start = time.monotonic()
    wait_for_coordinator(f"127.0.0.1:{free_port()}", start + 0.4)
    assert 0.35 < time.monotonic() - start < 1.2


def test_a_bracketed_v6_address_is_read(monkeypatch) -> None:
    seen = []
    monkeypatch.setattr(START, "coordinator_answers",
                        lambda host, port, wait: seen.append((host, port)) or True)
    wait_for_coordinator("[::1]:8888", time.monotonic() + 5)
    assert seen == [("::1", 8888)]


def test_an_address_without_a_port_number_returns_at_once() -> None:
    start = time.monotonic()
    wait_for_coordinator("node1:http", start + 10)
    assert time.monotonic() - start < 0.1
