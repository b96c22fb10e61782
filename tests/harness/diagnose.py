"""What a command's processes were doing when it ran out of time (test harness).

A step that does not finish in time is either stuck (its tasks sleep: state S, little CPU
used) or starved (its tasks want to run, state R, but got little of the CPU on a loaded
machine) or spinning (it used the CPU all along). The report says which, per process, with
the machine's load, so that a timed-out test names its cause."""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Iterable, List, Optional

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


def parse_stat(stat: str, ticks: int) -> tuple[str, float, float]:
    """Returns (state, CPU seconds, start in seconds after boot) from a /proc/PID/stat line.

    Raises:
      ValueError: the line is not a stat line (processes.stat_fields).
    """
    fields = stat_fields(stat)
    return fields[0], (int(fields[11]) + int(fields[12])) / ticks, int(fields[19]) / ticks


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
    except (OSError, ValueError):
        return None
    return ProcessTimes(pid, state, cpu, uptime_s - start, wchan, command)


def describe(p: ProcessTimes) -> str:
    """Returns one line: pid, state, CPU used of the time alive, where it sleeps, command."""
    where = "" if p.wchan == "0" else f" in {p.wchan}"
    return (f"pid {p.pid} {p.state}{where}: {p.cpu_s:.1f} s of CPU in {p.alive_s:.0f} s "
            f"alive: {p.command[:160]}")


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
