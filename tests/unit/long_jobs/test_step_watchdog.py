"""long_jobs.step_watchdog: the watchdog's clock with a fake clock (warm-up, ticks, pauses,
arming), its line, and real runs: a thread in this process, and child processes whose step
hangs (their stacks on stderr, the line, exit 124), with a stand-in TensorFlow for the cases
where the main thread waits inside TensorFlow's step."""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Optional

import pytest

from mpi_resolver.core.errors import FormatError, ResolutionError
from mpi_resolver.long_jobs import step_watchdog
from mpi_resolver.long_jobs.hang_site import WAITING, Site
from mpi_resolver.long_jobs.step_watchdog import StepWatchdog, worker_name
from mpi_resolver.long_jobs.watchdog import FACTOR_VARIABLE, MINIMUM_VARIABLE, StepRule

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[3]
NAME = "worker:1 (rank 1 on node2, pid 7)"


class Clock:
    """A clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Exits(list):
    """Records the exit statuses asked for instead of exiting."""

    def __call__(self, status: int) -> None:
        self.append(status)


def watchdog(clock: Clock, exits: Exits, **options) -> StepWatchdog:
    """A watchdog with k = 4, T = 3 s, 2 warm-up steps, a window of 3, S = 60 s; no thread
    runs it."""
    options = {"factor": 4, "minimum": 3, "warmup": 2, "window": 3, "start_timeout": 60,
               "name": NAME,
               "interval": 3600.0, "grace": 0.0, "stream": io.StringIO(), "clock": clock,
               "exit": exits, "environ": {}, **options}
    return StepWatchdog(**options)


def check_from_a_thread(w: StepWatchdog):
    """Returns w.check() run from another thread, as the watchdog's own (the main thread
    waits here meanwhile, in this file)."""
    out = []
    t = threading.Thread(target=lambda: out.append(w.check()))
    t.start()
    t.join()
    return out[0]


@pytest.mark.parametrize("durations, elapsed, fires", [
    # before a median: the start bound S (a rendezvous, a first step that never came)
    pytest.param([], 60.0, False, id="first-step-exactly-S"),
    pytest.param([], 60.5, True, id="first-step-over-S"),
    pytest.param([59.0], 60.0, False, id="second-step-warm-up-exactly-S"),
    pytest.param([59.0], 60.5, True, id="second-step-warm-up-over-S"),
    pytest.param([59.0, 59.0], 60.5, True, id="after-warm-up-nothing-counted-yet-over-S"),
    pytest.param([50.0, 50.0, 1.0], 4.0, False, id="exactly-k-x-median"),
    pytest.param([50.0, 50.0, 1.0], 4.5, True, id="over-k-x-median"),
    pytest.param([50.0, 50.0, 0.5], 3.0, False, id="exactly-T"),
    pytest.param([50.0, 50.0, 0.5], 3.5, True, id="over-T"),
    pytest.param([0.1, 0.1, 1, 1, 1, 9, 9, 9], 36.0, False, id="the-window-moved-on"),
    pytest.param([0.1, 0.1, 1, 1, 1, 9, 9, 9], 36.5, True, id="the-window-moved-on-over"),
])
def test_when_it_fires(durations, elapsed, fires):
    clock, exits = Clock(), Exits()
    w = watchdog(clock, exits).start()
    for d in durations:
        clock.now += d
        w.tick()
    clock.now += elapsed
    line = check_from_a_thread(w)
    assert (line is not None, exits) == (fires, [124] if fires else [])
    assert w.steps == len(durations)


def test_the_line_and_the_stacks():
    clock, exits = Clock(), Exits()
    w = watchdog(clock, exits)
    w.start()
    for d in (9.0, 9.0, 1.0):
        clock.now += d
        w.tick()
    clock.now += 4.25
    line = check_from_a_thread(w)
    assert re.fullmatch(
        r"mpi_resolver: step watchdog: worker:1 \(rank 1 on node2, pid 7\): step 4 has run "
        r"4\.25 s, past its limit of 4\.00 s \(4 x the median step 1 s over 1 steps, at least "
        r"3 s\); stuck in \S+/tests/unit/long_jobs/test_step_watchdog\.py:\d+ "
        r"check_from_a_thread\. Python stacks above\. Exit 124 now\.", line), line
    text = w._stream.getvalue()
    assert text.endswith(line + "\n") and w.fired == line
    assert "Thread 0x" in text and 'test_step_watchdog.py", line' in text, text
    assert "in check_from_a_thread" in text and "in _fire" in text, text
    assert check_from_a_thread(w) is None and exits == [124]  # once only


def test_a_waiting_worker_gives_its_peers_the_grace(monkeypatch):
    site = Site(WAITING, None, "in TensorFlow's step (x.py:1 f): waiting")
    monkeypatch.setattr(step_watchdog, "_own_site", lambda: site)
    clock, exits = Clock(), Exits()
    w = watchdog(clock, exits, grace=0.3, warmup=0).start()
    clock.now += 1
    w.tick()
    clock.now += 10
    began = time.monotonic()
    line = w.check()
    assert time.monotonic() - began >= 0.3 and exits == [124]
    assert line.endswith("; in TensorFlow's step (x.py:1 f): waiting. Python stacks above. "
                         "Exit 124 in 0.3 s (a stuck peer writes its stacks and ends first).")


def test_without_a_grace_given_a_waiting_worker_outlasts_its_peer_s_backstop():
    clock, exits = Clock(), Exits()
    w = watchdog(clock, exits, grace=None)
    assert w.grace_for([]) == 15.0  # the backstop's margin (10 s at least) + 5 s
    assert w.grace_for([1000.0]) == 400.0 + 5.0  # a tenth of the 4000-s limit + 5 s


def test_the_start_bound_s_line_says_no_step_was_timed():
    clock, exits = Clock(), Exits()
    w = watchdog(clock, exits).start()
    clock.now += 61.0
    line = check_from_a_thread(w)
    assert ("step 1 has run 61.00 s, past its limit of 60.00 s (no step timed yet: the start "
            "bound, MPI_RESOLVER_START_TIMEOUT, a rendezvous or a first step that never "
            "came); stuck in") in line


def test_paused_steps_are_not_watched_and_the_clock_starts_again_after():
    clock, exits = Clock(), Exits()
    w = watchdog(clock, exits, warmup=0).start()
    clock.now += 1
    w.tick()
    with w.paused():
        clock.now += 1000
        assert check_from_a_thread(w) is None
    clock.now += 4.0
    assert check_from_a_thread(w) is None
    clock.now += 0.5
    assert check_from_a_thread(w) is not None and exits == [124]


def test_unarmed_it_neither_counts_nor_fires():
    clock, exits = Clock(), Exits()
    w = watchdog(clock, exits, warmup=0)
    w.tick()
    w.resume()
    clock.now += 1e6
    assert (w.check(), w.steps) == (None, 0)
    w.start()
    clock.now += 1
    w.tick()
    w.stop()
    w.tick()
    w.resume()
    clock.now += 1e6
    assert (w.check(), w.steps, exits) == (None, 1, [])


def test_arming_twice_is_an_error_and_stop_arms_again():
    w = watchdog(Clock(), Exits(), interval=0.01)
    with w:
        assert w._thread is not None and w._thread.is_alive()
        with pytest.raises(ResolutionError, match=r"armed already; call stop\(\) first"):
            w.start()
    assert w._thread is None
    w.stop()  # twice is fine
    thread_count = threading.active_count()
    with w:
        assert threading.active_count() == thread_count + 1
    assert threading.active_count() == thread_count


def test_off_runs_no_thread_and_never_fires():
    clock, exits = Clock(), Exits()
    w = watchdog(clock, exits, factor="off", warmup=0).start()
    assert w.rule is None and w._thread is None
    for _ in range(3):
        clock.now += 1
        w.tick()
    clock.now += 1e6
    assert (w.check(), w.steps, exits) == (None, 3, [])
    w.stop()


@pytest.mark.parametrize("environ, factor, minimum", [
    ({}, 10.0, 300.0),
    ({FACTOR_VARIABLE: "3", MINIMUM_VARIABLE: "2m"}, 3.0, 120.0),
])
def test_the_variables_where_no_argument_is_given(environ, factor, minimum):
    w = StepWatchdog(environ=environ)
    assert w.rule == StepRule(factor=factor, minimum=minimum)


def test_a_bad_variable_fails_at_construction_naming_it(monkeypatch):
    monkeypatch.setenv(MINIMUM_VARIABLE, "ten")
    with pytest.raises(FormatError, match=r"^MPI_RESOLVER_STEP_TIMEOUT_MIN='ten': expected"):
        StepWatchdog()


#: A script that uses the watchdog alone (no LongJob, no SlurmTerminationConfig before it).
ALONE = """from mpi_resolver.long_jobs.step_watchdog import StepWatchdog
import atexit
atexit.register(lambda: print("at exit", flush=True))
with StepWatchdog({arguments}):
    print("trained", flush=True)
