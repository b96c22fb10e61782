"""diagnose: what a timed-out command's processes were doing (stuck, starved or spinning)."""
from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time

import pytest

from tests.harness import diagnose

# a /proc/PID/stat line's fields after the command: state ... utime(11) stime(12) ...
# starttime(19)
TAIL = "S 1 2 3 0 -1 4194304 100 0 0 0 {utime} {stime} 0 0 20 0 1 0 {start} 1000 10"


@pytest.mark.parametrize("command, utime, stime, start, want", [
    ("python", 150, 50, 1000, ("S", 2.0, 10.0)),
    ("odd (name) with spaces", 0, 0, 0, ("S", 0.0, 0.0)),
    ("a)b", 1, 0, 12345, ("S", 0.01, 123.45)),
])
def test_parse_stat(command: str, utime: int, stime: int, start: int, want) -> None:
    line = f"42 ({command}) " + TAIL.format(utime=utime, stime=stime, start=start)
    assert diagnose.parse_stat(line, 100) == want


@pytest.mark.parametrize("line", ["no parenthesis at all", "42 (python) S 1 2 3"])
def test_parse_stat_refuses_what_is_not_a_stat_line(line: str) -> None:
    with pytest.raises(ValueError, match="not a /proc/PID/stat line"):
        diagnose.parse_stat(line, 100)


@pytest.mark.parametrize("times, want", [
    (diagnose.ProcessTimes(7, "R", 4.06, 61.6, "0", "python probe.py"),
     "pid 7 R: 4.1 s of CPU in 62 s alive: python probe.py"),
    (diagnose.ProcessTimes(8, "S", 0.0, 120.2, "do_epoll_wait", "srun -n4 x"),
     "pid 8 S in do_epoll_wait: 0.0 s of CPU in 120 s alive: srun -n4 x"),
    (diagnose.ProcessTimes(9, "S", 0.0, 3.2, "0", "python", "pending TERM"),
     "pid 9 S: 0.0 s of CPU in 3 s alive (pending TERM): python"),
])
def test_describe(times: diagnose.ProcessTimes, want: str) -> None:
    assert diagnose.describe(times) == want


BURN = ("import sys, time\n"
        "while time.process_time() < 0.3: pass\n"
        "print('burnt', flush=True); time.sleep(60)\n")


def test_report_tells_a_process_that_used_the_cpu_from_one_that_slept(tmp_path) -> None:
    """A process that burnt 0.3 s of CPU, then sleeps, and one that only slept: each line has
    its state, where it sleeps and the CPU it used; a process gone is left out."""
    burner = subprocess.Popen([sys.executable, "-c", BURN], stdout=subprocess.PIPE, text=True)
    sleeper = subprocess.Popen(["sleep", "60"])
    gone = subprocess.Popen(["true"])
    gone.wait()
    try:
        assert burner.stdout.readline() == "burnt\n"
        text = diagnose.report([burner.pid, sleeper.pid, gone.pid])
    finally:
        for p in (burner, sleeper):
            p.kill()
            p.wait()
    head, *lines = text.splitlines()
    assert head.startswith("--- harness, at the timeout: load average ")
    assert head.endswith("2 of the command's processes left")
    by_pid = {int(x.split()[1]): x for x in lines}
    assert set(by_pid) == {burner.pid, sleeper.pid}
    burnt = float(by_pid[burner.pid].split(": ")[1].split(" s of CPU")[0])
    slept = float(by_pid[sleeper.pid].split(": ")[1].split(" s of CPU")[0])
    assert burnt >= 0.3 and slept < 0.3, text
    assert f"pid {sleeper.pid} S in " in by_pid[sleeper.pid], text


def test_report_names_at_most_most_processes(monkeypatch) -> None:
    monkeypatch.setattr(diagnose, "process_times",
                        lambda pid, now: diagnose.ProcessTimes(pid, "S", 0, 1, "0", "x"))
    for n, more in ((diagnose.MOST, None), (diagnose.MOST + 1, "  ... and 1 more")):
        lines = diagnose.report(range(n)).splitlines()
        assert len(lines) == 1 + diagnose.MOST + (more is not None)
        assert (lines[-1] == more) if more else lines[-1].startswith("  pid ")


