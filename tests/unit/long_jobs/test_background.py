"""long_jobs/background: one checkpoint write in flight, each finished write given once, a
failure kept for the caller, what the write took."""

from __future__ import annotations

import os
import threading
from typing import Any, Callable, List

import pytest

from mpi_resolver.long_jobs import background
from mpi_resolver.long_jobs.background import BackgroundWrites, Written, write_now

pytestmark = pytest.mark.unit


class Clock:
    """A clock that moves only when told (``now``)."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def held(clock: Clock, result: Any = "ckpt-3", error: Exception | None = None,
         seconds: float = 2.5) -> tuple[Callable[[], Any], threading.Event]:
    """Returns a write that waits for its event, moves the clock by ``seconds``, then
    returns ``result`` or raises ``error``; and the event."""
    go = threading.Event()

    def write() -> Any:
        go.wait(10)
        clock.now += seconds
        if error is not None:
            raise error
        return result
    return write, go


@pytest.mark.parametrize("error, want", [
    (None, Written(7, 0.004, 2.5, "ckpt-3", None)),
    (OSError(28, "No space left on device"),
     Written(7, 0.004, 2.5, None, "[Errno 28] No space left on device")),
    (RuntimeError("  two\n  lines  "), Written(7, 0.004, 2.5, None, "two lines")),
    (RuntimeError(""), Written(7, 0.004, 2.5, None, "RuntimeError")),
    (RuntimeError("x" * 400), Written(7, 0.004, 2.5, None, "x" * 300)),
])
def test_a_write_is_given_once_it_has_finished(error: Exception | None, want: Written) -> None:
    clock = Clock()
    writes = BackgroundWrites(clock)
    write, go = held(clock, error=error)
    writes.start(7, 0.004, write)
    assert writes.busy and writes.done() is None  # running: nothing yet
    go.set()
    assert writes.wait() == want
    assert not writes.busy and writes.last_seconds == 2.5
    assert writes.done() is None and writes.wait() is None  # given once


def test_done_gives_the_finished_write_without_waiting() -> None:
    clock = Clock()
    writes = BackgroundWrites(clock)
    write, go = held(clock, seconds=0.5)
    writes.start(1, 0.01, write)
    go.set()
    seen: List[Written] = []
    for _ in range(1000):
        if (finished := writes.done()) is not None:
            seen.append(finished)
            break
        threading.Event().wait(0.01)
    assert seen == [Written(1, 0.01, 0.5, "ckpt-3", None)]
    assert writes.done() is None


def test_nothing_started_nothing_given() -> None:
    writes = BackgroundWrites()
    assert (writes.busy, writes.pending, writes.done(), writes.wait(),
            writes.last_seconds) == (False, False, None, None, None)


def test_a_write_is_pending_until_its_outcome_is_collected() -> None:
    """Finished but not collected is still pending (its outcome not said), no longer busy."""
    clock = Clock()
    writes = BackgroundWrites(clock)
    write, go = held(clock)
    writes.start(1, 0.0, write)
    assert (writes.busy, writes.pending) == (True, True)
    go.set()
    writes._thread.join()
    assert (writes.busy, writes.pending) == (False, True)
    writes.done()
    assert (writes.busy, writes.pending) == (False, False)


def test_a_second_write_before_the_first_is_collected_is_refused() -> None:
    clock = Clock()
    writes = BackgroundWrites(clock)
    write, go = held(clock)
    writes.start(1, 0.0, write)
    go.set()
    with pytest.raises(RuntimeError, match="wait\\(\\) first"):
        writes.start(2, 0.0, write)
    writes.wait()
    second, go2 = held(clock, result="ckpt-4", seconds=1.0)
    writes.start(2, 0.0, second)
    go2.set()
    assert writes.wait() == Written(2, 0.0, 1.0, "ckpt-4", None)
    assert writes.last_seconds == 1.0


def test_the_write_runs_in_another_thread() -> None:
    writes = BackgroundWrites()
    writes.start(1, 0.0, lambda: threading.current_thread().name)
    finished = writes.wait()
    assert finished is not None and finished.result == "mpi_resolver-save-1"


def test_the_write_s_thread_never_holds_the_process_at_its_exit() -> None:
    """A daemon thread: a process killed by its own exit path (os._exit after the signal's
    save, which waits for the write first) is not held by a write; the normal exit waits
    through the exit hook (handler_setup), not the thread."""
    writes = BackgroundWrites()
    go = threading.Event()
    writes.start(1, 0.0, lambda: go.wait(10))
    assert writes._thread is not None and writes._thread.daemon is True
    go.set()
    writes.wait()



@pytest.mark.parametrize("error, tidy_raises, tidied, said", [
    pytest.param(None, False, True, [], id="whole: then() after it, not in its time"),
    pytest.param(OSError(28, "No space left on device"), False, False, [],
                 id="failed: no then() (nothing newer is whole)"),
    pytest.param(None, True, True, ["mpi_resolver: the checkpoint of step 7 is whole; the "
                                    "older ones were not removed: [Errno 13] Permission "
                                    "denied"], id="then() fails: one line, the write whole"),
])
def test_what_follows_a_whole_write(error: Exception | None, tidy_raises: bool, tidied: bool,
                                    said: List[str], caplog) -> None:
    """then() (the older checkpoints' removal) runs once the write is whole, in the write's
    thread: the write's time leaves it out, and the write is not given before it ended."""
    clock = Clock()
    writes = BackgroundWrites(clock)
    write, go = held(clock, error=error)
    ran: List[str] = []
    tidy_go = threading.Event()

    def tidy() -> None:
        tidy_go.wait(10)
        clock.now += 9.0
        ran.append(threading.current_thread().name)
        if tidy_raises:
            raise PermissionError(13, "Permission denied")

    writes.start(7, 0.004, write, tidy)
    go.set()
    if tidied:
        assert writes.done() is None and writes.busy  # then() not ended: not given yet
    tidy_go.set()
    finished = writes.wait()
    assert finished is not None and finished.seconds == 2.5  # then()'s 9 s left out
    assert (finished.error is None) == (error is None)
    assert ran == (["mpi_resolver-save-7"] if tidied else [])
    assert [r.getMessage() for r in caplog.records] == said


def own_nice() -> int:
    """Returns the calling thread's nice value."""
    return os.getpriority(os.PRIO_PROCESS, threading.get_native_id())


def test_the_write_runs_below_the_training() -> None:
    writes, seen = BackgroundWrites(), []
    before = own_nice()
    writes.start(3, 0.1, lambda: seen.append(own_nice()))
    writes.wait()
    assert seen == [min(before + background.WRITE_NICE, 19)]
    assert own_nice() == before  # the training's thread keeps its own


def test_a_write_at_once_keeps_the_training_s_priority() -> None:
    before = own_nice()
    assert write_now(3, 0.1, own_nice).result == before


@pytest.mark.parametrize("by", [1, 5])
def test_lower_priority_adds_to_the_thread_s_own(by: int) -> None:
    seen = []

    def lowered() -> None:
        before = own_nice()
        background.lower_priority(by)
        seen.append(own_nice() - before)

    thread = threading.Thread(target=lowered)
    thread.start()
    thread.join()
    assert seen == [by] or own_nice() + by > 19


def test_a_priority_that_cannot_be_changed_leaves_the_write_to_run(monkeypatch) -> None:
    def refused(*args: Any) -> None:
        raise PermissionError("not allowed")

    monkeypatch.setattr(background.os, "setpriority", refused)
    writes = BackgroundWrites()
    writes.start(3, 0.1, lambda: "ckpt-3")
    finished = writes.wait()
    assert finished is not None and finished.result == "ckpt-3" and finished.error is None
