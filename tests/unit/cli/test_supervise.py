"""mpi-resolver supervise without Slurm, its edges for real (cli/supervise, cli/step_run,
cli/supervise_requeue): a stand-in `srun` (a shell script that prints srun's report lines,
measured with Slurm 22.05.8, and writes the job's manifest as the tasks would) run as
supervise's step, supervise in a process of its own, a stand-in scontrol on PATH; real srun
and mpirun runs are in tests/cluster/test_supervise.py, real training under supervise in
tests/cluster/test_long_jobs.py, test_periodic_restart.py, test_hang.py and
tests/jax/test_long_jobs.py; supervise's reading of the job's manifest and ledger in
tests/unit/cli/test_supervise_job_files.py."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Dict, List, Optional, Sequence

import pytest

from mpi_resolver.cli.args import parse_args
from mpi_resolver.long_jobs import ledger
from tests.harness import diagnose

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[3]
PREFIX = "mpi-resolver supervise: "
#: srun's stand-in: run N (1, 2, ...) writes $MANIFEST_N into the checkpoint directory (the
#: tasks' progress), prints $REPORT_N to stderr and exits $EXIT_N (0 where unset); every
#: run's command line goes to runs.txt.
SRUN = """#!/bin/sh
here=$(dirname "$0")
echo "$*" >> "$here/runs.txt"
n=$(wc -l < "$here/runs.txt" | tr -d ' ')
eval "report=\\${REPORT_$n:-}; code=\\${EXIT_$n:-0}; manifest=\\${MANIFEST_$n:-}"
[ -n "$manifest" ] && printf '%s' "$manifest" > "$MPI_RESOLVER_CHECKPOINT_DIR/mpi_resolver.json"
echo "out of run $n"
[ -n "$report" ] && printf '%s\\n' "$report" >&2
exit "$code"
"""
KILLED = "srun: error: node2: task 1: Killed"
EXIT3 = "srun: error: node1: task 0: Exited with exit code 3"
NO_DIR = ("MPI_RESOLVER_CHECKPOINT_DIR is not set: supervise cannot see the checkpoints, so "
          "the restarts are bounded by --max-restarts {} alone")
NO_JOB = (r"[^:]*; not requeued: not in a Slurm job \(SLURM_JOB_ID unset\): there is no job to "
          r"requeue: exit 75")


def env(**extra: str) -> Dict[str, str]:
    keep = {k: v for k, v in os.environ.items()
            if not k.startswith(("SLURM_", "PMI", "MPI_RESOLVER_"))}
    return {**keep, "PYTHONPATH": str(ROOT), **extra}


def supervise(args: Sequence[str], timeout: float = 60, **extra: str):
    return subprocess.run([sys.executable, "-m", "mpi_resolver", "supervise", *args],
                          capture_output=True, timeout=timeout, env=env(**extra))


JOB_LINE = re.compile(r"job [^:]+: \d+ runs?, \d+ restarts?.*, \d+ requeues?.*, \d+ steps? "
                      r"lost, ETTR (\d\.\d\d|\?)")


def said(stderr: bytes) -> List[str]:
    """Returns supervise's lines, but for the job's line at its end (job_line)."""
    lines = [ln[len(PREFIX):] for ln in stderr.decode().splitlines() if ln.startswith(PREFIX)]
    return lines[:-1] if lines and JOB_LINE.fullmatch(lines[-1]) else lines


def job_line(stderr: bytes) -> Optional[str]:
    """Returns the job's line supervise said at the job's end, None where it said none."""
    lines = [ln[len(PREFIX):] for ln in stderr.decode().splitlines() if ln.startswith(PREFIX)]
    return lines[-1] if lines and JOB_LINE.fullmatch(lines[-1]) else None


def runs(srun: Path) -> List[str]:
    path = srun.parent / "runs.txt"
    return path.read_text().splitlines() if path.exists() else []


def manifest(step: int, job: str = "12", **more: object) -> str:
    return json.dumps({"job": job, "step": step, **more})


def test_the_step_s_output_passes_through_unchanged_and_a_normal_end_says_the_job(tmp_path):
    program = ("import os; os.write(1, b'out\\r\\nline 2'); os.write(2, b'err \\xff\\n');"
               "os.write(2, b'no newline')")
    proc = supervise(["--", sys.executable, "-c", program],
                     MPI_RESOLVER_CHECKPOINT_DIR=str(tmp_path))
    assert proc.returncode == 0
    assert proc.stdout == b"out\r\nline 2"
    head, said = proc.stderr.split(PREFIX.encode())
    assert head == b"err \xff\nno newline"
    assert re.fullmatch(r"job \(no Slurm job\): 1 run, 0 restarts, 0 requeues, 0 steps lost, "
                        r"ETTR (0\.00|\?)\n", said.decode())


def test_the_job_line_counts_this_supervise_s_runs_alone(tmp_path):
    """Outside Slurm every supervise's runs are job None: the line counts its own."""
    for _ in range(2):
        proc = supervise(["--", sys.executable, "-c", "pass"],
                         MPI_RESOLVER_CHECKPOINT_DIR=str(tmp_path))
        assert proc.returncode == 0
        assert job_line(proc.stderr).startswith("job (no Slurm job): 1 run, 0 restarts")


