"""A shared file system for the benchmarks (test harness): a directory served over SFTP from
a network namespace of its own and mounted with sshfs through that namespace's loopback,
held to a rate (tc tbf), as a cluster's nodes reach a file server over its one link (root;
sshfs, sftp-server and socat: scripts/setup.sh).

Reads and writes cross the link: sshfs keeps no page cache across opens, so a file written
and read again is read over the link, as NFS's close-to-open reads it. Mounted before a
SlurmCluster starts, every emulated node sees it (each slurmd's mount namespace is a copy).
"""
from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from typing import Callable, Optional

from tests.harness import host_network
from tests.harness.processes import ClusterError, alive, kill_all, sh

#: The port sftp-server is served on, inside the share's own namespace (nothing else is there).
PORT = 2049
SFTP_SERVER = "/usr/lib/openssh/sftp-server"


class NetworkShare:
    """A directory (``path``) whose reads and writes go through a link of ``rate_mbit``
    Mbit/s; ``export``, the directory behind it. Start and stop it with ``with``."""

    def __init__(self, rate_mbit: int = 1000, base: Optional[str] = None,
                 timeout: float = 15.0) -> None:
        if rate_mbit < 1:
            raise ValueError(f"rate_mbit must be at least 1 Mbit/s, not {rate_mbit}")
        self.rate_mbit, self.timeout = rate_mbit, timeout
        self.root = os.path.realpath(tempfile.mkdtemp(prefix="mpir-share-", dir=base))
        os.chmod(self.root, 0o755)
        self.export, self.path = (os.path.join(self.root, d) for d in ("export", "mnt"))
        self.netns = f"mpir-share-{os.getpid()}-{os.path.basename(self.root)[-8:]}"
        self._pids: list[int] = []

    def __enter__(self) -> "NetworkShare":
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _in_ns(self, *args: str) -> list[str]:
        return ["nsenter", f"--net=/run/netns/{self.netns}", *args]

    def start(self) -> None:
        """Makes the namespace and its link, serves ``export`` and mounts it on ``path``.

        Raises:
          ClusterError: a tool is missing, or the mount did not come up within the timeout.
        """
        timeout = self.timeout
        missing = [t for t in ("sshfs", "socat", "tc", "fusermount3") if not shutil.which(t)]
        if missing or not os.access(SFTP_SERVER, os.X_OK):
            raise ClusterError(f"a shared file system needs {missing or [SFTP_SERVER]}: run "
                               f"scripts/setup.sh")
        os.makedirs(self.export)
        os.makedirs(self.path)
        sh(["ip", "netns", "add", self.netns])
        sh(["ip", "-n", self.netns, "link", "set", "lo", "up"])
        sh(["ip", "netns", "exec", self.netns, "tc", "qdisc", "add", "dev", "lo", "root", "tbf",
            "rate", f"{self.rate_mbit}mbit", "burst", "256kb", "latency", "50ms"])
        self._spawn(self._in_ns("socat", f"TCP-LISTEN:{PORT},bind=127.0.0.1,reuseaddr,fork",
                                f"EXEC:{SFTP_SERVER} -d {self.export}"))
        self._wait(lambda: f":{PORT} " in sh(self._in_ns("ss", "-Hltn")), timeout, "sftp")
        self._spawn(self._in_ns("sshfs", "-f", "-o", f"directport={PORT},allow_other",
                                f"127.0.0.1:{self.export}", self.path))
        self._wait(lambda: self._answers(timeout), timeout, "the sshfs mount")

    def _mounted(self) -> bool:
        """True while ``path`` is a mount point (read from /proc: a stat of a mount whose
        server does not answer would wait for it)."""
        with open("/proc/self/mounts") as f:
            points = [line.split()[1] for line in f]
        return self.path.replace(" ", "\\040") in points

    def _answers(self, within: float) -> bool:
        """True once ``path`` is mounted and a stat of it is answered within ``within`` s."""
        if not self._mounted():
            return False
        try:
            subprocess.run(["stat", self.path], capture_output=True, check=True,
                           timeout=within, stdin=subprocess.DEVNULL)
        except (subprocess.TimeoutExpired, subprocess.CalledProcessError):
            return False
        return True

    def _spawn(self, args: list[str]) -> None:
        p = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL, start_new_session=True)
        self._pids.append(p.pid)

    def _wait(self, ready: Callable[[], bool], timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while not ready():
            gone = [p for p in self._pids if not alive(p)]
            if gone or time.monotonic() > deadline:
                raise ClusterError(f"the shared file system's {what} did not come up within "
                                   f"{timeout:g} s ({'exited' if gone else 'no answer'})")
            time.sleep(0.05)

    def stop(self) -> None:
        """Unmounts, ends the processes it started (by PID) and those of its namespace,
        deletes the namespace and its directories."""
        if os.path.isdir(self.root) and self._mounted():
            sh(["fusermount3", "-u", "-z", self.path], check=False)
        pids = self._pids + host_network.namespace_pids([self.netns])
        kill_all(pids)
        host_network.remove([self.netns], [], None)
        shutil.rmtree(self.root, ignore_errors=True)
