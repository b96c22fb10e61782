"""`mpi-resolver check --checkpoint-dir DIR`'s edge: each rank's file work in DIR and the run
over MPI (the verdict and the report are _checkpoint_check's).

Every rank writes its file (and reads it back), the ranks gather what they wrote, the first
rank of each node polls for one file of each other node (network file systems may lag; every
file was written before the gather, so a reader's first look already goes to the server),
the ranks wait until every node has read, each removes its own file, and the ranks gather
what they read. Every step on the file system runs in a daemon thread of its own, waited for
until a deadline: a network mount that hangs never returns, and the check must.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import stat
import time
from dataclasses import replace
from typing import Any, Callable, Dict, List, Optional, Sequence

from mpi_resolver.rehearsal.checkpoint_check import (ABSENT, NOT_DIR, OK, SEEN, STUCK, UNREADABLE,
                                                     WRONG, CheckpointReport, Read, Written, judge,
                                                     kind_of, read_targets)
from mpi_resolver.rehearsal.checkpoint_files import (content_problem, error_detail, file_name,
                                                     file_text, job_step, mount_type)
from mpi_resolver.rehearsal.connect_probe import run_bounded
from mpi_resolver.resolve.environment import snapshot
from mpi_resolver.exchange.collectives import Transport, gather_json
from mpi_resolver.placement.layout import Layout

NOT_DONE = object()  # bounded()'s answer for a call not done by its deadline
_POLL_FIRST, _POLL_MOST = 0.05, 0.5  # seconds between a reader's looks, doubling
_GRACE = 1.0   # seconds a reader gets past the deadline: one look, however late it starts
_REMOVE = 5.0  # seconds at most for removing a file


def bounded(call: Callable[[], Any], deadline: float) -> Any:
    """Returns ``call()``'s result, run in a daemon thread (_connect_probe.run_bounded), or
    NOT_DONE where it has not returned by ``deadline`` (time.monotonic()); raises what it
    raised."""
    wait = max(deadline - time.monotonic(), 0.0)
    finished, value = run_bounded(lambda _: call(), [None], 1, wait)[0]
    return value if finished else NOT_DONE


def _mountinfo() -> str:
    try:
        with open("/proc/self/mountinfo") as f:
            return f.read()
    except OSError:
        return ""


def _create(path: str, text: str) -> None:
    """Creates the file ``path`` (it must not exist) with ``text``, flushed to the disk; where
    that fails once the file exists, removes it (nothing half written stays behind)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    try:
        try:
            os.write(fd, text.encode())
            os.fsync(fd)
        finally:
            os.close(fd)  # a network file system may report a failed write only here
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(path)
        raise


def _read(path: str) -> str:
    with open(path, encoding="utf-8", errors="replace") as f:
        return f.read(4096)


def write_own(path: str, rank: int, host: str, job: str, nonce: str) -> Written:
    """Returns what this rank found writing its file in ``path`` (and reading it back): OK, or
    the kind of problem, with the free space and the file system's type where known."""
    w = Written(rank, host, path, OK, nonce=nonce)
    step = "looking it up"
    try:
        if not stat.S_ISDIR(os.stat(path).st_mode):
            return Written(rank, host, path, NOT_DIR, "it is a file, not a directory")
        vfs = os.statvfs(path)
        w = replace(w, free=vfs.f_bavail * vfs.f_frsize, total=vfs.f_blocks * vfs.f_frsize,
                    fstype=mount_type(_mountinfo(), os.path.realpath(path)))
        name, step = file_name(job, rank, nonce), "creating a file in it"
        _create(os.path.join(path, name), file_text(rank, host, nonce))
        w, step = replace(w, name=name), "reading its file back"
        problem = content_problem(_read(os.path.join(path, name)), rank, host, nonce)
    except OSError as e:
        code = e.errno or 0
        return replace(w, state=kind_of(code),
                       detail=error_detail(step, code, e.strerror or str(e)))
    return w if problem is None else replace(w, state=WRONG, detail=problem)


def _look(path: str, w: Written, reader: int, since: float) -> Read:
    """Returns what ``reader`` finds of ``w``'s file in ``path`` now."""
    waited = round(time.monotonic() - since, 3)
    try:
        text = _read(os.path.join(path, w.name or ""))
    except FileNotFoundError:
        return Read(reader, w.rank, ABSENT, None, waited)
    except OSError as e:
        return Read(reader, w.rank, UNREADABLE, error_detail(
            "reading it", e.errno or 0, e.strerror or str(e)), waited)
    problem = content_problem(text, w.rank, w.host, w.nonce)
    return Read(reader, w.rank, SEEN if problem is None else WRONG, problem, waited)


