"""_port_sockets: this host's ports tried for real, by listening on them (on loopback here)."""

from __future__ import annotations

import socket

import pytest

from mpi_resolver.core.errors import ResolutionError
from mpi_resolver.options import make_options
from mpi_resolver.network.port_sockets import SocketPorts
from mpi_resolver.resolve.resolution import resolve_job
from tests.unit.network.test_ports import step_envs

pytestmark = pytest.mark.unit


def _listener() -> socket.socket:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(1)
    return s


def test_socket_ports_see_a_listener_and_hold_a_free_port() -> None:
    ports = SocketPorts("127.0.0.1")
    other = _listener()
    try:
        assert ports.hold(other.getsockname()[1]) is None
    finally:
        other.close()
    probe = _listener()
    free = probe.getsockname()[1]
    probe.close()
    release = ports.hold(free)
    assert release is not None
    assert ports.hold(free) is None  # held: a second rank of the host cannot take it
    release()
    again = ports.hold(free)
    assert again is not None
    again()


@pytest.mark.parametrize("port, why", [
    pytest.param(80, r"cannot listen on port 80 \(ports below 1024 need root\): Permission "
                     "denied", id="a low port"),
    pytest.param(1024, r"cannot listen on port 1024: Permission denied", id="1024: no hint"),
])
def test_socket_ports_name_a_port_this_process_may_not_listen_on(monkeypatch, port,
                                                                   why) -> None:
    def denied(self, address):
        raise PermissionError(13, "Permission denied")
    monkeypatch.setattr(socket.socket, "bind", denied)
    with pytest.raises(ResolutionError, match=why + "; TensorFlow's server could not either"):
        SocketPorts().hold(port)


def test_socket_ports_report_a_socket_they_cannot_open(monkeypatch) -> None:
    def no_files(*args, **kwargs):
        raise OSError(24, "Too many open files")
    monkeypatch.setattr(socket, "socket", no_files)
    with pytest.raises(ResolutionError, match="port 20000: Too many open files"):
        SocketPorts().hold(20000)


def test_socket_ports_tell_this_process_s_own_listener_from_another_s() -> None:
    import subprocess
    import sys
    ports = SocketPorts("127.0.0.1")
    own = _listener()
    child = subprocess.Popen([sys.executable, "-c", LISTEN_CHILD], stdout=subprocess.PIPE,
                             text=True)
    try:
        theirs = int(child.stdout.readline())
        assert ports.ours(own.getsockname()[1]) is True
        assert ports.ours(theirs) is False
        free = _listener()
        port = free.getsockname()[1]
        free.close()
        assert ports.ours(port) is False
        # A resolution in a process whose own server (an earlier resolver's) holds its port
        # goes on; another process's listener on it stops it.
        env = {**step_envs(["node1"])[0], "SLURM_STEP_NUM_TASKS": "1"}
        opts = make_options(source="slurm", gpus_per_node=0, port_base=own.getsockname()[1])
        res = resolve_job(opts, env, ports=ports)
        assert res.cluster() == {"worker": [f"node1:{own.getsockname()[1]}"]}
        opts = make_options(source="slurm", gpus_per_node=0, port_base=theirs)
        with pytest.raises(ResolutionError, match=f"port {theirs} on node1 .* is in use"):
            resolve_job(opts, env, ports=ports)
    finally:
        own.close()
        child.kill()  # the process this test started, by its PID
        child.wait()


LISTEN_CHILD = ("import socket, sys, time\n"
                "s = socket.socket(); s.bind(('127.0.0.1', 0)); s.listen(1)\n"
                "print(s.getsockname()[1], flush=True); time.sleep(60)\n")
