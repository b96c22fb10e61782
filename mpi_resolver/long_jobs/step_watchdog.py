"""StepWatchdog: ends a worker whose training step hangs, after writing its Python stacks and
one line saying where it is, so that the step's launcher (and `mpi-resolver supervise`)
restarts it (the edge: a thread, the clock, faulthandler, os._exit).

Use::

    with StepWatchdog(resolver=resolver) as watchdog:   # armed while training
        for ...:
            train_step(iterator)
            watchdog.tick()                              # after every step

The rule (watchdog.StepRule): a step is stuck past ``factor`` times the median step and past
``minimum`` seconds; the first ``warmup`` steps do not count, and every step before a median
exists has ``start_timeout`` seconds (MPI_RESOLVER_START_TIMEOUT): arm it before the
strategy's rendezvous to bound that too. faulthandler's timer is its backstop (backstop), for
a process that holds the interpreter lock; the package's own saves are not watched
(paused_watchdogs). A stuck step: every thread's Python stack to stderr (faulthandler), one
line naming this worker, the step, its time against the limit and where the worker is
(hang_site), then exit EXIT_STATUS (124). A worker that only waits inside TensorFlow for a
peer waits ``grace`` seconds first (past the backstop's margin), so that a stuck peer, whose
own watchdog or backstop fires at about the same moment, writes its stacks and ends first.
"""

from __future__ import annotations

import contextlib
import faulthandler
import io
import json
import os
import socket
import sys
import sysconfig
import threading
import time
import traceback
import weakref
from collections import deque
from typing import Any, Callable, Deque, Iterator, List, Mapping, Optional, TextIO

from mpi_resolver.core.errors import ResolutionError
from mpi_resolver.long_jobs.backstop import Backstop, margin
from mpi_resolver.long_jobs.hang_site import WAITING, Frame, Site, hang_site
from mpi_resolver.long_jobs.process_end import exit_on_configuration_error, settings_checked
from mpi_resolver.long_jobs.watchdog import (DEFAULT_WARMUP, DEFAULT_WINDOW, EXIT_STATUS,
                                             START_VARIABLE, median, step_rule)

__all__ = ["StepWatchdog", "EXIT_STATUS", "worker_name", "paused_watchdogs"]

#: Seconds between the watchdog thread's looks at the clock.
INTERVAL = 0.5
#: Seconds a waiting worker gives a stuck peer beyond its backstop's margin to write its
#: stacks and end before it exits itself.
GRACE = 5.0
_RANKS = ("SLURM_PROCID", "PMIX_RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK")


#: The watchdogs armed in this process (the package pauses them inside its own saves).
_ARMED: "weakref.WeakSet[StepWatchdog]" = weakref.WeakSet()


@contextlib.contextmanager
def paused_watchdogs() -> Iterator[None]:
    """Inside: no armed watchdog of this process watches: the package's own saves, restores,
    completion and exit barrier are no training step, and a long one must not end the run
    with 124 (restarted) where it should end with 75 (requeued). Each step's clock starts
    again after."""
    dogs = [dog for dog in list(_ARMED) if dog.watching]  # not those the script paused
    for dog in dogs:
        dog.pause()
    try:
        yield
    finally:
        for dog in dogs:
            dog.resume()


