"""This host's ports, tried by listening on them: the edge behind _ports.Ports."""

from __future__ import annotations

import errno
import os
import socket
from typing import Optional

from mpi_resolver.core.errors import ResolutionError
from mpi_resolver.network.ports import Release


class SocketPorts:
    """Ports of this host, tried by listening on them (IPv4, all addresses, SO_REUSEADDR as
    TensorFlow's gRPC server binds): a port another process listens on, on any address or
    through IPv6's dual stack, is in use; one in TIME_WAIT is not. ``address`` narrows the
    listening address (tests: loopback)."""

    def __init__(self, address: str = "") -> None:
        self.address = address

    def hold(self, port: int) -> Optional[Release]:
        """See Ports.hold."""
        sock = None
        try:
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((self.address, port))
            sock.listen(1)
        except OSError as e:
            if sock is not None:
                sock.close()
            if e.errno == errno.EADDRINUSE:
                return None
            why = " (ports below 1024 need root)" if port < 1024 else ""
            raise ResolutionError(
                f"cannot listen on port {port}{why}: {e.strerror or e}; TensorFlow's server "
                "could not either. Pass another port_base (--port-base).") from e
        return sock.close

    def ours(self, port: int) -> bool:
        """See Ports.ours: a listening socket of /proc/net/tcp{,6} on ``port`` whose inode is
        one of this process's descriptors (False where /proc cannot say)."""
        inodes = set()
        for table in ("/proc/net/tcp", "/proc/net/tcp6"):
            try:
                with open(table) as f:
                    rows = f.read().splitlines()[1:]
            except OSError:
                continue
            for row in rows:
                fields = row.split()
                if len(fields) > 9 and fields[3] == "0A" and \
                        int(fields[1].rsplit(":", 1)[1], 16) == port:
                    inodes.add(fields[9])
        if not inodes:
            return False
        try:
            names = os.listdir("/proc/self/fd")
        except OSError:
            return False
        for name in names:
            try:
                link = os.readlink(f"/proc/self/fd/{name}")
            except OSError:
                continue
            if link.startswith("socket:[") and link[8:-1] in inodes:
                return True
        return False
