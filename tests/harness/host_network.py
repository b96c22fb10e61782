"""The throw-away cluster's network on this machine (test harness): a private bridge in the
host namespace, one network namespace per node joined to it, the nodes' names in /etc/hosts,
a free port and subnet, and the teardown of each (stdlib only; root)."""
from __future__ import annotations

import contextlib
import fcntl
import os
import socket
import tempfile
from typing import Iterator, Sequence

from tests.harness.processes import ClusterError, sh

HOSTS = "/etc/hosts"
LOCK = "/run/lock/mpir-harness.lock"


@contextlib.contextmanager
def locked() -> Iterator[None]:
    """A machine-wide lock around subnet choice and /etc/hosts edits."""
    path = LOCK if os.path.isdir(os.path.dirname(LOCK)) else \
        os.path.join(tempfile.gettempdir(), "mpir-harness.lock")
    with open(path, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def port_free(port: int) -> bool:
    """True if nothing listens on TCP port in the host namespace."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind(("0.0.0.0", port))
        except OSError:
            return False
    return True


def free_subnet() -> str:
    """A 10.199.X prefix that no address or route of the host namespace uses (call locked)."""
    used = sh(["ip", "-4", "-o", "addr"]) + sh(["ip", "-4", "route"])
    for x in range(1, 255):
        if f"10.199.{x}." not in used:
            return f"10.199.{x}"
    raise ClusterError("no free 10.199.X.0/24 subnet")


def add_bridge(bridge: str, net: str) -> None:
    """Creates ``bridge`` with the address ``net``.1/24 in the host namespace."""
    sh(["ip", "link", "add", bridge, "type", "bridge"])
    sh(["ip", "addr", "add", f"{net}.1/24", "dev", bridge])
    sh(["ip", "link", "set", bridge, "up"])


def add_node(ns: str, veth: str, bridge: str, address: str) -> None:
    """Creates the namespace ``ns`` with eth0 at ``address``/24, its peer ``veth`` on
    ``bridge``, and lo up."""
    sh(["ip", "netns", "add", ns])
    sh(["ip", "link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", ns])
    sh(["ip", "link", "set", veth, "master", bridge, "up"])
    sh(["ip", "-n", ns, "addr", "add", f"{address}/24", "dev", "eth0"])
    sh(["ip", "-n", ns, "link", "set", "eth0", "up"])
    sh(["ip", "-n", ns, "link", "set", "lo", "up"])


def add_hosts_lines(entries: str) -> str:
    """Puts ``entries`` first in /etc/hosts (edited in place: it may be a bind mount; call
    locked); returns what it held before."""
    with open(HOSTS) as f:
        old = f.read()
    with open(HOSTS, "w") as f:
        f.write(entries + old)
    return old


def remove_hosts_lines(marker: str) -> None:
    """Remove exactly the /etc/hosts lines ending in marker (edited in place).

    Whole-marker match: the marker of cluster 1 ('... 123-1') is a prefix of cluster 10's.
    """
    with open(HOSTS) as f:
        lines = f.readlines()
    keep = [line for line in lines if not line.rstrip().endswith(marker)]
    if keep != lines:
        with open(HOSTS, "w") as f:
            f.writelines(keep)


def namespace_pids(netns: Sequence[str]) -> list[int]:
    """Returns the PIDs of every process in those of the namespaces that still exist."""
    pids: list[int] = []
    for ns in netns:
        if os.path.exists(f"/run/netns/{ns}"):
            out = sh(["ip", "netns", "pids", ns], check=False)
            pids += [int(p) for p in out.split() if p.isdigit()]
    return pids


def remove(netns: Sequence[str], links: Sequence[str], marker: str | None) -> None:
    """Deletes the namespaces and links that still exist, and the hosts lines of ``marker``."""
    for ns in netns:
        if os.path.exists(f"/run/netns/{ns}"):
            sh(["ip", "netns", "delete", ns], check=False)
    for link in links:
        if os.path.exists(f"/sys/class/net/{link}"):
            sh(["ip", "link", "delete", link], check=False)
    if marker:
        with locked():
            remove_hosts_lines(marker)