class StepWatchdog:
    """Watches the time of each training step (see the module's docstring).

    Args:
      factor, minimum: k and T (numbers, or text as '10', '300', '5m', 'off'); where None,
        MPI_RESOLVER_STEP_TIMEOUT_FACTOR and MPI_RESOLVER_STEP_TIMEOUT_MIN, else 10 and
        300 s. Either 'off': the watchdog never fires.
      start_timeout: S, the seconds each step has before a median exists (the first one
        included); where None, MPI_RESOLVER_START_TIMEOUT, else 1800 s.
      warmup, window: the steps that do not count; the median's window.
      resolver: names the task in the line ('worker:1'); ``name``: the whole name instead.
      interval: see INTERVAL. grace: the seconds a worker that only waits gives a stuck
        peer (None: the backstop's margin + GRACE). stream: for the stacks and the line
        (stderr).
      clock, exit, environ: time.monotonic, os._exit and os.environ, for tests.

    Raises:
      FormatError: a bad setting, naming the argument or the variable; a variable's is also
        a configuration error, which, uncaught, ends the process with 78 (EX_CONFIG: never
        restarted by supervise) after Python's traceback (process_end, installed here).
    """

    def __init__(self, factor: object = None, minimum: object = None, *,
                 start_timeout: object = None,
                 warmup: int = DEFAULT_WARMUP, window: int = DEFAULT_WINDOW,
                 resolver: Any = None, name: Optional[str] = None,
                 interval: float = INTERVAL, grace: Optional[float] = None,
                 stream: Optional[TextIO] = None, clock: Callable[[], float] = time.monotonic,
                 exit: Callable[[int], Any] = os._exit,
                 environ: Optional[Mapping[str, str]] = None) -> None:
        exit_on_configuration_error()  # a refused setting ends the process with 78
        environ = os.environ if environ is None else environ
        with settings_checked():  # an argument's too
            self.rule = step_rule(factor, minimum, warmup=warmup, window=window,
                                  start=start_timeout, environ=environ)
        self._backstop = Backstop(stream or sys.stderr, clock)
        self.name = name
        self.resolver, self._environ = resolver, environ
        self.interval, self.grace = interval, grace
        self._stream, self._clock, self._exit = stream, clock, exit
        self._counted: Deque[float] = deque(maxlen=window)
        self.steps = 0
        self._since: Optional[float] = None  # the current step's start; None: not watched
        self._armed = False
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None
        self.fired: Optional[str] = None

    def start(self) -> "StepWatchdog":
        """Arms the watchdog (the first step starts now); returns it.

        Raises:
          ResolutionError: it is armed already.
        """
        if self._armed:
            raise ResolutionError("StepWatchdog.start(): the watchdog is armed already; "
                                  "call stop() first, or use one `with` block.")
        with self._lock:
            self._armed, self._since = True, self._clock()
        _ARMED.add(self)
        self._arm_backstop()
        if self.rule is not None:
            self._stop.clear()
            self._thread = threading.Thread(target=self._watch, daemon=True,
                                            name="mpi_resolver step watchdog")
            self._thread.start()
        return self

    def stop(self) -> None:
        """Disarms the watchdog (after training); it may be started again."""
        with self._lock:
            self._armed, self._since = False, None
        _ARMED.discard(self)
        self._backstop.cancel()
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join()
        self._thread = None

    def __enter__(self) -> "StepWatchdog":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def tick(self) -> None:
        """Notes that a step ended and the next one starts (call it after every step)."""
        now = self._clock()
        with self._lock:
            if self._since is None:
                return
            self.steps += 1
            if self.rule is not None and self.rule.counts(self.steps):
                self._counted.append(now - self._since)
            self._since = now
        self._arm_backstop()

    def _arm_backstop(self) -> None:
        """Arms faulthandler's timer for the step that starts now."""
        if self.rule is not None and self._since is not None:
            self._backstop.arm(self.rule.limit(list(self._counted)))

    @property
    def watching(self) -> bool:
        """Returns whether a step is being watched now (armed, not paused)."""
        return self._since is not None

    def pause(self) -> None:
        """Stops watching the current step (an evaluation, a save follows) until resume()."""
        with self._lock:
            self._since = None
        self._backstop.cancel()

    def resume(self) -> None:
        """Watches again where armed: the step's clock starts now."""
        with self._lock:
            if self._armed:
                self._since = self._clock()
        self._arm_backstop()

    @contextlib.contextmanager
    def paused(self) -> Iterator[None]:
        """Not watched inside (an evaluation, a save); the step's clock starts again after."""
        self.pause()
        try:
            yield
        finally:
            self.resume()

    def check(self) -> Optional[str]:
        """Looks at the clock once: where the current step is stuck, writes the stacks and
        the line and exits (``exit``); returns the line then, else None."""
        with self._lock:
            if self.rule is None or self._since is None or self.fired is not None:
                return None
            elapsed = self._clock() - self._since
            counted = list(self._counted)
            if not self.rule.is_stuck(counted, elapsed):
                return None
            self.fired = "firing"
        return self._fire(elapsed, counted)

    def _watch(self) -> None:
        """The thread: checks every ``interval`` seconds until stopped."""
        while not self._stop.wait(self.interval):
            self.check()

    def _fire(self, elapsed: float, counted: List[float]) -> str:
        """Writes the stacks and the line, waits ``grace`` where this worker only waits, and
        exits; returns the line."""
        self._backstop.cancel()  # this thread runs: the backstop is not needed here
        out = self._stream or sys.stderr
        site = _own_site()
        line = self._line(elapsed, counted, site)
        self.fired = line
        _dump_stacks(out)
        out.write(line + "\n")
        out.flush()
        if site.verdict == WAITING and self.grace_for(counted) > 0:
            time.sleep(self.grace_for(counted))
        self._exit(EXIT_STATUS)
        return line

    def grace_for(self, counted: List[float]) -> float:
        """Returns the seconds a worker that only waits gives a stuck peer: the grace given,
        else past the peer's backstop (its margin after this step's limit) by GRACE."""
        if self.grace is not None:
            return self.grace
        assert self.rule is not None
        return margin(self.rule.limit(counted)) + GRACE

    def _line(self, elapsed: float, counted: List[float], site: Site) -> str:
        """Returns the one line for a stuck step."""
        assert self.rule is not None
        window = counted[-self.rule.window:]
        limit = self.rule.limit(counted)
        who = self.name or worker_name(self.resolver, self._environ)
        grace = self.grace_for(counted)
        when = (f"in {grace:g} s (a stuck peer writes its stacks and ends first)"
                if site.verdict == WAITING and grace > 0 else "now")
        if window:
            why = (f"({self.rule.factor:g} x the median step {median(window):.3g} s over "
                   f"{len(window)} steps, at least {self.rule.minimum:g} s)")
        else:
            why = (f"(no step timed yet: the start bound, {START_VARIABLE}, a rendezvous or a "
                   "first step that never came)")
        return (f"mpi_resolver: step watchdog: {who}: step {self.steps + 1} has run "
                f"{elapsed:.2f} s, past its limit of {limit:.2f} s {why}; {site.words}. "
                f"Python stacks above. Exit {EXIT_STATUS} {when}.")