"""


@pytest.mark.parametrize("variable, value, status, message", [
    ("MPI_RESOLVER_START_TIMEOUT", "soon", 78,
     "MPI_RESOLVER_START_TIMEOUT='soon': expected the seconds the first step may take"),
    (MINIMUM_VARIABLE, "ten", 78, "MPI_RESOLVER_STEP_TIMEOUT_MIN='ten': expected a duration"),
    (FACTOR_VARIABLE, "0.5", 78,
     "MPI_RESOLVER_STEP_TIMEOUT_FACTOR='0.5': expected a number of at least 1"),
    ("MPI_RESOLVER_START_TIMEOUT", "30m", 0, None),
])
def test_a_bad_variable_ends_the_watchdog_s_process_with_78(variable: str, value: str,
                                                            status: int,
                                                            message: Optional[str]) -> None:
    """A configuration error: 78 (EX_CONFIG), which supervise never restarts, not Python's
    1 (a crash, restarted), with the traceback's last line naming the variable."""
    environ = {k: v for k, v in os.environ.items() if not k.startswith("MPI_RESOLVER_")}
    proc = subprocess.run([sys.executable, "-c", ALONE.format(arguments="")],
                          capture_output=True, text=True, timeout=60,
                          env={**environ, "PYTHONPATH": str(ROOT), variable: value})
    assert proc.returncode == status, proc.stderr
    if message is None:
        assert proc.stdout == "trained\nat exit\n" and proc.stderr == ""
        return
    assert proc.stdout == ""  # ended at once: no at-exit handler runs
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith(f"mpi_resolver.core.errors.VariableError: {message}"), proc.stderr


