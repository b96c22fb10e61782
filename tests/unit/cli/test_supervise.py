"""mpi-resolver supervise without Slurm: a stand-in `srun` (a shell script that prints srun's
report lines, measured with Slurm 22.05.8) run for real as supervise's step, supervise in a
process of its own; real srun and mpirun runs are in tests/cluster/test_supervise.py."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Dict, List, Sequence

import pytest

from mpi_resolver.cli.args import parse_args

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[3]
PREFIX = "mpi-resolver supervise: "
#: srun's stand-in: run N (1, 2, ...) prints $REPORT_N to stderr and exits $EXIT_N (0 where
#: unset); every run's command line goes to runs.txt.
SRUN = """#!/bin/sh
here=$(dirname "$0")
echo "$*" >> "$here/runs.txt"
n=$(wc -l < "$here/runs.txt" | tr -d ' ')
eval "report=\\${REPORT_$n:-}; code=\\${EXIT_$n:-0}"
echo "out of run $n"
[ -n "$report" ] && printf '%s\\n' "$report" >&2
exit "$code"
"""
KILLED = "srun: error: node2: task 1: Killed"
NO_JOB = (r"the step asks to run again; SLURM_JOB_ID=None: not in a Slurm job, so no job is "
          r"requeued: exit 75")
EXIT3 = "srun: error: node1: task 0: Exited with exit code 3"


def env(**extra: str) -> Dict[str, str]:
    keep = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "PMI"))}
    return {**keep, "PYTHONPATH": str(ROOT), **extra}


@pytest.fixture
def srun(tmp_path: Path) -> Path:
    script = tmp_path / "srun"
    script.write_text(SRUN)
    script.chmod(0o755)
    return script


def supervise(args: Sequence[str], timeout: float = 60, **extra: str):
    return subprocess.run([sys.executable, "-m", "mpi_resolver", "supervise", *args],
                          capture_output=True, timeout=timeout, env=env(**extra))


def said(stderr: bytes) -> List[str]:
    return [ln[len(PREFIX):] for ln in stderr.decode().splitlines() if ln.startswith(PREFIX)]


def runs(srun: Path) -> List[str]:
    path = srun.parent / "runs.txt"
    return path.read_text().splitlines() if path.exists() else []


def test_the_step_s_output_passes_through_unchanged_and_a_normal_end_says_nothing():
    program = ("import os; os.write(1, b'out\\r\\nline 2'); os.write(2, b'err \\xff\\n');"
               "os.write(2, b'no newline')")
    proc = supervise(["--", sys.executable, "-c", program])
    assert proc.returncode == 0
    assert proc.stdout == b"out\r\nline 2"
    assert proc.stderr == b"err \xff\nno newline"


@pytest.mark.parametrize("max_restarts, extra, status, runs_done, lines", [
    pytest.param("3", {"REPORT_1": KILLED, "EXIT_1": "143"}, 0, 2, [
        r"task 1 on node2: Killed \(signal 9\), \d+\.\d s into the run; restart 1 of 3",
        r"the step completed after 1 restart"], id="a killed task, then a normal end"),
    pytest.param("2", {f"REPORT_{n}": EXIT3 for n in (1, 2, 3)} | {
        f"EXIT_{n}": "143" for n in (1, 2, 3)}, 3, 3, [
        r"task 0 on node1: Exited with exit code 3, .* restart 1 of 2",
        r"task 0 on node1: Exited with exit code 3, .* restart 2 of 2",
        r"task 0 on node1: Exited with exit code 3, \d+\.\d s into the run; its 2 restarts are "
        r"used up \(--max-restarts 2\): exit 3"], id="restarts used up: the task's exit code"),
    pytest.param("0", {"REPORT_1": KILLED, "EXIT_1": "137"}, 137, 1, [
        r"task 1 on node2: Killed .*its 0 restarts are used up \(--max-restarts 0\): exit 137"],
        id="--max-restarts 0"),
    pytest.param("1", {"EXIT_1": "1", "EXIT_2": "1"}, 1, 2, [
        r"srun exited 1, .*restart 1 of 1", r"srun exited 1, .*its 1 restart is used up"],
        id="no task named: srun's own status"),
    pytest.param("3", {"REPORT_1": "srun: error: node2: task 1: Exited with exit code 75",
                       "EXIT_1": "143"}, 75, 1, [
        r"task 1 on node2: Exited with exit code 75: the checkpoint is saved and the job is "
        r"to run again \(not restarted here\)", NO_JOB], id="exit 75 from a task: never restarted"),
    pytest.param("3", {"EXIT_1": "75"}, 75, 1, [r"srun exited 75: the checkpoint is saved",
                                                NO_JOB], id="exit 75 from srun"),
    pytest.param("3", {"REPORT_1": "srun: error: node1: task 0: Terminated",
                       "EXIT_1": "143"}, 143, 1, [
        r"the job is ending \(task 0 on node1: Terminated \(signal 15\)\): not restarted: "
        r"exit 143"], id="a task ended by SIGTERM: the job's end"),
])
def test_restarts(srun: Path, max_restarts: str, extra: Dict[str, str], status: int,
                  runs_done: int, lines: List[str]) -> None:
    proc = supervise(["--max-restarts", max_restarts, "--", str(srun), "-N2", "x"], **extra)
    assert proc.returncode == status, proc.stderr
    assert len(runs(srun)) == runs_done
    assert proc.stdout.decode().splitlines() == [f"out of run {n}" for n in
                                                 range(1, runs_done + 1)]
    got = said(proc.stderr)
    assert len(got) == len(lines), got
    for line, pattern in zip(got, lines, strict=True):
        assert re.match(pattern, line), (line, pattern)


LEFT = "node2 failed 2 times: the next run leaves it out (--exclude={}; the job has {} more " \
       "than the step)"


@pytest.mark.parametrize("job_nodes, command, last, left", [
    pytest.param("3", ["-N2", "x"], "-N2 --exclude=node2 x", [LEFT.format("node2", "1 node")],
                 id="a spare node: left out"),
    pytest.param("2", ["-N2", "x"], "-N2 x", [], id="no spare node"),
    pytest.param("3", ["x"], "x", [], id="no -N: the step takes every node"),
    pytest.param("5", ["-x", "node9", "-N2", "x"], "-x node9 -N2 --exclude=node9,node2 x",
                 [LEFT.format("node9,node2", "2 nodes")], id="its own --exclude kept"),
])
def test_a_node_that_failed_twice_is_left_out_where_the_job_has_a_spare(
        srun: Path, job_nodes: str, command: List[str], last: str, left: List[str]) -> None:
    extra = {"SLURM_JOB_NUM_NODES": job_nodes, "REPORT_1": KILLED, "EXIT_1": "143",
             "REPORT_2": KILLED, "EXIT_2": "143"}
    proc = supervise(["--", str(srun), *command], **extra)
    assert proc.returncode == 0, proc.stderr
    done = runs(srun)
    assert done[:2] == [" ".join(command)] * 2 and done[2] == last
    assert [ln for ln in said(proc.stderr) if "leaves it out" in ln] == left


STUBBORN = """import signal, sys, time
def term(*_):
    print("step got SIGTERM", flush=True)
    if {exits}:
        sys.exit(143)
