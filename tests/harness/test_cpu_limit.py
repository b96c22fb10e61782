"""tests/harness/cpu_limit for real: a busy process held to 70 % of its time runs about 70 %
of the wall clock, and runs on again once the limit stops; pin puts every thread of a
process on one CPU."""
from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from .cpu_limit import Limit, cpus, pin

pytestmark = pytest.mark.unit

BUSY = "import threading\nthreading.Thread(target=lambda: None).start()\nwhile True: pass\n"


def cpu_seconds(pid: int) -> float:
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def stopped(pid: int) -> bool:
    return open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0] == "T"


def test_a_limited_process_is_stopped_for_its_share_and_released() -> None:
    proc = subprocess.Popen([sys.executable, "-c", BUSY])
    try:
        limit = Limit(proc.pid)
        limit.start()
        seen, end = [], time.monotonic() + 2.0
        while time.monotonic() < end:  # sampled: stopped for a part of the time
            seen.append(stopped(proc.pid))
            time.sleep(0.007)
        limit.stop()
        share = sum(seen) / len(seen)
        # about STOPPED / PERIOD (0.3); a loaded machine wakes the limit's thread late, which
        # stretches both its stops and its runs: the share stays well inside (0.05, 0.9)
        assert 0.05 < share < 0.9, share
        before = cpu_seconds(proc.pid)
        time.sleep(0.5)
        assert not stopped(proc.pid) and cpu_seconds(proc.pid) > before  # runs on
    finally:
        proc.kill()
        proc.wait()


def test_pin_puts_every_thread_on_one_cpu() -> None:
    proc = subprocess.Popen([sys.executable, "-c", BUSY])
    try:
        time.sleep(0.3)
        cpu = cpus()[-1]
        pin(proc.pid, cpu)
        threads = os.listdir(f"/proc/{proc.pid}/task")
        assert threads and all(os.sched_getaffinity(int(t)) == {cpu} for t in threads)
    finally:
        proc.kill()
        proc.wait()
