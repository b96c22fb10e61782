"""What a command's processes were doing when it ran out of time (test harness).

A step that does not finish in time is either stuck (its tasks sleep: state S, little CPU
used) or starved (its tasks want to run, state R, but got little of the CPU on a loaded
machine) or spinning (it used the CPU all along) or held (stopped, state T; a signal sent to
it pending, or blocked). The report says which, per process, with the machine's load, so
that a timed-out test names its cause."""
from __future__ import annotations

import contextlib
import os
import signal
import threading
from dataclasses import dataclass
from typing import Iterable, Iterator, List, Optional, Set

from tests.harness.processes import stat_fields

#: At most this many processes are described (the rest are counted).
MOST = 16


@dataclass(frozen=True)
class ProcessTimes:
    pid: int
    state: str  # R running, S sleeping, D in the kernel, T stopped, Z zombie
    cpu_s: float  # user + system CPU seconds used
    alive_s: float  # seconds since it started
    wchan: str  # the kernel function it sleeps in ('0' when running)
    command: str
    signals: str = ""  # signal_sets: those pending and blocked ('' where none)


def parse_stat(stat: str, ticks: int) -> tuple[str, float, float]:
    """Returns (state, CPU seconds, start in seconds after boot) from a /proc/PID/stat line.

    Raises:
      ValueError: the line is not a stat line (processes.stat_fields).
    """
    fields = stat_fields(stat)
    return fields[0], (int(fields[11]) + int(fields[12])) / ticks, int(fields[19]) / ticks


def _names(mask: int) -> List[str]:
    """Returns the names of the signals set in a /proc/PID/status mask (bit N-1: signal N)."""
    out = []
    for number in range(1, 65):
        if mask >> (number - 1) & 1:
            try:
                out.append(signal.Signals(number).name.removeprefix("SIG"))
            except ValueError:
                out.append(str(number))
    return out


def signal_sets(status: str) -> str:
    """Returns the signals a /proc/PID/status text shows pending (to the thread or the
    process) and blocked (by the main thread), as 'pending TERM; blocked TERM'; '' where
    neither has one."""
    masks = {}
    for line in status.splitlines():
        key, _, value = line.partition(":")
        if key in ("SigPnd", "ShdPnd", "SigBlk"):
            masks[key] = int(value.strip(), 16)
    pending = _names(masks.get("SigPnd", 0) | masks.get("ShdPnd", 0))
    blocked = _names(masks.get("SigBlk", 0))
    return "; ".join(f"{what} {','.join(names)}" for what, names in
                     (("pending", pending), ("blocked", blocked)) if names)


def descendants(pid: int) -> Set[int]:
    """Returns the PIDs of ``pid``'s children, theirs, and so on (those still there)."""
    found: Set[int] = set()
    todo = [pid]
    while todo:
        parent = todo.pop()
        try:
            tids = os.listdir(f"/proc/{parent}/task")
        except OSError:
            continue
        for tid in tids:
            try:
                with open(f"/proc/{parent}/task/{tid}/children") as f:
                    kids = {int(k) for k in f.read().split()} - found
            except OSError:
                continue
            found |= kids
            todo.extend(kids)
    return found


def process_times(pid: int, uptime_s: float) -> Optional[ProcessTimes]:
    """Returns what /proc says of ``pid`` (its command line on one line), None where it has
    gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            state, cpu, start = parse_stat(f.read(), os.sysconf("SC_CLK_TCK"))
        with open(f"/proc/{pid}/wchan") as f:
            wchan = f.read().strip() or "0"
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            command = " ".join(f.read().replace(b"\0", b" ").decode(errors="replace").split())
        with open(f"/proc/{pid}/status") as f:
            signals = signal_sets(f.read())
    except (OSError, ValueError):
        return None
    return ProcessTimes(pid, state, cpu, uptime_s - start, wchan, command, signals)


def describe(p: ProcessTimes) -> str:
    """Returns one line: pid, state, CPU used of the time alive, where it sleeps, the signals
    pending and blocked (where any), command."""
    where = "" if p.wchan == "0" else f" in {p.wchan}"
    held = f" ({p.signals})" if p.signals else ""
    return (f"pid {p.pid} {p.state}{where}: {p.cpu_s:.1f} s of CPU in {p.alive_s:.0f} s "
            f"alive{held}: {p.command[:160]}")


def report(pids: Iterable[int], loadavg: str = "/proc/loadavg",
           uptime: str = "/proc/uptime") -> str:
    """Returns the machine's load and one line per process of ``pids`` still there (at most
    MOST), to append to a timed-out command's output."""
    with open(loadavg) as f:
        load = " ".join(f.read().split()[:3])
    with open(uptime) as f:
        now = float(f.read().split()[0])
    found: List[ProcessTimes] = [t for t in (process_times(p, now) for p in sorted(set(pids)))
                                 if t is not None]
    lines = [f"--- harness, at the timeout: load average {load} on {os.cpu_count()} CPUs; "
             f"{len(found)} of the command's processes left"]
    lines += ["  " + describe(t) for t in found[:MOST]]
    if len(found) > MOST:
        lines.append(f"  ... and {len(found) - MOST} more")
    return "\n".join(lines) + "\n"


@contextlib.contextmanager
def looked_at(pid: int, after: float) -> Iterator[List[str]]:
    """Yields a list that gets, ``after`` seconds into the block where it has not ended by
    then, the report on ``pid`` and its descendants: what a test's processes were doing just
    before its own deadline, for its failure's message."""
    seen: List[str] = []
    timer = threading.Timer(after, lambda: seen.append(report({pid} | descendants(pid))))
    timer.daemon = True
    timer.start()
    try:
        yield seen
    finally:
        timer.cancel()