signal.signal(signal.SIGTERM, term)
print("step started", flush=True)
time.sleep(60)
"""


@pytest.mark.parametrize("exits, stop, status, lines", [
    # a step that exits on SIGTERM gets 10 s: 1 s was not enough once under a load of 10 on
    # 2 cores (it was killed, 137, before its exit)
    (True, 10.0, 143, ["the job is ending (SIGTERM came to supervise): not restarted: exit 143"]),
    (False, 1.0, 137, ["the step did not end within 1 s of SIGTERM: killed (SIGKILL)",
                       "the job is ending (SIGTERM came to supervise): not restarted: exit 137"]),
])
def test_sigterm_is_passed_on_and_never_restarted(exits: bool, stop: float, status: int,
                                                  lines: List[str]) -> None:
    code = ("import sys; from mpi_resolver.cli.supervise import supervise; "
            f"sys.exit(supervise(sys.argv[1:], 3, stop_timeout={stop}))")
    proc = subprocess.Popen([sys.executable, "-c", code, sys.executable, "-c",
                             STUBBORN.format(exits=exits)], env=env(), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    assert proc.stdout is not None
    assert proc.stdout.readline() == b"step started\n"
    started = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == status, err
    assert out == b"step got SIGTERM\n"
    assert said(err) == lines
    assert time.monotonic() - started < 10


def test_warning_signals_and_sigint_do_not_end_supervise_or_reach_the_step() -> None:
    code = ("import sys; from mpi_resolver.cli.supervise import supervise; "
            "sys.exit(supervise(sys.argv[1:], 3))")
    step = ("import signal, sys, time\n"
            "for s in (signal.SIGUSR1, signal.SIGUSR2, signal.SIGINT):\n"
            "    signal.signal(s, lambda n, f: print('step got', n, flush=True))\n"
            "print('step started', flush=True); time.sleep(1.5)")
    proc = subprocess.Popen([sys.executable, "-c", code, sys.executable, "-c", step],
                            env=env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None
    assert proc.stdout.readline() == b"step started\n"
    for sig in (signal.SIGUSR1, signal.SIGUSR2, signal.SIGINT):
        proc.send_signal(sig)
    out, err = proc.communicate(timeout=30)
    assert out == b""  # nothing passed on
    assert proc.returncode == 0 and said(err) == [], err  # SIGINT: a stop, yet exit 0


def test_a_command_that_cannot_run_is_an_error_not_a_restart(tmp_path: Path) -> None:
    proc = supervise(["--", str(tmp_path / "no-such-srun")])
    assert proc.returncode == 2
    assert said(proc.stderr) == [f"error: supervise could not run "
                                 f"'{tmp_path / 'no-such-srun'}': No such file or directory; "
                                 "check the command's name and PATH."]


def test_supervise_imports_neither_mpi4py_nor_tensorflow() -> None:
    code = ("import sys; from mpi_resolver.cli.main import main; status = main(['supervise', "
            "'--', 'true']); print(status, 'mpi4py' in sys.modules, 'tensorflow' in "
            "sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=env(), timeout=60)
    assert out.stdout.split() == ["0", "False", "False"], out.stderr


@pytest.mark.parametrize("argv, step, max_restarts", [
    (["supervise", "--", "srun", "-N2", "python", "t.py"], ["srun", "-N2", "python", "t.py"],
     3),
    (["supervise", "srun", "-x", "n1"], ["srun", "-x", "n1"], 3),
    (["supervise", "--max-restarts", "0", "--", "mpirun", "-n", "2"], ["mpirun", "-n", "2"],
     0),
    (["supervise", "--max-restarts=1", "--", "srun", "--max-restarts", "9"],
     ["srun", "--max-restarts", "9"], 1),
])
def test_arguments(argv: List[str], step: List[str], max_restarts: int) -> None:
    args = parse_args(argv)
    assert (args.step, args.max_restarts) == (step, max_restarts)


@pytest.mark.parametrize("argv, message", [
    (["supervise"], "supervise needs a command: mpi-resolver supervise [--max-restarts N] -- "),
    (["supervise", "--"], "supervise needs a command"),
    (["supervise", "--max-restarts", "2", "--"], "supervise needs a command"),
    (["supervise", "--max-restarts", "-1", "--", "srun"],
     "--max-restarts '-1': expected a whole number of restarts, 0 or more: --max-restarts 3 "
     "(the default), 0 (never)"),
    (["supervise", "--max-restarts", "two", "--", "srun"], "--max-restarts 'two': expected"),
    (["supervise", "--max-restarts", "1.5", "--", "srun"], "--max-restarts '1.5': expected"),
])
def test_usage_errors_are_argparse_s_exit_2(argv: List[str], message: str,
                                            capsys: pytest.CaptureFixture) -> None:
    with pytest.raises(SystemExit) as info:
        parse_args(argv)
    assert info.value.code == 2
    assert message in " ".join(capsys.readouterr().err.split())


#: scontrol's stand-in: records each call's arguments in calls.txt; `show job` prints
#: $JOB_LINE, `requeue` answers $REQUEUE_OUT with exit $REQUEUE_EXIT.
SCONTROL = """#!/bin/sh
echo "$*" >> "$(dirname "$0")/calls.txt"
case "$1" in
  show) echo "$JOB_LINE" ;;
  requeue) [ -n "$REQUEUE_OUT" ] && echo "$REQUEUE_OUT" >&2; exit "${REQUEUE_EXIT:-0}" ;;
