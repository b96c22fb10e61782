"""long_jobs.reach: after the strategy and its first all-reduce, do the watched signals
still reach the watcher? Real signals in this process; a C stand-in library that took one;
a signal every thread blocks."""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from mpi_resolver.long_jobs.reach import unreached
from mpi_resolver.long_jobs.signals import parse_signal
from mpi_resolver.long_jobs.watcher import SignalWatcher
from tests.standins.build import sigtaker

pytestmark = pytest.mark.unit
ROOT = Path(__file__).resolve().parents[3]

USR1, USR2, TERM = parse_signal("USR1"), parse_signal("USR2"), parse_signal("TERM")


@pytest.fixture
def watcher():
    before = {n: signal.getsignal(n) for n in (10, 12, 15)}
    w = SignalWatcher([USR2, TERM])
    w.install()
    yield w
    for n, handler in before.items():
        signal.signal(n, handler)


def test_signals_that_reach_the_watcher(watcher):
    assert unreached(watcher) is None
    assert watcher.arrival is None and watcher.count == 0  # the probes' signals forgotten


def test_a_library_that_took_a_signal_is_named_with_the_fix(watcher, tmp_path):
    library = ctypes.CDLL(str(sigtaker(tmp_path)))
    library.take(int(signal.SIGUSR2))
    error, fix = unreached(watcher)
    assert error == (f"SIGUSR2's handler is now libsigtaker.so ({os.path.realpath(library._name)})"
                     ", installed after mpi_resolver's watcher: that signal would not save a "
                     "checkpoint")
    assert fix == ("use another signal than USR2: #SBATCH --signal=USR2@SECONDS and "
                   "SlurmTerminationConfig(signal='USR2') (train.py --signal USR2; NCCL 2.12 "
                   "took USR1 like this)")


def test_sigterm_taken_says_to_create_the_config_after_the_strategy(watcher):
    libc = ctypes.CDLL(None)
    libc.signal.restype = ctypes.c_void_p
    libc.signal(int(signal.SIGTERM), ctypes.c_void_p(1))
    error, fix = unreached(watcher)
    assert error.startswith("SIGTERM's handler is now nobody: it is ignored (SIG_IGN)")
    assert fix.startswith("create SlurmTerminationConfig after the strategy")


BLOCKED = """
import signal
from mpi_resolver.long_jobs.reach import unreached
from mpi_resolver.long_jobs.signals import parse_signal
from mpi_resolver.long_jobs.watcher import SignalWatcher
watcher = SignalWatcher([parse_signal("USR2")])
watcher.install()
signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR2})  # the process's one thread
print(unreached(watcher, wait=0.2))
"""


def test_a_blocked_signal_does_not_reach_within_the_wait():
    """In a process of its own: a signal blocked by every thread (here the only one) stays
    pending. (In this test process other threads may take it.)"""
    out = subprocess.run([sys.executable, "-c", BLOCKED], capture_output=True, text=True,
                         timeout=60, cwd=ROOT).stdout
    assert out.startswith("(\"SIGUSR2, sent to this process, did not reach mpi_resolver's "
                          "watcher within 0.2 s\", 'every thread blocks it (pthread_sigmask "
                          "in a library)"), out


def test_the_wait_is_bounded_by_the_clock(watcher):
    """A signal that never arrives: the loop ends at the deadline, sleeping in between."""
    now, slept = [0.0], []

    def sleep(seconds):
        slept.append(seconds)
        now[0] += seconds

    watcher.deliver = lambda number: None  # nothing is sent
    error, _ = unreached(watcher, wait=0.05, clock=lambda: now[0], sleep=sleep)
    assert error.startswith("SIGUSR2, sent to this process, did not reach")
    assert slept == [0.01] * len(slept) and 5 <= len(slept) <= 6
