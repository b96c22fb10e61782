"""long_jobs.watcher and .disposition for real, in this process: handlers that only note a
signal, a second signal, the check that another Python handler or another library (a C
stand-in, built here) took one since, taking back, and what the handlers replaced."""

from __future__ import annotations

import ctypes
import os
import signal
import threading
import time

import pytest

from mpi_resolver.core.errors import ResolutionError
from mpi_resolver.long_jobs import disposition
from mpi_resolver.long_jobs import watcher as watcher_module
from mpi_resolver.long_jobs.signals import parse_signal
from mpi_resolver.long_jobs.watcher import Displaced, SignalWatcher
from tests.standins.build import sigtaker

pytestmark = pytest.mark.unit

USR1, USR2, TERM = parse_signal("USR1"), parse_signal("USR2"), parse_signal("TERM")


@pytest.fixture
def watcher():
    """A SignalWatcher of USR1 and USR2, installed."""
    w = SignalWatcher([USR1, USR2], clock=lambda: 42.0)
    w.install()
    return w


@pytest.fixture(scope="module")
def taker(tmp_path_factory):
    """The C stand-in library (sigtaker.c), loaded in this process."""
    return ctypes.CDLL(str(sigtaker(tmp_path_factory.mktemp("sigtaker"))))


def wait_for(condition, seconds=5.0):
    deadline = time.monotonic() + seconds
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.01)  # the main thread runs Python's handlers between bytecodes
    return condition()


def test_nothing_came_yet(watcher):
    assert watcher.arrival is None and watcher.count == 0 and watcher.displaced() == []


def test_the_first_signal_is_noted_with_its_time_and_later_ones_counted(watcher):
    os.kill(os.getpid(), signal.SIGUSR2)
    assert wait_for(lambda: watcher.count == 1)
    os.kill(os.getpid(), signal.SIGUSR1)  # a second signal, while "saving"
    assert wait_for(lambda: watcher.count == 2)
    arrival = watcher.arrival
    assert (arrival.signal, arrival.at) == (USR2, 42.0)
    assert abs(arrival.wall - time.time()) < 5
    watcher.forget()
    assert watcher.arrival is None and watcher.count == 0


def test_deliver_sends_to_this_process(watcher):
    watcher.deliver(signal.SIGUSR1)
    assert wait_for(lambda: watcher.arrival is not None)
    assert watcher.arrival.signal == USR1


def test_one_watcher_per_signal_number():
    assert SignalWatcher([USR1, parse_signal("10"), USR2]).signals == (USR1, USR2)


def test_another_python_handler_is_named(watcher):
    def nccl_like(signum, frame):
        pass

    signal.signal(signal.SIGUSR1, nccl_like)
    assert watcher.displaced() == [Displaced(
        USR1, f"the Python handler {__name__}.test_another_python_handler_is_named.<locals>."
              "nccl_like")]
    signal.signal(signal.SIGUSR2, signal.SIG_IGN)
    assert watcher.displaced()[1] == Displaced(USR2, "nobody: it is ignored (SIG_IGN)")
    signal.signal(signal.SIGUSR2, signal.SIG_DFL)
    assert watcher.displaced()[1] == Displaced(USR2, "the default action (SIG_DFL)")


def test_another_library_s_handler_is_named_with_its_path(watcher, taker):
    assert taker.take(int(signal.SIGUSR1)) == 0
    path = os.path.realpath(taker._name)
    (displaced,) = watcher.displaced()
    assert displaced == Displaced(USR1, f"libsigtaker.so ({path})")
    assert not displaced.tensorflow
    before = taker.taken()
    os.kill(os.getpid(), signal.SIGUSR1)
    assert wait_for(lambda: taker.taken() == before + 1)
    assert watcher.arrival is None  # the library's handler got it, not ours


def test_a_c_level_default_or_ignore_is_named(watcher):
    libc = ctypes.CDLL(None)
    libc.signal.restype = ctypes.c_void_p
    libc.signal(int(signal.SIGUSR2), ctypes.c_void_p(1))  # SIG_IGN, behind Python's back
    assert watcher.displaced() == [Displaced(USR2, "nobody: it is ignored (SIG_IGN)")]
    libc.signal(int(signal.SIGUSR2), ctypes.c_void_p(0))  # SIG_DFL
    assert watcher.displaced() == [Displaced(USR2, "the default action (SIG_DFL)")]


def test_reclaim_takes_back_what_it_is_told_to(watcher, taker):
    taker.take(int(signal.SIGUSR1))
    taker.take(int(signal.SIGUSR2))
    assert [d.signal for d in watcher.reclaim(lambda d: d.signal == USR2)] == [USR2]
    assert [d.signal for d in watcher.displaced()] == [USR1]
    taken = watcher.reclaim(lambda d: True)
    assert [d.signal for d in taken] == [USR1] and watcher.displaced() == []


