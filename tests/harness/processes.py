"""Processes of the throw-away cluster (test harness): the setup commands it runs, the
daemons it stops, and a client command's output read while it runs (stdlib only)."""
from __future__ import annotations

import contextlib
import os
import re
import shlex
import signal
import subprocess
import threading
import time
from typing import Any, Sequence

__all__ = ["ClusterError", "sh", "stat_fields", "starttime", "alive", "kill_all", "GARBLED",
           "PmiGarbled", "Output", "group_members", "stop_group"]


class ClusterError(RuntimeError):
    """The throw-away cluster could not be started, used or stopped."""


def sh(args: Sequence[str], *, timeout: float = 10.0, check: bool = True) -> str:
    """Run a setup command (ip, mungekey); return stdout, raise ClusterError on failure."""
    p = subprocess.run(list(args), capture_output=True, text=True, timeout=timeout,
                       stdin=subprocess.DEVNULL)
    if check and p.returncode != 0:
        raise ClusterError(f"{shlex.join(args)} failed ({p.returncode}): {p.stderr.strip()}")
    return p.stdout


def stat_fields(stat: str) -> list[str]:
    """Returns a /proc/PID/stat line's fields after the command (state first; utime at 11,
    stime 12, starttime 19), the command, in parentheses, may itself hold spaces and ')'.

    Raises:
      ValueError: the line is not a stat line.
    """
    fields = stat.rsplit(")", 1)[1].split() if ")" in stat else []
    if len(fields) < 20:
        raise ValueError(f"not a /proc/PID/stat line: {stat[:80]!r}")
    return fields


def starttime(pid: int) -> int | None:
    """The process's start time (clock ticks since boot), or None if it is gone or a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = stat_fields(f.read())
    except (OSError, ValueError):
        return None
    return None if fields[0] in ("Z", "X") else int(fields[19])


def alive(pid: int) -> bool:
    """True while pid runs; reaps it if it is our child."""
    with contextlib.suppress(ChildProcessError, OSError):
        os.waitpid(pid, os.WNOHANG)
    return starttime(pid) is not None


def kill_all(pids: Sequence[int], grace: float = 3.0) -> None:
    """SIGTERM the given PIDs, wait up to grace seconds, then SIGKILL what is left."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        live = [p for p in pids if alive(p)]
        for p in live:
            with contextlib.suppress(ProcessLookupError):
                os.kill(p, sig)
        deadline = time.monotonic() + grace
        while live and time.monotonic() < deadline:
            time.sleep(0.02)
            live = [p for p in live if alive(p)]
        if not live:
            return


#: Lines of Slurm's pmi2 plugin (slurmstepd's, relayed on srun's stderr) after which the step
#: can never finish: it could not parse a task's PMI request (Slurm 22.05's PMI-1 server reads
#: one request with a single read() of at most 1,024 bytes, src/plugins/mpi/pmi2/pmi1.c, and
#: parses a longer line as two broken requests), so that task waits for an answer for ever.
GARBLED = re.compile(r"^(?:\d+: )?slurmstepd\S*: error: mpi/pmi2: (?:(?:value|cmd) not properly "
                     r"terminated in client request|request not begin with 'cmd=')")


class PmiGarbled(ClusterError):
    """A step's stderr showed a GARBLED line: it was stopped at once instead of timing out."""

    def __init__(self, argv: list[str], line: str, stdout: str, stderr: str) -> None:
        super().__init__(
            f"{shlex.join(argv)}: Slurm's pmi2 plugin could not parse a PMI request "
            f"({line.strip()!r}); the step was stopped at once, as it can never finish. A PMI-1 "
            "line of more than 1,024 bytes does this (Slurm 22.05's limit); see docs/"
            "launchers.md, \"MPICH and Intel MPI under srun --mpi=pmi2\".")
        self.line, self.stdout, self.stderr = line, stdout, stderr


class Output:
    """Reads a process's stdout and stderr in two threads, watching stderr for GARBLED."""

    def __init__(self, p: subprocess.Popen) -> None:
        self.out: list[str] = []
        self.err: list[str] = []
        self.garbled: str | None = None
        self.stop = threading.Event()
        self._readers = [threading.Thread(target=self._read, args=args, daemon=True)
                         for args in ((p.stdout, self.out), (p.stderr, self.err))]
        for t in self._readers:
            t.start()

    def _read(self, stream: Any, into: list[str]) -> None:
        for line in stream:
            into.append(line)
            if into is self.err and self.garbled is None and GARBLED.search(line):
                self.garbled = line
                self.stop.set()
        stream.close()

    def wait(self, deadline: float) -> bool:
        """Returns True once both pipes closed (the process and its children are done with
        them), False at ``deadline`` (time.monotonic()) or on a GARBLED line."""
        for t in self._readers:
            while t.is_alive() and not self.stop.is_set() and time.monotonic() < deadline:
                t.join(0.05)
        return not self.stop.is_set() and not any(t.is_alive() for t in self._readers)

    def text(self, grace: float = 5.0) -> tuple[str, str]:
        """Returns (stdout, stderr) so far, after up to ``grace`` s for the pipes to close."""
        for t in self._readers:
            t.join(grace)
        return "".join(self.out), "".join(self.err)


def group_members(pgid: int) -> list[int]:
    """Returns the PIDs of the live (not zombie) processes of process group ``pgid``."""
    found = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat") as f:
                fields = stat_fields(f.read())
        except (OSError, ValueError):
            continue
        if fields[0] not in ("Z", "X") and int(fields[2]) == pgid:
            found.append(int(entry.name))
    return found


def stop_group(p: subprocess.Popen, grace: float = 3.0) -> None:
    """SIGTERM to p's process group, SIGKILL after ``grace`` s if p or another process of the
    group is still there; returns once p is reaped and none of its group lives (a child of
    p's killed with it may outlive p's exit by as long as the machine takes to schedule it)."""
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 5.0)):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(p.pid, sig)
        deadline = time.monotonic() + wait
        with contextlib.suppress(subprocess.TimeoutExpired):
            p.wait(timeout=wait)
        while group_members(p.pid) and time.monotonic() < deadline:
            time.sleep(0.02)
        if p.returncode is not None and not group_members(p.pid):
            return
