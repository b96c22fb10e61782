"""Every long-job unit test starts as a fresh process would, as far as signals go (no other
test's watcher registered), and leaves the process's handlers and the watchers' registry as it
found them: a watcher a test left installed would otherwise keep its handler in place for
every later test of the session (tests/tf's among them)."""

from __future__ import annotations

import signal

import pytest

from mpi_resolver.long_jobs import watcher as watcher_module

SIGNALS = (signal.SIGUSR1, signal.SIGUSR2, signal.SIGTERM)


@pytest.fixture(autouse=True)
def _handlers_and_watchers_put_back():
    before = {n: signal.getsignal(n) for n in SIGNALS}
    registry = {n: list(w) for n, w in watcher_module._WATCHERS.items()}
    replaced = dict(watcher_module._BEFORE)
    watcher_module._WATCHERS.clear()
    watcher_module._BEFORE.clear()
    yield
    watcher_module._WATCHERS.clear()
    watcher_module._WATCHERS.update(registry)
    watcher_module._BEFORE.clear()
    watcher_module._BEFORE.update(replaced)
    for n, handler in before.items():
        signal.signal(n, handler)
