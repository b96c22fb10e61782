"""Signal handlers that only record that a signal came (no I/O, no locks: a handler can run
in the middle of anything), and the check that they are still the ones installed (the edge:
Python's signal module, and sigaction through .disposition).

One handler per signal number serves every watcher of the process (``_dispatch``): two
watchers of one signal (a second ``fit``, a script's own watcher beside the package's) both
see it; the handler it replaced comes back when the last of them is uninstalled.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from mpi_resolver.core.errors import ResolutionError
from mpi_resolver.long_jobs.disposition import DEFAULT, IGNORED, handler_address, library_of
from mpi_resolver.long_jobs.signals import WarningSignal

__all__ = ["SignalWatcher", "Arrival", "Displaced"]

#: The watchers installed for each signal number, and the handler that was there before the
#: first of them (put back when the last one goes).
_WATCHERS: Dict[int, List["SignalWatcher"]] = {}
_BEFORE: Dict[int, Any] = {}


def _dispatch(signum: int, frame: Any) -> None:
    """The one Python handler of a watched signal: every installed watcher notes it."""
    for watcher in list(_WATCHERS.get(signum, ())):
        watcher._on_signal(signum, frame)


@dataclass(frozen=True)
class Arrival:
    """The first watched signal that came: which, and when (time.monotonic, time.time)."""

    signal: WarningSignal
    at: float
    wall: float


@dataclass(frozen=True)
class Displaced:
    """A watched signal whose handler is no longer the watcher's: who has it now."""

    signal: WarningSignal
    owner: str

    @property
    def tensorflow(self) -> bool:
        """True where TensorFlow's own library holds it (MultiWorkerMirroredStrategy takes
        SIGTERM when it is built)."""
        return "libtensorflow" in self.owner


class SignalWatcher:
    """Watches ``signals``: after install(), ``arrival`` is the first of them to come and
    ``count`` how many came. Handlers run in the main thread (Python's rule); everything else
    may be read from any thread."""

    def __init__(self, signals: Sequence[WarningSignal],
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.signals = tuple({s.number: s for s in signals}.values())
        self._clock = clock
        self._first: Optional[Tuple[int, float, float]] = None
        self._count = 0
        self._came: Dict[int, bool] = {}
        self._installed: set = set()
        self._c_handler: Optional[int] = None

    def _on_signal(self, signum: int, frame: Any) -> None:
        # Assignments only: the main thread may be anywhere (inside a lock, a write, a save).
        self._count += 1
        self._came[signum] = True
        if self._first is None:
            self._first = (signum, self._clock(), time.time())

    def install(self) -> None:
        """Installs the handlers (the process's one handler of each signal, shared by its
        watchers; the handler it replaces is remembered).

        Raises:
          ResolutionError: not in the main thread, where Python runs signal handlers.
        """
        if threading.current_thread() is not threading.main_thread():
            raise ResolutionError(
                "mpi_resolver's signal watcher must be created in the main thread (Python "
                "runs signal handlers there): create SlurmTerminationConfig (or "
                "SlurmBackupAndRestore) in the training script's main thread.")
        for s in self.signals:
            current = signal.getsignal(s.number)
            if not _WATCHERS.get(s.number):
                _BEFORE[s.number] = current
            watchers = _WATCHERS.setdefault(s.number, [])
            if self not in watchers:
                watchers.append(self)
            if current is not _dispatch:
                signal.signal(s.number, _dispatch)
            self._installed.add(s.number)
        self._c_handler = handler_address(self.signals[0].number) if self.signals else None

    @property
    def installed(self) -> bool:
        """Returns True between install() and uninstall()."""
        return bool(self._installed)

    def uninstall(self) -> None:
        """Leaves the process's handlers (main thread); the last watcher of a signal puts
        back the handler the first one replaced. From then on this watcher reports no
        displacement (TensorFlow's thread may still ask it, once a second)."""
        for number in sorted(self._installed):
            watchers = _WATCHERS.get(number, [])
            if self in watchers:
                watchers.remove(self)
            if not watchers:
                previous = _BEFORE.pop(number, None)
                _WATCHERS.pop(number, None)
                signal.signal(number, previous if previous is not None else signal.SIG_DFL)
        self._installed.clear()

    @property
    def arrival(self) -> Optional[Arrival]:
        """Returns the first watched signal that came, or None."""
        first = self._first
        if first is None:
            return None
        by_number = {s.number: s for s in self.signals}
        return Arrival(by_number[first[0]], first[1], first[2])

    @property
    def count(self) -> int:
        """Returns how many watched signals came (a second one while saving is harmless)."""
        return self._count

    def came(self, number: int) -> bool:
        """Returns True where signal ``number`` came since install() (or forget()), first or
        later (SIGTERM on top of the warning signal: the job is being ended)."""
        return self._came.get(int(number), False)

    def displaced(self) -> List[Displaced]:
        """Returns the watched signals whose handler another piece of code installed since:
        another Python handler, or another library's at the C level; none before install()
        or after uninstall()."""
        if not self.installed:
            return []
        out = []
        for s in self.signals:
            owner = self._owner(s.number)
            if owner is not None:
                out.append(Displaced(s, owner))
        return out

    def _owner(self, number: int) -> Optional[str]:
        """Returns who holds signal ``number`` where it is not this watcher, else None."""
        python = signal.getsignal(number)
        if python is not None and python is not _dispatch:
            return _python_owner(python)
        address = handler_address(number)
        if address is None or self._c_handler is None or address == self._c_handler:
            return None
        if address == DEFAULT:
            return "the default action (SIG_DFL)"
        if address == IGNORED:
            return "nobody: it is ignored (SIG_IGN)"
        library = library_of(address)
        return (f"{os.path.basename(library)} ({library})" if library
                else f"code at {address:#x} that no library claims")

    def reclaim(self, which: Callable[[Displaced], bool]) -> List[Displaced]:
        """Installs the handlers again where ``which`` of their displacements says so (main
        thread); returns those it took back."""
        taken = [d for d in self.displaced() if which(d)]
        for d in taken:
            signal.signal(d.signal.number, _dispatch)
        return taken

    def ignore(self) -> None:
        """Ignores the watched signals from now on (main thread): after the save, more may
        come, and Python's own end would give SIGTERM back its default, deadly action."""
        for s in self.signals:
            signal.signal(s.number, signal.SIG_IGN)

    def deliver(self, number: int) -> None:
        """Sends signal ``number`` to this process (rehearsals: check --deep)."""
        os.kill(os.getpid(), number)

    def forget(self) -> None:
        """Forgets the signals that came (rehearsals: a probe's signal is not a real one)."""
        self._first, self._count = None, 0
        self._came = {}


def _python_owner(handler: Any) -> str:
    """Returns a Python-level handler's name: 'module.function', SIG_DFL or SIG_IGN."""
    if handler == signal.SIG_DFL:
        return "the default action (SIG_DFL)"
    if handler == signal.SIG_IGN:
        return "nobody: it is ignored (SIG_IGN)"
    module = getattr(handler, "__module__", None) or "?"
    name = getattr(handler, "__qualname__", None) or repr(handler)
    return f"the Python handler {module}.{name}"