@pytest.mark.parametrize("max_restarts, extra, status, runs_done, lines", [
    pytest.param("3", {"REPORT_1": KILLED, "EXIT_1": "143"}, 0, 2, [
        r"run 1: task 1 on node2: Killed \(signal 9\), \d+\.\d s into the run: restart 1 of 3",
        r"the step completed after 1 restart"], id="a killed task, then a normal end"),
    pytest.param("2", {f"REPORT_{n}": EXIT3 for n in (1, 2, 3)} | {
        f"EXIT_{n}": "143" for n in (1, 2, 3)}, 3, 3, [
        r"run 1: task 0 on node1: Exited with exit code 3, .*: restart 1 of 2",
        r"run 2: task 0 on node1: Exited with exit code 3, .*: restart 2 of 2",
        r"run 3: task 0 on node1: Exited with exit code 3, \d+\.\d s into the run: the "
        r"restarts are used up \(--max-restarts 2\): exit 3"],
        id="restarts used up: the task's exit code"),
    pytest.param("0", {"REPORT_1": KILLED, "EXIT_1": "137"}, 137, 1, [
        r"run 1: task 1 on node2: Killed .*the restarts are used up \(--max-restarts 0\): "
        r"exit 137"], id="--max-restarts 0"),
    pytest.param("1", {"EXIT_1": "1", "EXIT_2": "1"}, 1, 2, [
        r"run 1: srun exited 1, .*: restart 1 of 1", r"run 2: srun exited 1, .*used up"],
        id="no task named: srun's own status"),
    pytest.param("3", {"REPORT_1": "srun: error: node2: task 1: Exited with exit code 75",
                       "EXIT_1": "143"}, 75, 1, [
        r"run 1: task 1 on node2: Exited with exit code 75, .*: " + NO_JOB],
        id="exit 75 from a task: never restarted, and no job to requeue"),
    pytest.param("3", {"EXIT_1": "75"}, 75, 1, [r"run 1: srun exited 75, .*: " + NO_JOB],
                 id="exit 75 from srun"),
    pytest.param("3", {"REPORT_1": "srun: error: node1: task 0: Terminated",
                       "EXIT_1": "143"}, 143, 1, [
        r"run 1: task 0 on node1: Terminated \(signal 15\), .*: SIGTERM reached the tasks: the "
        r"job is ending: exit 143"], id="a task ended by SIGTERM: the job's end"),
    pytest.param("3", {"REPORT_1": "srun: error: node1: task 0: Exited with exit code 2",
                       "EXIT_1": "143"}, 2, 1, [
        r"run 1: task 0 on node1: Exited with exit code 2, .*: a usage or configuration "
        r"error fails the same way again: not restarted, not requeued: exit 2"],
        id="a usage error: one run"),
    pytest.param("3", {"EXIT_1": "78"}, 78, 1, [r"run 1: srun exited 78, .*: a usage or "
                                                r"configuration error .*: exit 78"],
                 id="a configuration error: one run"),
])
def test_without_a_checkpoint_directory(srun: Path, max_restarts: str, extra: Dict[str, str],
                                        status: int, runs_done: int, lines: List[str]) -> None:
    proc = supervise(["--max-restarts", max_restarts, "--", str(srun), "-N2", "x"], **extra)
    assert proc.returncode == status, proc.stderr
    assert len(runs(srun)) == runs_done
    assert proc.stdout.decode().splitlines() == [f"out of run {n}" for n in
                                                 range(1, runs_done + 1)]
    got = said(proc.stderr)
    assert got[0] == NO_DIR.format(max_restarts)  # said once, first
    assert len(got) == len(lines) + 1, got
    for line, pattern in zip(got[1:], lines, strict=True):
        assert re.match(pattern, line), (line, pattern)