def test_tensorflow_s_library_is_recognised():
    assert Displaced(TERM, "libtensorflow_cc.so.2 (/v/tensorflow/libtensorflow_cc.so.2)"
                     ).tensorflow
    assert not Displaced(TERM, "libnccl.so.2 (/opt/libnccl.so.2)").tensorflow


def test_uninstall_puts_back_what_was_there():
    signal.signal(signal.SIGUSR1, signal.SIG_IGN)
    w = SignalWatcher([USR1])
    w.install()
    assert signal.getsignal(signal.SIGUSR1) is watcher_module._dispatch
    w.uninstall()
    assert signal.getsignal(signal.SIGUSR1) == signal.SIG_IGN


def test_two_watchers_of_one_signal_both_see_it_and_the_last_puts_back():
    """Two watchers in one process (a second fit's config, a script's own watcher beside
    the package's): each notes the signal; the handler before them comes back only when
    the last of them leaves."""
    signal.signal(signal.SIGUSR1, signal.SIG_IGN)
    usr2 = signal.getsignal(signal.SIGUSR2)
    first, second = SignalWatcher([USR1]), SignalWatcher([USR1, USR2])
    first.install()
    second.install()
    os.kill(os.getpid(), signal.SIGUSR1)
    assert wait_for(lambda: first.came(signal.SIGUSR1) and second.came(signal.SIGUSR1))
    assert first.displaced() == [] and second.displaced() == []
    first.uninstall()
    assert signal.getsignal(signal.SIGUSR1) is watcher_module._dispatch  # second still there
    os.kill(os.getpid(), signal.SIGUSR1)
    assert wait_for(lambda: second.count == 2)
    assert first.count == 1
    second.uninstall()
    assert signal.getsignal(signal.SIGUSR1) == signal.SIG_IGN
    assert signal.getsignal(signal.SIGUSR2) == usr2


def test_a_watcher_reports_displacements_only_while_installed(watcher):
    """TensorFlow's thread asks a config's watcher once a second for as long as the process
    lives: an uninstalled one (a finished rehearsal, a test's config) must not warn."""
    w = SignalWatcher([USR1])
    signal.signal(signal.SIGUSR1, signal.SIG_IGN)
    assert w.displaced() == []  # not installed yet
    w.install()
    signal.signal(signal.SIGUSR1, signal.SIG_IGN)
    assert w.displaced() == [Displaced(USR1, "nobody: it is ignored (SIG_IGN)")]
    w.uninstall()
    signal.signal(signal.SIGUSR1, signal.SIG_IGN)
    assert w.displaced() == []


def test_install_outside_the_main_thread_is_an_error_naming_the_fix():
    errors = []

    def install():
        try:
            SignalWatcher([USR1]).install()
        except ResolutionError as e:
            errors.append(str(e))

    thread = threading.Thread(target=install)
    thread.start()
    thread.join()
    assert errors == [
        "mpi_resolver's signal watcher must be created in the main thread (Python runs signal "
        "handlers there): create SlurmTerminationConfig (or SlurmBackupAndRestore) in the "
        "training script's main thread."]


def test_disposition_reads_the_c_level_handler():
    before = signal.getsignal(signal.SIGUSR2)
    try:
        signal.signal(signal.SIGUSR2, signal.SIG_DFL)
        assert disposition.handler_address(signal.SIGUSR2) == disposition.DEFAULT == 0
        signal.signal(signal.SIGUSR2, signal.SIG_IGN)
        assert disposition.handler_address(signal.SIGUSR2) == disposition.IGNORED == 1
        signal.signal(signal.SIGUSR2, lambda s, f: None)
        address = disposition.handler_address(signal.SIGUSR2)
        assert address > 1
        assert "python" in os.path.basename(disposition.library_of(address))
    finally:
        signal.signal(signal.SIGUSR2, before)


def test_disposition_edges():
    assert disposition.handler_address(0) is None  # sigaction refuses signal 0 (EINVAL)
    assert disposition.library_of(disposition.DEFAULT) is None
    assert disposition.library_of(disposition.IGNORED) is None
    assert disposition.library_of(8) is None  # no library holds address 8


def test_a_newer_watcher_of_the_package_is_not_a_displacement(watcher):
    newer = SignalWatcher([USR1])
    newer.install()
    assert watcher.displaced() == []


def test_every_signal_that_came_is_known_not_only_the_first(watcher):
    assert not watcher.came(signal.SIGUSR1) and not watcher.came(signal.SIGUSR2)
    os.kill(os.getpid(), signal.SIGUSR1)
    assert wait_for(lambda: watcher.came(signal.SIGUSR1))
    assert not watcher.came(signal.SIGUSR2)
    os.kill(os.getpid(), signal.SIGUSR2)  # on top of the first: scancel during the save
    assert wait_for(lambda: watcher.came(signal.SIGUSR2))
    assert watcher.arrival.signal == USR1
    watcher.forget()
    assert not watcher.came(signal.SIGUSR1) and not watcher.came(signal.SIGUSR2)
