"""A pytest plugin that measures what each test costs in CPU, its processes' and those they
start (Slurm's daemons and steps, mpirun's ranks, TensorFlow) included, where a wall clock
would count the waits and the other runs beside it: the suite is CPU-bound on 2 cores, so its
time is cut where its CPU is.

    MPI_RESOLVER_CPU_LOG=/tmp/cpu bash scripts/test.sh     # tests/conftest.py loads it
    python -m pytest -p tests.harness.cpu_usage ...          # elsewhere

The pytest process moves into a cgroup of its own (cgroup v1's cpuacct; every process it
starts from then on is counted there), and each test's CPU seconds are its cgroup's usage
after its teardown less before its setup (a session fixture's start counts in the first test
that needs it). The report, most CPU first, goes to $MPI_RESOLVER_CPU_LOG-<pid>.txt (else the
temporary directory's) and its top lines to the terminal. Without a writable cpuacct
hierarchy it says so once, and the run goes on unmeasured."""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path
from typing import Any, Iterator, List, Optional, Tuple

import pytest

#: cgroup v1's CPU accounting hierarchy.
CPUACCT = Path("/sys/fs/cgroup/cpuacct")
#: Lines of the report printed at the end of the run.
SHOWN = 25
#: The plugin's name in pytest's plugin manager.
NAME = "mpi_resolver_cpu_usage"


class Lane:
    """A cpuacct cgroup of this process's own under ``root``: ``enter`` moves this process
    in, ``seconds`` is the CPU its processes used, ``leave`` moves it back and removes the
    cgroup where nothing is left in it."""

    def __init__(self, root: Path = CPUACCT) -> None:
        self.root, self.dir = root, root / f"mpir-cpu-{os.getpid()}"

    def enter(self, cgroups: Path = Path("/proc/self/cgroup")) -> Optional[str]:
        """Returns None once this process is in the cgroup, else why it is not (a pytest that
        a measured test started stays in that test's)."""
        try:
            if "/mpir-cpu-" in cgroups.read_text():
                return "a test of a measured run started this one: its CPU is that test's"
            self.dir.mkdir(exist_ok=True)
            (self.dir / "cgroup.procs").write_text(str(os.getpid()))
        except OSError as e:
            return f"{self.dir} cannot be made or entered ({e.strerror or e})"
        return None

    def seconds(self) -> float:
        """Returns the CPU seconds of the cgroup's processes so far."""
        return int((self.dir / "cpuacct.usage").read_text()) / 1e9

    def leave(self) -> None:
        try:
            (self.root / "cgroup.procs").write_text(str(os.getpid()))
            self.dir.rmdir()
        except OSError:
            pass  # a process still in it (one a test left running): the cgroup stays


def report(rows: List[Tuple[float, float, str]]) -> List[str]:
    """Returns the report's lines for (CPU seconds, wall seconds, test) rows: the total, then
    one line per test, most CPU first."""
    total = sum(cpu for cpu, _, _ in rows)
    lines = [f"{total:9.1f} s CPU in {len(rows)} tests (wall {sum(w for _, w, _ in rows):.0f} s)"]
    lines += [f"{cpu:9.1f} s CPU {wall:8.1f} s wall  {name}"
              for cpu, wall, name in sorted(rows, key=lambda r: -r[0])]
    return lines


class CpuUsage:
    """The plugin: each test's CPU seconds in ``rows`` while ``lane`` measures."""

    def __init__(self, lane: Lane) -> None:
        self.lane, self.rows = lane, []  # type: ignore[var-annotated]
        self.why = lane.enter()

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(self, item: Any, nextitem: Any) -> Iterator[None]:
        if self.why is not None:
            yield
            return
        cpu, wall = self.lane.seconds(), time.monotonic()
        yield
        self.rows.append((self.lane.seconds() - cpu, time.monotonic() - wall, item.nodeid))

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        write = terminalreporter.write_line
        if self.why is not None:
            write(f"cpu usage: not measured: {self.why}")
            return
        lines = report(self.rows)
        base = os.environ.get("MPI_RESOLVER_CPU_LOG") or os.path.join(tempfile.gettempdir(),
                                                                       "mpir-cpu")
        path = f"{base}-{os.getpid()}.txt"
        Path(path).write_text("\n".join(lines) + "\n")
        write(f"cpu usage (the whole list: {path}):")
        for line in lines[:SHOWN + 1]:
            write(line)

    def pytest_unconfigure(self) -> None:
        if self.why is None:
            self.lane.leave()


def register(config: Any) -> None:
    """Measures this run's tests (once, however many ways it was asked for)."""
    if not config.pluginmanager.has_plugin(NAME):
        config.pluginmanager.register(CpuUsage(Lane()), NAME)


def pytest_configure(config: Any) -> None:
    register(config)  # as -p tests.harness.cpu_usage
