"""diagnose: what a timed-out command's processes were doing (stuck, starved or spinning)."""
from __future__ import annotations

import subprocess
import sys

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
