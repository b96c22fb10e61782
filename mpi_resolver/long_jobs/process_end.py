"""The end of a process after the save on Slurm's signal, for every framework: its exit code
whatever the framework's teardown does (TensorFlow's took seconds and once hung past KillWait
after a requeue; JAX's waits for its coordination service, measured past KillWait after the
time limit), so that supervise, or srun, sees the code in time; and the end of a process that
a configuration error stopped: its own exit status (EX_CONFIG, 78), not Python's 1, so that
supervise never restarts what would fail the same way."""

from __future__ import annotations

import atexit
import concurrent.futures.thread  # noqa: F401 - its exit hook registered before settle's
import contextlib
import os
import sys
import threading
import weakref
from typing import Callable, Iterator, List

from mpi_resolver.core.errors import ConfigurationError, FormatError, SettingError

__all__ = ["end_with", "EXIT_WITHIN", "exit_on_configuration_error", "settings_checked",
           "leave_first", "settle_at_exit"]

#: Seconds the process may take to end after the save, its script's cleanup included.
EXIT_WITHIN = 10.0


def end_with(code: int, seconds: float) -> None:
    """Makes this process end with exit status ``code``: at the first at-exit handler (after
    the script's own code: its except and finally blocks), or after ``seconds`` whatever it is
    doing then."""
    def now() -> None:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)

    atexit.register(now)  # the last registered: the first to run
    timer = threading.Timer(seconds, now)
    timer.daemon = True
    timer.start()


#: What a framework does to leave its peers before a configuration error ends the process.
_LEAVING: List[Callable[[], None]] = []


def leave_first(leave: Callable[[], None]) -> None:
    """Runs ``leave`` (a framework's leaving of its peers: JAX's coordination service, with
    every process) before a configuration error ends this process: an error every process
    raised together (agreed) then ends each with its status, not with the framework's abort
    where process 0 left first; bounded by EXIT_WITHIN (a peer that never comes)."""
    if leave not in _LEAVING:
        _LEAVING.append(leave)


def exit_on_configuration_error() -> None:
    """Makes an uncaught error that has an ``exit_status`` (core.errors.ConfigurationError)
    end this process with that status, after Python's own traceback; other errors end it as
    before. Installed once (a long job's classes call it)."""
    previous = sys.excepthook
    if getattr(previous, "_mpi_resolver", False):
        return

    def hook(kind: type, error: BaseException, trace: object) -> None:
        previous(kind, error, trace)  # type: ignore[arg-type]
        status = getattr(error, "exit_status", None)
        if isinstance(status, int) and not isinstance(status, bool):
            sys.stdout.flush()
            sys.stderr.flush()
            if _LEAVING:
                end_with(status, EXIT_WITHIN)
            for leave in _LEAVING:
                with contextlib.suppress(Exception):
                    leave()
            os._exit(status)

    hook._mpi_resolver = True  # type: ignore[attr-defined]
    sys.excepthook = hook


@contextlib.contextmanager
def settings_checked() -> Iterator[None]:
    """Inside (a long job's class reading its settings): a FormatError, a value its rule
    refuses, is raised as a SettingError, a ConfigurationError too (uncaught: exit 78, never
    restarted); the message as it was."""
    try:
        yield
    except FormatError as e:
        if isinstance(e, ConfigurationError):
            raise
        raise SettingError(str(e)) from None


def settle_at_exit(settle: Callable[[], None]) -> None:
    """Runs ``settle`` (a bound method: the write in flight ended and recorded) at the
    process's exit, for a script that ends without completing its training: the write thread
    is a daemon, cut at the exit. It runs where the interpreter's exit starts, before the
    thread pools refuse new work (Orbax's write needs them; a plain atexit hook runs after
    them: "cannot schedule new futures after shutdown"), as concurrent.futures' own hook does.
    A weak reference: the hook keeps no saver alive."""
    register = getattr(threading, "_register_atexit", atexit.register)
    register(_settle, weakref.WeakMethod(settle))


def _settle(settle: "weakref.WeakMethod[Callable[[], None]]") -> None:
    method = settle()
    if method is not None:
        method()