def worker_name(resolver: Any = None, environ: Mapping[str, str] = os.environ) -> str:
    """Returns 'worker:1 (rank 1 on node2, pid 4242)': the task (from ``resolver``, else
    TF_CONFIG's), the rank and node (Slurm's or the MPI launcher's variables) and the PID;
    the parts it cannot tell are left out."""
    task = _task(resolver, environ)
    rank = next((environ[v] for v in _RANKS if environ.get(v)), None)
    node = environ.get("SLURMD_NODENAME") or socket.gethostname()
    where = f"rank {rank} on {node}" if rank is not None else f"on {node}"
    return f"{task + ' ' if task else ''}({where}, pid {os.getpid()})"


def _task(resolver: Any, environ: Mapping[str, str]) -> Optional[str]:
    """Returns 'worker:1' from the resolver's task, else from TF_CONFIG; None if neither."""
    kind = getattr(resolver, "task_type", None)
    index = getattr(resolver, "task_id", None)
    if kind is None and environ.get("TF_CONFIG"):
        try:
            task = json.loads(environ["TF_CONFIG"]).get("task", {})
            kind, index = task.get("type"), task.get("index")
        except (ValueError, AttributeError):
            return None
    return f"{kind}:{index}" if kind is not None and index is not None else None


def _own_site() -> Site:
    """Returns where this process is (hang_site) from its threads' stacks, this one's left
    out."""
    frames = sys._current_frames()
    main = threading.main_thread().ident
    here = threading.get_ident()
    stacks = {ident: [(f.filename, f.lineno or 0, f.name) for f in traceback.extract_stack(top)]
              for ident, top in frames.items() if ident != here}
    library = [sysconfig.get_paths()[k] for k in ("stdlib", "platstdlib")]
    own: List[Frame] = stacks.pop(main, []) if main is not None else []
    return hang_site(own, list(stacks.values()), library)


def _dump_stacks(out: TextIO) -> None:
    """Writes every thread's Python stack to ``out``: faulthandler's where it has a file
    descriptor, else traceback's."""
    out.flush()
    try:
        faulthandler.dump_traceback(file=out, all_threads=True)
        return
    except (ValueError, AttributeError, io.UnsupportedOperation):
        pass
    for ident, top in sys._current_frames().items():
        out.write(f"Thread 0x{ident:016x} (most recent call last):\n")
        out.write("".join(traceback.format_stack(top)))