@pytest.mark.parametrize("arguments, status, message", [
    ("minimum='soon'", 78, "SettingError: minimum='soon': expected a duration"),
    ("start_timeout=-1", 78, "SettingError: start_timeout=-1: expected the seconds"),
    ("factor=20, minimum='5m'", 0, None),
])
def test_a_bad_argument_ends_the_watchdog_s_process_with_78(arguments: str, status: int,
                                                            message: Optional[str]) -> None:
    """The script's own argument: the same on every run, so 78 as well, not a crash."""
    environ = {k: v for k, v in os.environ.items() if not k.startswith("MPI_RESOLVER_")}
    proc = subprocess.run([sys.executable, "-c", ALONE.format(arguments=arguments)],
                          capture_output=True, text=True, timeout=60,
                          env={**environ, "PYTHONPATH": str(ROOT)})
    assert proc.returncode == status, proc.stderr
    if message is not None:
        last = proc.stderr.strip().splitlines()[-1]
        assert last.startswith(f"mpi_resolver.core.errors.{message}"), proc.stderr


class Resolver:
    task_type, task_id = "worker", 1


TF_CONFIG = json.dumps({"cluster": {}, "task": {"type": "chief", "index": 0}})


@pytest.mark.parametrize("resolver, environ, name", [
    (Resolver(), {"SLURM_PROCID": "1", "SLURMD_NODENAME": "node2"}, "worker:1 (rank 1 on node2"),
    (None, {"PMIX_RANK": "3", "SLURMD_NODENAME": "n9"}, "(rank 3 on n9"),
    (None, {"OMPI_COMM_WORLD_RANK": "2", "TF_CONFIG": TF_CONFIG, "SLURMD_NODENAME": "a"},
     "chief:0 (rank 2 on a"),
    (Resolver(), {"PMI_RANK": "0", "TF_CONFIG": TF_CONFIG, "SLURMD_NODENAME": "b"},
     "worker:1 (rank 0 on b"),
    (None, {"SLURM_PROCID": "", "PMI_RANK": "5", "SLURMD_NODENAME": "c"}, "(rank 5 on c"),
    (None, {"TF_CONFIG": "{not json", "SLURMD_NODENAME": "d"}, "(on d"),
    (None, {"TF_CONFIG": "[1]", "SLURMD_NODENAME": "d"}, "(on d"),
    (None, {"TF_CONFIG": '{"task": {"type": "worker"}}', "SLURMD_NODENAME": "d"}, "(on d"),
    (None, {}, f"(on {os.uname().nodename}"),
])
def test_worker_name(resolver, environ, name):
    assert worker_name(resolver, environ) == f"{name}, pid {os.getpid()})"