esac
"""
#: A step that says whether supervise marked it, then ends 75 at once, or on SIGTERM (its
#: handler in place before it says anything: the test signals once it has).
STEP_75 = """import os, signal, sys, time
signal.signal(signal.SIGTERM, lambda *_: sys.exit(75))
print("supervised:", os.environ.get("MPI_RESOLVER_SUPERVISED"), flush=True)
if {wait}:
    time.sleep(60)
sys.exit(75)
"""
TIME_LIMIT = "JobId=12 JobState=RUNNING Reason=TimeLimit Restarts=0"
CANCELLED = "JobId=12 JobState=CANCELLED Reason=None Restarts=0"


@pytest.mark.parametrize("sigterm, job_line, requeue_exit, status, calls, line", [
    pytest.param(False, CANCELLED, "0", 75, ["requeue 12"],
                 "requeued job 12 (scontrol requeue 12): exit 75",
                 id="the warning signal's save: requeued, nothing asked"),
    pytest.param(True, TIME_LIMIT, "0", 75, ["show job -o 12", "requeue 12"],
                 "requeued job 12 (scontrol requeue 12): exit 75", id="the time limit"),
    pytest.param(True, CANCELLED, "0", 143, ["show job -o 12"],
                 "job 12 is not requeued: Slurm ends the job (scancel, or Slurm's requeue or "
                 "preemption, which requeues it itself): exit 143", id="scancel"),
    pytest.param(False, CANCELLED, "1", 75, ["requeue 12"],
                 "scontrol requeue 12 failed (exit 1: Invalid job id specified): exit 75",
                 id="a requeue that fails: the fix alone, no fallback"),
])
def test_supervise_requeues_after_75(tmp_path: Path, sigterm: bool, job_line: str,
                                     requeue_exit: str, status: int, calls: List[str],
                                     line: str) -> None:
    """The step's 75 asks to run again: supervise requeues the job itself (the step marked
    MPI_RESOLVER_SUPERVISED=1 runs no scontrol), asking scontrol why only where SIGTERM came
    to supervise too."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "scontrol").write_text(SCONTROL)
    (bin_dir / "scontrol").chmod(0o755)
    extra = {"PATH": f"{bin_dir}:{os.environ['PATH']}", "SLURM_JOB_ID": "12",
             "JOB_LINE": job_line, "REQUEUE_EXIT": requeue_exit,
             "REQUEUE_OUT": "Invalid job id specified" if requeue_exit != "0" else ""}
    proc = subprocess.Popen([sys.executable, "-m", "mpi_resolver", "supervise", "--",
                             sys.executable, "-c", STEP_75.format(wait=sigterm)],
                            env=env(**extra), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None
    assert proc.stdout.readline() == b"supervised: 1\n"
    if sigterm:
        proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == status, err
    assert (bin_dir / "calls.txt").read_text().splitlines() == calls
    assert said(err)[-1] == line