@pytest.mark.parametrize("extra, status, runs_done, last", [
    pytest.param({**{f"REPORT_{n}": KILLED for n in (1, 2, 3, 4)},
                  **{f"EXIT_{n}": "143" for n in (1, 2, 3, 4)},
                  **{f"MANIFEST_{n}": manifest(10 * n) for n in (1, 2, 3, 4)}}, 137, 4,
                 r"run 4: .*advanced to step 40: the restarts are used up", id="progress: 3"),
    pytest.param({**{f"REPORT_{n}": KILLED for n in (1, 2, 3)},
                  **{f"EXIT_{n}": "143" for n in (1, 2, 3)}}, 79, 2,
                 r"run 2: task 1 on node2: Killed \(signal 9\), .*; no checkpoint yet: no "
                 r"progress in the last two runs \(run 1: task 1 on node2: Killed \(signal "
                 r"9\)\): the job stops, not requeued: exit 79", id="a crash loop: two runs"),
    pytest.param({**{f"REPORT_{n}": KILLED for n in (1, 2, 3)},
                  **{f"EXIT_{n}": "143" for n in (1, 2, 3)}, "MANIFEST_1": manifest(40)}, 79, 3,
                 r"run 3: .*; the newest checkpoint is still step 40: no progress in the last "
                 r"two runs \(run 2: ", id="progress, then none twice"),
    pytest.param({"REPORT_1": "srun: error: node2: task 1: Out Of Memory", "EXIT_1": "143",
                  "MANIFEST_1": manifest(200, completed=True)}, 0, 1,
                 r"run 1: task 1 on node2: Out Of Memory, .*; its training completed at step "
                 r"200: nothing is trained again: exit 0", id="killed after training completed"),
    pytest.param({"REPORT_1": "srun: error: node1: task 0: Exited with exit code 74",
                  "EXIT_1": "143"}, 74, 1,
                 r"run 1: .* code 74, .*; no checkpoint yet: the save failed and no checkpoint "
                 r"advanced in this run: not requeued \(a requeue would redo the run and fail "
                 r"the same save\): exit 74", id="a save that fails: no requeue loop"),
])
def test_progress_read_from_the_checkpoint_directory(srun: Path, tmp_path: Path,
                                                     extra: Dict[str, str], status: int,
                                                     runs_done: int, last: str) -> None:
    directory = tmp_path / "ckpt"
    directory.mkdir()
    proc = supervise(["--", str(srun), "x"], MPI_RESOLVER_CHECKPOINT_DIR=str(directory),
                     SLURM_JOB_ID="12", PATH=f"{srun.parent}:{os.environ['PATH']}", **extra)
    assert proc.returncode == status, proc.stderr
    assert len(runs(srun)) == runs_done
    assert re.match(last, said(proc.stderr)[-1]), said(proc.stderr)
    records = ledger.read(str(directory))
    assert [r["event"] for r in records] == ["run_start", "run_end"] * runs_done
    assert [r["run"] for r in records] == [n for n in range(1, runs_done + 1) for _ in "se"]
    assert {r["job"] for r in records} == {"12"}


def test_a_requeued_job_remembers_its_runs(srun: Path, tmp_path: Path) -> None:
    """The ledger carries what a run learnt across the requeue: a new supervise, whose first
    run makes no progress after a run that made none before the requeue, stops at once."""
    directory = tmp_path / "ckpt"
    directory.mkdir()
    ledger.append(str(directory), ledger.RunEnded(
        "12", 1, "killed by a signal", "task 1 on node2: Killed (signal 9)", "node2", True,
        137, 40, 40, "stalled", "requeue").record())
    ledger.append(str(directory), ledger.RunEnded(  # another job's: not this one's history
        "99", 7, "killed by a signal", "x", None, True, 137, 1, 1, "advanced", "end").record())
    (directory / "mpi_resolver.json").write_text(manifest(40))
    proc = supervise(["--", str(srun), "x"], MPI_RESOLVER_CHECKPOINT_DIR=str(directory),
                     SLURM_JOB_ID="12", REPORT_1=KILLED, EXIT_1="143")
    assert proc.returncode == 79, proc.stderr
    assert said(proc.stderr)[-1].startswith("run 2: task 1 on node2: Killed (signal 9)")
    assert job_line(proc.stderr) == ("job 12: 2 runs, 0 restarts, 1 requeue (SIGKILL), 0 steps "
                                     "lost, ETTR ?")