def test_a_real_thread_fires_within_its_interval():
    fired = threading.Event()
    exits = Exits()

    def exit(status: int) -> None:
        exits.append(status)
        fired.set()

    w = StepWatchdog(factor=2, minimum=0.3, warmup=1, interval=0.02, grace=0, name="w",
                     stream=io.StringIO(), exit=exit, environ={})
    with w:
        for _ in range(3):
            time.sleep(0.01)
            w.tick()
        hung = time.monotonic()
        assert fired.wait(5)
        took = time.monotonic() - hung
    assert exits == [124] and 0.3 <= took < 3.0, took  # 3: a loaded 2-core machine


#: The child: a few quick steps, then a step that hangs where argv[1] says.
CHILD = """
import sys, threading, time
from mpi_resolver.long_jobs.step_watchdog import StepWatchdog

def hang_forever():
    threading.Event().wait()

def endless():
    yield 1
    hang_forever()

watchdog = StepWatchdog(factor=2, minimum=0.5, warmup=1, interval=0.05, grace=1.0,
                        name="worker:1 (test)").start()
for _ in range(3):
    time.sleep(0.01)
    watchdog.tick()
print("hangs now", flush=True)
if sys.argv[1] == "own-code":
    hang_forever()
from tensorflow.python.eager import execute  # the stand-in below
if sys.argv[1] == "generator":
    from tensorflow.python.ops import script_ops
    threading.Thread(target=script_ops.__call__, args=(lambda: list(endless()),)).start()
execute.quick_execute()
"""
#: A stand-in TensorFlow: the files where the real one waits and runs Python for a graph.
STAND_IN = {"tensorflow/python/eager/execute.py":
            "import threading\n\ndef quick_execute():\n    threading.Event().wait()\n",
            "tensorflow/python/ops/script_ops.py": "def __call__(f):\n    return f()\n"}


@pytest.fixture(scope="module")
def child(tmp_path_factory) -> Path:
    """The child script, beside the stand-in TensorFlow."""
    top = tmp_path_factory.mktemp("hang")
    for name, text in STAND_IN.items():
        (top / name).parent.mkdir(parents=True, exist_ok=True)
        (top / name).write_text(text)
        for folder in Path(name).parents[:-1]:  # packages, or the real one wins
            (top / folder / "__init__.py").touch()
    (top / "child.py").write_text(CHILD)
    return top / "child.py"


HANG = r'child\.py", line 6 in hang_forever'
EXECUTE = r'tensorflow/python/eager/execute\.py", line 4 in quick_execute'