def poll(path: str, reader: int, targets: Sequence[Written], deadline: float,
         found: Dict[int, Read]) -> None:
    """Looks for each file of ``targets`` until it is seen or ``deadline`` has passed (at
    least once), leaving each one's last outcome in ``found`` (STUCK while a look lasts)."""
    since, pending, delay = time.monotonic(), list(targets), _POLL_FIRST
    while pending:
        for w in list(pending):
            found[w.rank] = Read(reader, w.rank, STUCK, "no answer", 0.0)
            found[w.rank] = _look(path, w, reader, since)
            if found[w.rank].state in (SEEN, UNREADABLE):
                pending.remove(w)
        left = deadline - time.monotonic()
        if not pending or left <= 0:
            return
        time.sleep(min(delay, left))
        delay = min(2 * delay, _POLL_MOST)


def _read_others(path: str, rank: int, written: Sequence[Written], deadline: float
                 ) -> List[Read]:
    """Returns what this rank read of the other nodes' files (nothing unless it reads for its
    node); a look that does not return within the deadline and _GRACE is STUCK."""
    targets = read_targets(rank, written)
    if not targets:
        return []
    found: Dict[int, Read] = {}
    start = time.monotonic()
    bounded(lambda: poll(path, rank, targets, deadline, found),
            max(deadline, start) + _GRACE)
    waited = round(time.monotonic() - start, 3)
    reads = [dict(found).get(w.rank) or Read(rank, w.rank, STUCK, "no answer", 0.0)
             for w in targets]
    return [replace(r, detail=f"no answer within {waited:.1f} s", waited=waited)
            if r.state == STUCK else r for r in reads]


def _remove(own: Written, timeout: float) -> Optional[str]:
    """Removes this rank's file; returns None, or why it could not."""
    if own.name is None:
        return None
    seconds = min(timeout, _REMOVE)
    try:
        done = bounded(lambda: os.unlink(os.path.join(own.path, own.name or "")),
                       time.monotonic() + seconds)
    except FileNotFoundError:  # never written (the write did not answer in time)
        return None
    except OSError as e:
        return f"{own.name}: {e.strerror or e}"
    return f"{own.name}: no answer within {seconds:g} s" if done is NOT_DONE else None


def checkpoint_check(path: str, hosts: Sequence[str], rank: int, job: str, timeout: float,
                     transport: Optional[Transport]) -> CheckpointReport:
    """Returns the report of --checkpoint-dir for this rank (``hosts``: every rank's): with
    MPI (``transport``), the whole job's, through the steps of the module docstring; without,
    this rank's own write. The file work is bounded by ``timeout``.

    Raises:
      ExchangeTimeout: a rank did not come to a gather in time (MPI).
    """
    start = time.monotonic()
    nonce = secrets.token_hex(8)
    own = bounded(lambda: write_own(path, rank, hosts[rank], job, nonce), start + timeout)
    if own is NOT_DONE:
        own = Written(rank, hosts[rank], path, STUCK, f"no answer within {timeout:g} s",
                      file_name(job, rank, nonce), nonce)
    if transport is None:
        return judge([own], [], [_remove(own, timeout)], gathered=False,
                     seconds=time.monotonic() - start)
    written = [Written.from_json(d) for d in gather_json(transport, own.as_json())]
    reads = _read_others(path, rank, written, start + timeout)
    transport.allreduce_min([0])  # every node has read: the files may go
    removal = _remove(own, timeout)
    last = gather_json(transport, {"reads": [r.as_json() for r in reads], "removal": removal})
    return judge(written, [Read.from_json(r) for one in last for r in one["reads"]],
                 [one["removal"] for one in last], gathered=True,
                 seconds=time.monotonic() - start)


def run_checkpoint(path: str, layout: Layout, rank: int, timeout: float) -> CheckpointReport:
    """Returns checkpoint_check's report for this rank, over MPI where the resolution started
    it (every gather within two timeouts and 10 s).

    Raises:
      ExchangeTimeout: a rank did not arrive in time.
    """
    from mpi_resolver.exchange.transport import MpiTransport, mpi_initialized, world

    job = job_step(snapshot())
    if not mpi_initialized():
        return checkpoint_check(path, layout.placement, rank, job, timeout, None)
    transport = MpiTransport(world()[0], 2 * timeout + 10)
    try:
        return checkpoint_check(path, layout.placement, rank, job, timeout, transport)
    finally:
        transport.close()
