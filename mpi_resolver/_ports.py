"""Ports of the ClusterSpec: TensorFlow's fixed ``port_base``, or ``'auto'`` ports that two
jobs sharing a node do not share.

Pure: the 'auto' range, the base derived from a job's identity, the candidates a rank tries,
the messages. Edge: ``SocketPorts``, which tries to listen on a port of this host.

``port_base='auto'`` takes ports from ``AUTO_FIRST..AUTO_LAST`` (20000-32767), below Linux's
default ephemeral range (32768-60999), so the kernel never hands one of them to an outgoing
connection. Ranks on a node count up from a base derived from the job (SLURM_JOB_ID and
SLURM_STEP_ID; mpirun's job id elsewhere); with MPI, a rank whose port is taken tries others
and every rank learns every rank's port in the exchange.
"""

from __future__ import annotations

import errno
import hashlib
import os
import random
import socket
from typing import Callable, Iterator, Mapping, Optional, Protocol, Tuple, Union

from ._errors import ResolutionError

__all__ = ["AUTO", "AUTO_FIRST", "AUTO_LAST", "TRIES", "ROOM", "PortBase", "Release", "Ports",
           "SocketPorts", "job_key", "step_key", "auto_base", "wrap", "candidates", "claim",
           "in_use", "KEY_VARIABLES"]

AUTO = "auto"
AUTO_FIRST, AUTO_LAST = 20000, 32767
_SPAN = AUTO_LAST - AUTO_FIRST + 1
#: Ports a rank tries (its own, then others at random in the range) before it gives up.
TRIES = 64
#: Variables that name an mpirun job (Open MPI, PMIx); MPICH's and Intel MPI's Hydra set none.
KEY_VARIABLES = ("PMIX_NAMESPACE", "OMPI_MCA_ess_base_jobid")
#: Tasks on a node that an 'auto' base leaves room for where the job does not say (mpirun).
ROOM = 64

PortBase = Union[int, str]   # a port, or 'auto'
Release = Callable[[], None]


class Ports(Protocol):
    """This host's ports, as the resolver needs them; SocketPorts is the real one."""

    def hold(self, port: int) -> Optional[Release]:
        """Starts listening on ``port``; returns what stops it, or None where the port is in use.

        Raises:
          ResolutionError: this process may not listen on ``port`` (not "in use").
        """

    def ours(self, port: int) -> bool:
        """Returns True when this very process listens on ``port`` (a TensorFlow server an
        earlier resolver's job started here): in use, but not by another job."""


def step_key(env: Mapping[str, str]) -> Optional[str]:
    """Returns 'JOB.STEP' from SLURM_JOB_ID and SLURM_STEP_ID ('JOB.batch' in the batch step),
    or None outside a Slurm job."""
    job = env.get("SLURM_JOB_ID", "").strip()
    if not job:
        return None
    return f"{job}.{env.get('SLURM_STEP_ID', '').strip() or 'batch'}"


def job_key(env: Mapping[str, str], mpirun: bool = False) -> str:
    """Returns what names this job: step_key, else mpirun's job id (KEY_VARIABLES), else ''.
    ``mpirun``: the ranks of an mpirun, whose Slurm variables (inside an allocation) are its
    daemons' and differ between nodes: its job id first."""
    mpi = next((f"{name}={env[name]}" for name in KEY_VARIABLES if env.get(name)), "")
    if mpirun and mpi:
        return mpi
    key = step_key(env)
    return key if key is not None else mpi


def auto_base(key: str, tasks_on_node: int) -> int:
    """Returns the first 'auto' port of the job named ``key``: AUTO_FIRST + a hash of ``key``,
    leaving room for ``tasks_on_node`` ports up to AUTO_LAST.

    Raises:
      ResolutionError: more tasks on a node than the range has ports.
    """
    if tasks_on_node > _SPAN:
        raise ResolutionError(
            f"port_base='auto' has {_SPAN} ports ({AUTO_FIRST}-{AUTO_LAST}) but a node runs "
            f"{tasks_on_node} tasks; pass a number as port_base (--port-base).")
    digest = hashlib.blake2b(key.encode("utf-8", "surrogateescape"), digest_size=8).digest()
    return AUTO_FIRST + int.from_bytes(digest, "little") % (_SPAN - max(tasks_on_node, 1) + 1)


def wrap(port: int) -> int:
    """Returns ``port`` folded into AUTO_FIRST..AUTO_LAST."""
    return AUTO_FIRST + (port - AUTO_FIRST) % _SPAN


def candidates(first: int, seed: str, tries: int = TRIES) -> Iterator[int]:
    """Yields ``first``, then ``tries - 1`` other ports of the range, drawn from ``seed``."""
    yield first
    rng = random.Random(seed)
    for _ in range(tries - 1):
        yield rng.randint(AUTO_FIRST, AUTO_LAST)


def claim(ports: Ports, first: int, seed: str, host: str,
          tries: int = TRIES) -> Tuple[int, Release]:
    """Returns (a port of the 'auto' range this rank now listens on, what releases it): the
    first of ``candidates`` that is free, or that this process's own server listens on (a
    resolver before this one took it: the candidates are the same each time).

    Raises:
      ResolutionError: none of ``tries`` ports was free.
    """
    for port in candidates(first, seed, tries):
        release = ports.hold(port)
        if release is not None:
            return port, release
        if ports.ours(port):
            return port, lambda: None
    raise ResolutionError(
        f"port_base='auto': none of {tries} ports tried in {AUTO_FIRST}-{AUTO_LAST} is free "
        f"on {host} (first {first}); free ports there, or pass a number as port_base "
        "(--port-base).")


def in_use(port: int, host: str, how: str, fix: str) -> str:
    """Returns the message for ``port`` found in use on ``host``; ``how`` says where the port
    came from, ``fix`` what to do."""
    return (f"port {port} on {host} ({how}) is in use: another job on this node, or a "
            "process left over, listens there, and TensorFlow's server would stop with "
            f"'Could not start gRPC server'. {fix}")


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