@pytest.mark.parametrize("mode, frames, verdict, grace", [
    pytest.param("own-code", [HANG], r"stuck in \S+child\.py:6 hang_forever", False,
                 id="own-code"),
    pytest.param("tensorflow", [EXECUTE], r"in TensorFlow's step \(\S+/tensorflow/python/eager/"
                 r"execute\.py:4 quick_execute\): waiting for another worker, or busy in "
                 r"TensorFlow; its own stack cannot tell which", True, id="waiting-in-tensorflow"),
    pytest.param("generator", [HANG, EXECUTE], r"stuck in \S+child\.py:6 hang_forever, Python "
                 r"that TensorFlow runs for the step \(a tf\.data generator or a py_function\)",
                 False, id="generator"),
])
def test_a_child_whose_step_hangs_writes_its_stacks_and_exits_124(child, mode, frames, verdict,
                                                                   grace):
    env = {**os.environ, "PYTHONPATH": f"{child.parent}{os.pathsep}{ROOT}"}
    began = time.monotonic()
    p = subprocess.run([sys.executable, str(child), mode], env=env, capture_output=True,
                       text=True, timeout=30)
    took = time.monotonic() - began
    assert p.returncode == 124, p.stderr
    assert p.stdout == "hangs now\n"
    lines = p.stderr.splitlines()
    assert re.fullmatch(r"(Current thread|Thread) 0x[0-9a-f]+ \(most recent call first\):",
                        lines[0]), p.stderr
    for frame in frames:
        assert re.search(r'^  File "\S+' + frame + "$", p.stderr, re.M), p.stderr
    said = re.fullmatch(
        # The step's and the median's times are measured: the machine's load moves them
        # (mutmut's tracing made the median 0.036 s; 10-ms steps took 0.47 s at nice 19 under
        # a load average of 30): the limit is 2 x the median, at least 0.5 s.
        r"mpi_resolver: step watchdog: worker:1 \(test\): step 4 has run (\d+\.\d\d) s, past "
        r"its limit of (\d+\.\d\d) s \(2 x the median step (\d+\.\d+) s over 2 steps, at least "
        r"0\.5 s\); " + verdict + r"\. Python stacks above\. Exit 124 "
        + (r"in 1 s \(a stuck peer writes its stacks and ends first\)" if grace else "now")
        + r"\.",
        lines[-1])
    assert said, lines[-1]
    ran, limit, median = (float(x) for x in said.groups())
    # the limit and the time run printed to 0.01 s (0.5004 s run is "0.50"), the median to 3
    # digits
    assert abs(limit - max(0.5, 2 * median)) <= 0.011 and ran >= limit, lines[-1]
    assert took >= (1.5 if grace else 0.5) and took < 20, took  # "now" or not: the line


#: A child whose first step never comes and whose main thread holds the interpreter lock (a C
#: call through ctypes.PyDLL keeps it): the watchdog's Python thread never runs.
GIL_HELD = """import ctypes, sys, time
from mpi_resolver.long_jobs.step_watchdog import StepWatchdog
w = StepWatchdog(2, 1, start_timeout={start}, name="worker:1 (test)", interval=0.1,
                 environ={{}}).start()
print("started", flush=True)
ctypes.PyDLL(None).sleep(60)
"""


def test_the_backstop_ends_a_process_that_holds_the_interpreter_lock():
    """Where the watchdog's own thread cannot run, faulthandler's timer (no lock needed)
    writes the stacks and ends the process a margin (10 s at least) after the limit, with
    the line supervise's report reads (step_report: the backstop)."""
    from mpi_resolver.long_jobs.step_report import StepReport

    started = time.monotonic()
    proc = subprocess.run([sys.executable, "-c", GIL_HELD.format(start=1.0)],
                          capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    took = time.monotonic() - started
    assert proc.returncode == 1, proc.stderr  # faulthandler's exit
    assert proc.stdout == "started\n"
    report = StepReport()
    for line in proc.stderr.splitlines():
        report.feed(line)
    assert report.backstop and "Timeout (0:00:11)!" in proc.stderr, proc.stderr
    assert "Thread 0x" in proc.stderr and "step watchdog" not in proc.stderr  # no Python line
    assert 11.0 <= took < 40, took


def test_the_backstop_is_cancelled_while_paused_and_stopped(monkeypatch):
    armed = []
    monkeypatch.setattr(step_watchdog.Backstop, "usable", lambda self: True)
    monkeypatch.setattr("faulthandler.dump_traceback_later",
                        lambda seconds, exit, file: armed.append(seconds))
    monkeypatch.setattr("faulthandler.cancel_dump_traceback_later",
                        lambda: armed.append("cancel"))
    clock, exits = Clock(), Exits()
    w = watchdog(clock, exits).start()
    assert armed == [60 + 10]  # the start bound plus the backstop's margin
    w.pause()
    w.resume()
    clock.now += 5
    w.stop()
    assert armed == [70, "cancel", 70, "cancel"]


@pytest.mark.parametrize("limit, margin", [(0.5, 10.0), (100.0, 10.0), (101.0, 10.1),
                                           (300.0, 30.0), (1800.0, 180.0)])
def test_the_backstop_s_margin(limit, margin):
    from mpi_resolver.long_jobs.backstop import margin as backstop_margin

    assert backstop_margin(limit) == pytest.approx(margin)


def test_a_stream_without_a_file_has_no_backstop():
    from mpi_resolver.long_jobs.backstop import Backstop

    assert not Backstop(io.StringIO()).usable() and not Backstop(None).usable()
    assert Backstop(sys.__stderr__).usable()