def test_a_job_whose_training_completed_is_not_run_again(srun: Path, tmp_path: Path) -> None:
    directory = tmp_path / "ckpt"
    directory.mkdir()
    (directory / "mpi_resolver.json").write_text(manifest(200, completed=True))
    proc = supervise(["--", str(srun), "x"], MPI_RESOLVER_CHECKPOINT_DIR=str(directory),
                     SLURM_JOB_ID="12")
    assert proc.returncode == 0 and runs(srun) == []
    assert said(proc.stderr) == [f"job 12's training completed at step 200 (its manifest in "
                                 f"{directory}): nothing to run: exit 0"]
    # another job's completed directory: this job trains
    (directory / "mpi_resolver.json").write_text(manifest(200, job="11", completed=True))
    proc = supervise(["--", str(srun), "x"], MPI_RESOLVER_CHECKPOINT_DIR=str(directory),
                     SLURM_JOB_ID="12")
    assert proc.returncode == 0 and len(runs(srun)) == 1


LEFT = ("the next run leaves out node2 (failed twice in this job): the job has {} more than "
        "the step needs")


@pytest.mark.parametrize("job_nodes, command, spare, last, left", [
    pytest.param("3", ["-N2", "x"], "0", "-N2 --exclude=node2 x", [LEFT.format("1 node")],
                 id="a spare node (the step's -N): left out"),
    pytest.param("3", ["x"], "1", "--nodes=2 --exclude=node2 x", [LEFT.format("1 node")],
                 id="--spare-nodes 1: the step's --nodes, then left out"),
    pytest.param("4", ["x"], "2", "--nodes=2 --exclude=node2 x", [LEFT.format("2 nodes")],
                 id="--spare-nodes 2"),
    pytest.param("2", ["-N2", "x"], "0", "-N2 x", [], id="no spare node"),
    pytest.param("3", ["x"], "0", "x", [], id="no -N: the step takes every node"),
    pytest.param("5", ["-x", "node9", "-N2", "x"], "0", "-x node9 -N2 --exclude=node9,node2 x",
                 [LEFT.format("2 nodes")], id="its own --exclude kept"),
])
def test_a_node_that_failed_twice_is_left_out_where_the_job_has_a_spare(
        srun: Path, tmp_path: Path, job_nodes: str, command: List[str], spare: str, last: str,
        left: List[str]) -> None:
    extra = {"SLURM_JOB_NUM_NODES": job_nodes, "REPORT_1": KILLED, "EXIT_1": "143",
             "REPORT_2": KILLED, "EXIT_2": "143", "MPI_RESOLVER_CHECKPOINT_DIR": str(tmp_path),
             "MANIFEST_1": manifest(10), "MANIFEST_2": manifest(20), "SLURM_JOB_ID": "12"}
    proc = supervise(["--spare-nodes", spare, "--", str(srun), *command], **extra)
    assert proc.returncode == 0, proc.stderr
    done = runs(srun)
    first = " ".join(command) if spare == "0" else f"--nodes={int(job_nodes) - int(spare)} x"
    assert done[:2] == [first] * 2 and done[2] == last
    assert [ln for ln in said(proc.stderr) if "leaves out" in ln] == left


@pytest.mark.parametrize("args, extra, message", [
    (["--spare-nodes", "2"], {"SLURM_JOB_NUM_NODES": "2"},
     "error: --spare-nodes '2' (the templates' SPARE_NODES): expected a whole number of nodes, "
     "0 or more and smaller than the job's nodes (SLURM_JOB_NUM_NODES: 2)"),
    (["--spare-nodes", "x"], {"SLURM_JOB_NUM_NODES": "3"}, "error: --spare-nodes 'x'"),
    (["--spare-nodes", "1"], {"SLURM_JOB_NUM_NODES": "3", "CMD_N": "1"},
     "error: --spare-nodes 1 (the templates' SPARE_NODES) and the step's own node options (-N, "
     "--nodelist): give one of them."),
    ([], {"MPI_RESOLVER_SIGNAL": "KILL"},
     "error: MPI_RESOLVER_SIGNAL='KILL': SIGKILL cannot be caught, so it cannot warn of the "
     "end"),
    ([], {"MPI_RESOLVER_SIGNAL": "B:USR1@60"}, "error: MPI_RESOLVER_SIGNAL='B:USR1@60': 'B:'"),
])
def test_bad_settings_are_configuration_errors_naming_them(srun: Path, args: List[str],
                                                           extra: Dict[str, str],
                                                           message: str) -> None:
    extra = dict(extra)  # the table's own dict outlives a run (mutmut runs each test twice)
    command = [str(srun), "-N2", "x"] if extra.pop("CMD_N", None) else [str(srun), "x"]
    proc = supervise([*args, "--", *command], **extra)
    assert proc.returncode == 78, proc.stderr
    assert said(proc.stderr)[-1].startswith(message), said(proc.stderr)
    assert runs(srun) == []