# /proc/PID/status's masks: bit N-1 is signal N (TERM 15: 0x4000, INT 2: 0x2, RTMIN+2)
STATUS = "Name:\tpython\nSigQ:\t1/95000\nSigPnd:\t{pnd}\nShdPnd:\t{shd}\nSigBlk:\t{blk}\n" \
         "SigIgn:\t0000000001001000\nSigCgt:\t0000000180004002\n"


@pytest.mark.parametrize("pnd, shd, blk, want", [
    ("0" * 16, "0" * 16, "0" * 16, ""),
    ("0" * 16, "0000000000004000", "0" * 16, "pending TERM"),
    ("0000000000000002", "0000000000004000", "0000000000004000", "pending INT,TERM; blocked TERM"),
    ("0" * 16, "0" * 16, "0000000000004002", "blocked INT,TERM"),
    ("0" * 16, "0" * 16, f"{1 << (signal.SIGRTMIN + 1):016x}", "blocked 36"),
    ("0" * 16, "0" * 16, "8000000000000000", "blocked RTMAX"),
])
def test_signal_sets(pnd: str, shd: str, blk: str, want: str) -> None:
    """Pending (the thread's and the process's alike) and blocked; the ignored and caught
    signals are not said."""
    assert diagnose.signal_sets(STATUS.format(pnd=pnd, shd=shd, blk=blk)) == want


HELD = ("import signal, time\n"
        "signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})\n"
        "print('blocked', flush=True); time.sleep(60)\n")


def test_report_says_a_stopped_process_and_a_signal_it_blocks() -> None:
    """A process stopped (SIGSTOP) is in state T; a process that blocks SIGTERM, sent one,
    has it pending and blocked: the two ways a process misses a signal sent to it."""
    held = subprocess.Popen([sys.executable, "-c", HELD], stdout=subprocess.PIPE, text=True)
    stopped = subprocess.Popen(["sleep", "60"])
    try:
        assert held.stdout.readline() == "blocked\n"
        held.send_signal(signal.SIGTERM)
        stopped.send_signal(signal.SIGSTOP)
        text = ""
        for _ in range(100):  # the kernel marks it stopped once it runs
            text = diagnose.report([held.pid, stopped.pid])
            if f"pid {stopped.pid} T" in text:
                break
            time.sleep(0.05)
    finally:
        for p in (held, stopped):
            p.kill()
            p.wait()
    by_pid = {int(x.split()[1]): x.strip() for x in text.splitlines()[1:]}
    assert "(pending TERM; blocked TERM)" in by_pid[held.pid], text
    assert by_pid[stopped.pid].startswith(f"pid {stopped.pid} T"), text
    assert "pending" not in by_pid[stopped.pid], text


def test_descendants_are_children_and_theirs() -> None:
    code = ("import subprocess, sys, time\n"
            "c = subprocess.Popen(['sleep', '60'])\n"
            "print(c.pid, flush=True); time.sleep(60)\n")
    outer = subprocess.Popen([sys.executable, "-c",
                              f"import subprocess, sys; subprocess.run([sys.executable, '-c', "
                              f"{code!r}])"], stdout=subprocess.PIPE, text=True)
    try:
        grandchild = int(outer.stdout.readline())
        found = diagnose.descendants(outer.pid)
        with open(f"/proc/{grandchild}/stat") as f:
            middle = int(f.read().rsplit(")", 1)[1].split()[1])
        assert found == {middle, grandchild}
        assert diagnose.descendants(grandchild) == set()
    finally:
        for pid in diagnose.descendants(outer.pid) | {outer.pid}:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        outer.wait()


def test_looked_at_reports_before_the_deadline_only() -> None:
    sleeper = subprocess.Popen(["sleep", "60"])
    try:
        with diagnose.looked_at(sleeper.pid, 0.1) as seen:
            time.sleep(0.5)
        assert len(seen) == 1 and f"pid {sleeper.pid} S" in seen[0], seen
        with diagnose.looked_at(sleeper.pid, 0.5) as early:
            pass
        time.sleep(0.7)
        assert early == []
    finally:
        sleeper.kill()
        sleeper.wait()