STUBBORN = """import signal, subprocess, sys, time
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
print("grandchild", child.pid, flush=True)
def term(*_):
    print("step got SIGTERM", flush=True)
    if {exits}:
        sys.exit(143)
signal.signal(signal.SIGTERM, term)
print("step started", flush=True)
time.sleep(60)
"""


def finish(proc: subprocess.Popen, timeout: float, look: float) -> tuple[bytes, bytes, str]:
    """Returns supervise's stdout, stderr, and what it and its step were doing ``look`` s
    from now where it ran then (their state, the signals pending and blocked: why a step
    missed the signal passed on to it); fails the test, ending them, past ``timeout`` s."""
    with diagnose.looked_at(proc.pid, look) as seen:
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            for pid in diagnose.descendants(proc.pid) | {proc.pid}:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            out, err = proc.communicate()
            pytest.fail(f"supervise did not end within {timeout} s: {seen}, {err!r}")
    return out, err, "".join(seen)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as f:  # a zombie waits for its parent: it has ended
        return f.read().rsplit(")", 1)[1].split()[0] != "Z"


@pytest.mark.parametrize("exits, stop, status, lines", [
    # a step that exits on SIGTERM gets 10 s: 1 s was not enough once under a load of 10 on
    # 2 cores (it was killed, 137, before its exit); a step that does not exit gets 5 s to say
    # it had the signal: 1 s was not enough once in the mutation test's run of the unit tests
    # beside the suite (killed before its handler ran, its output empty)
    (True, 10.0, 143, [r"SIGTERM \(Slurm ends the job\) came to supervise; run 1: python\S* "
                       r"exited 143 \(128 \+ SIGTERM\), .*: Slurm ends the job .*: exit 143"]),
    (False, 5.0, 137, [r"the step did not end within 5 s of the stop: its process group "
                       r"killed \(SIGKILL\)",
                       r"SIGTERM \(Slurm ends the job\) came to supervise; run 1: python\S* "
                       r"exited 137 \(128 \+ SIGKILL\), .*: exit 143"]),
])
def test_sigterm_is_passed_on_and_never_restarted(exits: bool, stop: float, status: int,
                                                  lines: List[str]) -> None:
    """Slurm's SIGTERM reaches the step; where it does not end, its whole process group is
    killed (mpirun's own ranks too, never mpirun alone); no restart follows."""
    code = ("import sys; from mpi_resolver.cli.supervise import supervise; "
            f"sys.exit(supervise(sys.argv[1:], 3, stop_timeout={stop}))")
    proc = subprocess.Popen([sys.executable, "-c", code, sys.executable, "-c",
                             STUBBORN.format(exits=exits)], env=env(), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    assert proc.stdout is not None
    grandchild = int(proc.stdout.readline().split()[1])
    assert proc.stdout.readline() == b"step started\n"
    started = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    out, err, seen = finish(proc, 30, stop - 0.5)
    assert proc.returncode == 143, (err, seen)  # Slurm ends the job: 143 whatever the step did
    assert out == b"step got SIGTERM\n", (err, seen)
    got = said(err)[1:]  # after the line on the checkpoint directory
    assert len(got) == len(lines), got
    for line, pattern in zip(got, lines, strict=True):
        assert re.match(pattern, line), (line, pattern)
    took = time.monotonic() - started
    assert took < stop + 10 and (exits or took >= stop), took  # killed at the stop, not before
    if not exits:  # the group was killed: the step's own child too
        deadline = time.monotonic() + 5
        while _alive(grandchild) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _alive(grandchild)
    else:  # the step's process group had SIGTERM: its child ends too
        with contextlib.suppress(ProcessLookupError):
            os.kill(grandchild, signal.SIGKILL)


#: A step that notes the user signals and SIGINT, and ends as it is told (its handlers in
#: place before it says it started).
NOTING = """import signal, sys, time
got = []
for s in (signal.SIGUSR1, signal.SIGUSR2, signal.SIGINT):
    signal.signal(s, lambda n, f: (got.append(n), print('step got', n, flush=True)))
print('step started', flush=True)
deadline = time.monotonic() + 3
while time.monotonic() < deadline and not got:
    time.sleep(0.05)
time.sleep(0.5)
sys.exit({code} if signal.SIGUSR1 in got else 0)
"""


def _noting(signals: Sequence[int], code: int = 75, **extra: str):
    script = ("import sys; from mpi_resolver.cli.supervise import supervise; "
              "sys.exit(supervise(sys.argv[1:], 3))")
    proc = subprocess.Popen([sys.executable, "-c", script, sys.executable, "-c",
                             NOTING.format(code=code)], env=env(**extra),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None
    assert proc.stdout.readline() == b"step started\n"
    for sig in signals:
        proc.send_signal(sig)
    out, err = proc.communicate(timeout=30)
    return proc.returncode, out.decode().split("\n"), said(err)[1:]


def test_the_warning_signal_is_passed_on_and_the_job_requeued() -> None:
    """The warning signal that reaches supervise alone (--signal=B:USR1@N, the batch script's
    trap) goes on to the step; the step's save and 75 are then the job's time ending."""
    status, out, lines = _noting([signal.SIGUSR1])
    assert out[0] == f"step got {int(signal.SIGUSR1)}"
    assert status == 75
    assert re.match(r"the warning signal came to supervise; run 1: python\S* exited 75, .*: "
                    + NO_JOB, lines[-1]), lines


def test_a_user_signal_that_is_not_the_warning_is_said_not_passed_on() -> None:
    status, out, lines = _noting([signal.SIGUSR2])
    assert status == 0 and out == [""]  # nothing passed on
    assert lines == ["SIGUSR2 came to supervise, which watches SIGUSR1 (MPI_RESOLVER_SIGNAL): "
                     "not passed on; submit with --signal=B:USR1@N, or set "
                     "MPI_RESOLVER_SIGNAL to that signal"]


def test_the_warning_signal_of_mpi_resolver_signal() -> None:
    status, out, _ = _noting([signal.SIGUSR2], MPI_RESOLVER_SIGNAL="USR2@300")
    assert out[0] == f"step got {int(signal.SIGUSR2)}" and status == 0


def test_sigint_is_passed_on_and_stops_the_job() -> None:
    status, out, lines = _noting([signal.SIGINT])
    assert out[0] == f"step got {int(signal.SIGINT)}"
    # the step itself ended 0: it completed, whatever came
    assert status == 0 and re.match(r"SIGHUP or SIGINT came to supervise; run 1: python\S* "
                                    r"exited 0, .*: the step completed: exit 0", lines[-1]), lines


def test_warned_before_the_step_requeues_without_a_run(srun: Path, tmp_path: Path) -> None:
    """The warning signal came to the batch script during the preflight: its trap made the
    file; supervise requeues without starting the step."""
    warned = tmp_path / "warned"
    warned.touch()
    proc = supervise(["--warned-file", str(warned), "--", str(srun), "x"],
                     MPI_RESOLVER_CHECKPOINT_DIR=str(tmp_path))
    assert proc.returncode == 75 and runs(srun) == []
    assert said(proc.stderr) == [
        "the warning signal came to supervise; run 1 is not started; no checkpoint yet: the "
        "job's time is ending; not requeued: not in a Slurm job (SLURM_JOB_ID unset): there is "
        "no job to requeue: exit 75"]


def test_a_command_that_cannot_run_is_an_error_not_a_restart(tmp_path: Path) -> None:
    proc = supervise(["--", str(tmp_path / "no-such-srun")])
    assert proc.returncode == 2
    assert said(proc.stderr)[-1] == (f"error: supervise could not run "
                                     f"'{tmp_path / 'no-such-srun'}': No such file or "
                                     "directory; check the command's name and PATH.")


def test_supervise_imports_neither_mpi4py_nor_tensorflow() -> None:
    code = ("import sys; from mpi_resolver.cli.main import main; status = main(['supervise', "
            "'--', 'true']); print(status, 'mpi4py' in sys.modules, 'tensorflow' in "
            "sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=env(), timeout=60)
    assert out.stdout.split() == ["0", "False", "False"], out.stderr


@pytest.mark.parametrize("argv, step, max_restarts, spare, warned_file", [
    (["supervise", "--", "srun", "-N2", "python", "t.py"], ["srun", "-N2", "python", "t.py"],
     3, "0", None),
    (["supervise", "srun", "-x", "n1"], ["srun", "-x", "n1"], 3, "0", None),
    (["supervise", "--max-restarts", "0", "--", "mpirun", "-n", "2"], ["mpirun", "-n", "2"],
     0, "0", None),
    (["supervise", "--max-restarts=1", "--", "srun", "--max-restarts", "9"],
     ["srun", "--max-restarts", "9"], 1, "0", None),
    (["supervise", "--spare-nodes", "1", "--warned-file", "w", "--", "srun", "x"], ["srun", "x"],
     3, "1", "w"),
])
def test_arguments(argv: List[str], step: List[str], max_restarts: int, spare: str,
                   warned_file) -> None:
    args = parse_args(argv)
    assert (args.step, args.max_restarts, args.spare_nodes, args.warned_file) == (
        step, max_restarts, spare, warned_file)


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
SAVED = (r"run 1: python\S* exited 75, \d+\.\d s into the run; the newest checkpoint is "
         r"still step 5")
WARNED = SAVED + ": the tasks had the warning signal; "
LIMIT = r"SIGTERM at the time limit came to supervise; " + SAVED + ": the job's time is ending; "


@pytest.mark.parametrize("sigterm, job_line, requeue_exit, settings, status, calls, line", [
    pytest.param(False, CANCELLED, "0", {}, 75, ["requeue 12"],
                 WARNED + r"requeued job 12 \(scontrol requeue 12\): exit 75",
                 id="the warning signal's save: requeued, nothing asked"),
    pytest.param(True, TIME_LIMIT, "0", {}, 75,
                 ["show job -o 12", "show job -o 12", "requeue 12"],
                 LIMIT + r"requeued job 12 \(scontrol requeue 12\): exit 75",
                 id="the time limit: asked why, twice (the last look before the requeue)"),
    pytest.param(True, CANCELLED, "0", {}, 143, ["show job -o 12"],
                 r"SIGTERM \(Slurm ends the job\) came to supervise; " + SAVED + r": Slurm ends "
                 r"the job \(scancel, or its own requeue or preemption\): exit 143",
                 id="scancel"),
    pytest.param(False, CANCELLED, "1", {}, 75, ["requeue 12"],
                 WARNED + r"scontrol requeue 12 failed \(exit 1: Invalid job id specified\): "
                          r"exit 75", id="a requeue that fails: the fix alone, no fallback"),
    pytest.param(False, CANCELLED, "0", {"requeue": False}, 75, [],
                 SAVED + r": the tasks had the warning signal; not requeued: the job's settings "
                         r"say requeue=False: exit 75",
                 id="requeue=False reaches supervise through the manifest"),
])
def test_supervise_requeues_after_75(tmp_path: Path, sigterm: bool, job_line: str,
                                     requeue_exit: str, settings: Dict[str, bool], status: int,
                                     calls: List[str], line: str) -> None:
    """The step's 75 asks to run again: supervise requeues the job itself (the step marked
    MPI_RESOLVER_SUPERVISED=1 runs no scontrol), asking scontrol why only where SIGTERM came
    to supervise too, and as the job's settings in its manifest allow."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "scontrol").write_text(SCONTROL)
    (bin_dir / "scontrol").chmod(0o755)
    directory = tmp_path / "ckpt"
    directory.mkdir()
    (directory / "mpi_resolver.json").write_text(json.dumps(
        {"job": "12", "step": 5, "settings": settings}))
    extra = {"PATH": f"{bin_dir}:{os.environ['PATH']}", "SLURM_JOB_ID": "12",
             "JOB_LINE": job_line, "REQUEUE_EXIT": requeue_exit,
             "REQUEUE_OUT": "Invalid job id specified" if requeue_exit != "0" else "",
             "MPI_RESOLVER_CHECKPOINT_DIR": str(directory)}
    proc = subprocess.Popen([sys.executable, "-m", "mpi_resolver", "supervise", "--",
                             sys.executable, "-c", STEP_75.format(wait=sigterm)],
                            env=env(**extra), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None
    assert proc.stdout.readline() == b"supervised: 1\n"
    if sigterm:
        proc.send_signal(signal.SIGTERM)
    _, err, seen = finish(proc, 30, 25)
    assert proc.returncode == status, (err, seen)
    done = (bin_dir / "calls.txt")
    assert (done.read_text().splitlines() if done.exists() else []) == calls
    assert re.fullmatch(line, said(err)[-1]), said(err)


def test_a_scancel_after_the_run_wins_over_the_requeue(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """SIGTERM that lands between the step's exit 75 and `scontrol requeue` (the decision
    taken): supervise looks again before it requeues, and Slurm's end wins."""
    from mpi_resolver.cli.step_run import Signals
    from mpi_resolver.cli.supervise_requeue import requeue_job
    from mpi_resolver.long_jobs.causes import RunEnd
    from mpi_resolver.long_jobs.policy import Came
    from mpi_resolver.long_jobs.supervision import Checkpoints, Job, judge

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "scontrol").write_text(SCONTROL)
    (bin_dir / "scontrol").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    monkeypatch.setenv("JOB_LINE", CANCELLED)
    job = Job("12", "srun", 3, int(signal.SIGUSR1))
    verdict = judge(job, 1, RunEnd(75), Came.NOTHING, Checkpoints(5), Checkpoints(9), [], 0)
    signals = Signals(job.warning)
    signals.came.add(int(signal.SIGTERM))  # scancel, after the verdict
    assert requeue_job(job, verdict, signals, [], None) == 143
    assert (bin_dir / "calls.txt").read_text().splitlines() == ["show job -o 12"]


#: A step that ends 75 on the warning signal and, as the package's tasks do after their save
#: (watcher.ignore), ignores it from then on: supervise passes the warning on as soon as it
#: sees the trap's file, so a second USR1 may come while the step's Python ends, after its
#: handlers went back to the default action (seen once in the suite: exit 138).
WAIT_THEN_75 = """import signal, sys, time
def stop(*_):
    signal.signal(signal.SIGUSR1, signal.SIG_IGN)
    sys.exit(75)
signal.signal(signal.SIGUSR1, stop)
print("step started", flush=True)
time.sleep(30)
"""


def test_the_warned_file_made_while_the_step_runs_is_the_warning(tmp_path: Path) -> None:
    """The batch script's trap (the warning came to it, B:) creates the file and signals the
    tasks itself: supervise reads the file at the run's end, so that the tasks' save is the
    job's time ending, whatever they exited with."""
    warned = tmp_path / "warned"
    proc = subprocess.Popen([sys.executable, "-m", "mpi_resolver", "supervise", "--warned-file",
                             str(warned), "--", sys.executable, "-c", WAIT_THEN_75],
                            env=env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None and proc.stdout.readline() == b"step started\n"
    warned.touch()
    os.killpg(_step_group(proc.pid), signal.SIGUSR1)  # scancel --signal=USR1: the tasks only
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 75, err
    assert said(err)[-1].startswith("the warning signal came to supervise; run 1: python")


def _step_group(supervise_pid: int) -> int:
    """Returns the process group of supervise's step (its child, in a group of its own)."""
    children = Path(f"/proc/{supervise_pid}/task/{supervise_pid}/children").read_text().split()
    return os.getpgid(int(children[0]))


def test_the_warned_file_alone_is_passed_on_to_the_running_step(tmp_path: Path) -> None:
    """The batch script's trap signalled the job's tasks before this step's tasks existed (a
    restart starting): supervise, seeing the mark, passes the warning on to the step once."""
    warned = tmp_path / "warned"
    proc = subprocess.Popen([sys.executable, "-m", "mpi_resolver", "supervise", "--warned-file",
                             str(warned), "--", sys.executable, "-c", WAIT_THEN_75],
                            env=env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None and proc.stdout.readline() == b"step started\n"
    warned.touch()
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 75, err  # the step had USR1 from supervise: it saved, 75
    assert said(err)[-1].startswith("the warning signal came to supervise; run 1: python")


#: A step like srun before it has launched its tasks: the first USR1 is dropped (ignored),
#: a later one reaches the tasks, which save and exit 75.
DROPS_THE_FIRST = """import signal, sys, time
got = []
def first(*_):
    got.append(time.monotonic())
    print("dropped", flush=True)
    signal.signal(signal.SIGUSR1, lambda *_: sys.exit(75 if time.monotonic() - got[0] >= %s
                                                      else 3))
signal.signal(signal.SIGUSR1, first)
print("step started", flush=True)
time.sleep(30)
"""


@pytest.mark.parametrize("marked", [True, False], ids=["the batch script's mark", "to supervise"])
def test_the_warning_is_passed_on_again_until_the_step_ends(tmp_path: Path, marked) -> None:
    """srun drops a signal that comes before it has launched its tasks: supervise passes the
    warning on again every WARNING_AGAIN seconds while the step runs (not sooner)."""
    from mpi_resolver.cli.step_run import WARNING_AGAIN

    warned = tmp_path / "warned"
    step = DROPS_THE_FIRST % (WARNING_AGAIN - 0.3)
    proc = subprocess.Popen([sys.executable, "-m", "mpi_resolver", "supervise", "--warned-file",
                             str(warned), "--", sys.executable, "-c", step],
                            env=env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None and proc.stdout.readline() == b"step started\n"
    if marked:
        warned.touch()
    else:
        os.kill(proc.pid, signal.SIGUSR1)
    assert proc.stdout.readline() == b"dropped\n"
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 75, err  # the second pass, WARNING_AGAIN later: saved, 75
    assert said(err)[-1].startswith("the warning signal came to supervise; run 1: python")
