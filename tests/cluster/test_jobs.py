"""Parameter-server training on the throw-away cluster: examples/train_ps.py under real srun.

`srun -N2 -n4 --mpi=pmix` with MPIClusterResolver(jobs=...): Slurm puts ranks 0-2 on node1 and
rank 3 on node2, and the ranks take the sorted job names in order (chief, ps, worker, worker;
with the evaluator: chief, evaluator, ps, worker). Each launch checks that the
step ends by itself: exit 0 when the chief is done, non-zero soon after a task dies or hangs,
and no task of it left running. About 20-30 s per test on 2 cores (4 TensorFlow imports).
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import Dict, List, Mapping, Optional, Sequence

import pytest

from tests.cluster.conftest import PY, RANK_ENV, ROOT
from tests.cluster.test_training import final_accuracies, labelled, load_and_evaluate
from tests.harness.slurm_cluster import SlurmCluster, stop_group
from tests.docs.blocks import commands, runs_like

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

TRAIN_PS = str(ROOT / "examples" / "train_ps.py")
SRUN = ("srun", "-N2", "-n4", "--mpi=pmix", "--kill-on-bad-exit=1", "--label")
#: 200 asynchronous steps reach 0.93-0.97 on the held-out split (chance is 0.1).
STEPS = 200
MIN_ACCURACY = 0.8
TIMEOUT = 300  # seconds, for every launch (past train_ps.py's --time-limit 240)
#: train_ps.py's bound for the resolver's wait for every task: four tasks importing TensorFlow
#: on two cores took over a minute in the suite's busiest minutes (mutmut's runs beside the
#: clusters: rank 3 gave up on the default 60 s while rank 0 still imported).
START = ["--timeout", "180"]
SERVING = re.compile(r"^(ps|worker):(\d+): serving on (\S+) \(pid (\d+)\)$")
PID = re.compile(r"\(pid (\d+)\)")


def step_env(cluster: SlurmCluster) -> Dict[str, str]:
    """The cluster's client environment, this Python first on PATH, one thread per task."""
    return {**cluster.env, **RANK_ENV,
            "PATH": f"{Path(PY).parent}{os.pathsep}{cluster.env['PATH']}"}


class Step:
    """A running srun step whose output is read line by line while it runs."""

    def __init__(self, cluster: SlurmCluster, argv: Sequence[str],
                 env: Optional[Mapping[str, str]] = None) -> None:
        """Starts ``argv`` with the cluster's client environment, ``env`` on top of it."""
        self.argv = list(argv)
        self.grace = cluster.stop_grace
        self.started = time.monotonic()
        self.proc = subprocess.Popen(self.argv, env={**step_env(cluster), **(env or {})},
                                     cwd=cluster.workdir,
                                     text=True, start_new_session=True,
                                     stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE)
        self.stdout: List[str] = []
        self.stderr: List[str] = []
        self._changed = threading.Condition()
        self._ended = False
        self._readers = [threading.Thread(target=self._read, args=(self.proc.stdout, True)),
                         threading.Thread(target=self._read, args=(self.proc.stderr, False))]
        for t in self._readers:
            t.daemon = True
            t.start()

    def _read(self, stream, is_stdout: bool) -> None:
        for line in stream:
            with self._changed:
                (self.stdout if is_stdout else self.stderr).append(line)
                self._changed.notify_all()
        if is_stdout:
            with self._changed:
                self._ended = True
                self._changed.notify_all()

    def wait_for(self, pattern: str, timeout: float,
                 or_end: bool = False) -> "Optional[re.Match[str]]":
        """Returns the match of the first stdout line (so far or to come) matching pattern;
        None if the step ends first and ``or_end`` (else that fails the test)."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while True:
                for line in self.stdout:
                    m = re.search(pattern, line)
                    if m:
                        return m
                if self._ended:
                    break
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self._changed.wait(left)
        if self._ended:
            self.finish(10)
            if or_end:
                return None
            pytest.fail(f"the step ended before a line matched {pattern!r}{self.context()}")
        self.kill()
        pytest.fail(f"no line matching {pattern!r} within {timeout} s{self.context()}")

    def finish(self, timeout: float) -> int:
        """Waits for srun's exit (kills its process group and fails past timeout)."""
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            pytest.fail(f"the step did not end within {timeout} s (killed){self.context()}")
        for t in self._readers:
            t.join(10)
        return self.proc.returncode

    def kill(self) -> None:
        """Stops srun's process group as the harness stops a command (stop_grace)."""
        stop_group(self.proc, self.grace)

    @property
    def text(self) -> str:
        return "".join(self.stdout)

    def context(self) -> str:
        err = "".join(line for line in self.stderr
                      if not re.search(r"oneDNN|absl::|cudart_stub|cuda drivers", line))
        return (f"\n$ {' '.join(self.argv)}\nexit status {self.proc.returncode}\n"
                f"--- stdout\n{self.text[-6000:]}--- stderr\n{err[-5000:]}")


def pids_of(text: str) -> List[int]:
    """The PIDs the tasks printed."""
    return [int(p) for p in PID.findall(text)]


def _runs_train_ps(pid: int) -> bool:
    try:
        return b"train_ps.py" in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False  # gone


def assert_all_gone(pids: Sequence[int], where: str, grace: float = 10.0) -> None:
    """Every task's process has exited (slurmstepd may take a moment to reap them)."""
    assert pids, f"no task printed its pid{where}"
    deadline = time.monotonic() + grace
    alive = [p for p in pids if _runs_train_ps(p)]
    while alive and time.monotonic() < deadline:
        time.sleep(0.2)
        alive = [p for p in alive if _runs_train_ps(p)]
    assert not alive, f"tasks still running after the step: {alive}{where}"


def run_ps(cluster: SlurmCluster, args: Sequence[str]) -> subprocess.CompletedProcess:
    # the bounds hold TensorFlow's import of four tasks on two cores: past 60 s once in the
    # suite's busiest minutes (mutmut's runs beside the clusters), when rank 3 gave up on
    # the exchange while rank 0 still imported
    argv = [*SRUN, PY, TRAIN_PS, "--steps", str(STEPS), "--time-limit", "240", *START, *args]
    try:
        return cluster.run(argv, env=step_env(cluster), cwd=cluster.workdir, timeout=TIMEOUT)
    except subprocess.TimeoutExpired as e:
        pytest.fail(f"{' '.join(argv)} did not end within {TIMEOUT} s\n{e.stdout}\n{e.stderr}")


def context(r: subprocess.CompletedProcess) -> str:
    err = "\n".join(line for line in r.stderr.splitlines()
                    if not re.search(r"oneDNN|absl::|cudart_stub|cuda drivers", line))
    return (f"\n$ {' '.join(r.args)}\nexit status {r.returncode}\n--- stdout\n"
            f"{r.stdout[-6000:]}--- stderr\n{err[-5000:]}")


def by_task(stdout: str) -> Dict[int, List[str]]:
    out: Dict[int, List[str]] = {}
    for task, line in labelled(stdout):
        out.setdefault(task, []).append(line)
    return out


def test_ps_chief_ps_two_workers_train_and_end(cluster: SlurmCluster, tmp_path: Path) -> None:
    """jobs={'chief': 1, 'ps': 1, 'worker': 2}: ranks 0-3 are chief, ps, worker 0, worker 1;
    the servers serve from the resolver's ClusterSpec, the chief trains to MIN_ACCURACY,
    saves, and the step exits 0 with nothing left running."""
    save = tmp_path / "model.keras"
    start = time.monotonic()
    r = run_ps(cluster, ["--port-base", "24410", "--save", str(save)])
    runs_like(commands("train-ps")[0], r.args)
    seconds = time.monotonic() - start
    where = context(r)
    assert r.returncode == 0, where
    tasks = by_task(r.stdout)
    assert sorted(tasks) == [0, 1, 2, 3], where
    # Ranks take the sorted job names in order; node1 has ranks 0-2 (block, 3+1).
    assert re.fullmatch(r"cluster: chief 1, ps 1, worker 2  this: chief:0 on node1:24410 "
                        r"\(pid \d+\)", tasks[0][0]), where
    serving = {task: SERVING.match(lines[0]).groups()[:3] for task, lines in tasks.items()
               if task != 0 and SERVING.match(lines[0])}
    assert serving == {1: ("ps", "0", "node1:24411"), 2: ("worker", "0", "node1:24412"),
                       3: ("worker", "1", "node2:24410")}, where
    assert all(len(tasks[t]) == 1 for t in (1, 2, 3)), where  # the servers say nothing more
    chief = "\n".join(tasks[0])
    assert "connected to 2 workers and 1 ps" in chief, where
    steps = re.findall(r"^step (\d+)/%d: loss [\d.]+  train accuracy [\d.]+" % STEPS, chief,
                       re.M)
    assert steps == ["100", "200"], where
    accuracies = final_accuracies(chief)
    assert len(accuracies) == 1 and accuracies[0] > MIN_ACCURACY, where
    assert chief.rstrip().endswith(f"final test accuracy: {accuracies[0]:.4f}"), where
    # The saved model is the chief's trained one.
    assert load_and_evaluate(save) == pytest.approx(accuracies[0], abs=1e-4)
    assert_all_gone(pids_of(r.stdout), where)
    print(f"train_ps.py, chief+ps+2 workers: {seconds:.1f} s, test accuracy {accuracies[0]}")


def test_ps_with_evaluator(cluster: SlurmCluster, tmp_path: Path) -> None:
    """jobs={'chief': 1, 'ps': 1, 'worker': 1, 'evaluator': 1}: rank 1 (jobs sort: chief,
    evaluator, ps, worker) evaluates the chief's checkpoints outside the training cluster and
    ends after the last one, which scores what the chief's final model scores."""
    ckpt = tmp_path / "ckpt"
    start = time.monotonic()
    r = run_ps(cluster, ["--port-base", "24420", "--evaluator", "--checkpoint-dir", str(ckpt)])
    runs_like(commands("train-ps")[1].replace("/shared/ckpt", str(ckpt)), r.args)
    seconds = time.monotonic() - start
    where = context(r)
    assert r.returncode == 0, where
    tasks = by_task(r.stdout)
    assert sorted(tasks) == [0, 1, 2, 3], where
    assert tasks[0][0].startswith("cluster: chief 1, evaluator 1, ps 1, worker 1  this: "
                                  "chief:0 on node1:24420"), where
    assert tasks[1][0].startswith(f"evaluator:0: watching {ckpt} (pid "), where
    assert SERVING.match(tasks[2][0]).groups()[:3] == ("ps", "0", "node1:24422"), where
    assert SERVING.match(tasks[3][0]).groups()[:3] == ("worker", "0", "node2:24420"), where
    chief = "\n".join(tasks[0])
    assert "connected to 1 workers and 1 ps" in chief, where
    assert re.findall(r"^step (\d+)/\d+: .*  checkpoint (ckpt-\d+)$", chief, re.M) == [
        ("100", "ckpt-100"), ("200", "ckpt-200")], where
    final = final_accuracies(chief)
    assert len(final) == 1 and final[0] > MIN_ACCURACY, where
    evaluated = re.findall(r"^evaluator:0: checkpoint (ckpt-\d+) \(step (\d+)\): test accuracy "
                           r"(\d\.\d{4})$", "\n".join(tasks[1]), re.M)
    assert evaluated and evaluated[-1][:2] == ("ckpt-200", "200"), where
    assert float(evaluated[-1][2]) == pytest.approx(final[0], abs=1e-4), where
    assert {name for name, _, _ in evaluated} <= {"ckpt-100", "ckpt-200"}, where
    assert (ckpt / "checkpoint").exists(), where
    assert_all_gone(pids_of(r.stdout), where)
    print(f"train_ps.py --evaluator: {seconds:.1f} s, chief {final[0]}, "
          f"evaluator {[(n, float(a)) for n, _, a in evaluated]}")


def test_ps_worker_crash_ends_the_step(cluster: SlurmCluster) -> None:
    """A worker killed (SIGKILL) during training: srun --kill-on-bad-exit=1 ends the step at
    once with a non-zero exit (srun's kill, not the tasks' --time-limit of 240 s); the chief
    never reports a result; no task is left."""
    step = Step(cluster, [*SRUN, PY, "-u", TRAIN_PS, "--steps", "100000", "--time-limit",
                          "240", *START, "--port-base", "24430"])
    worker = step.wait_for(r"^\s*3: worker:1: serving on node2:24430 \(pid (\d+)\)", 240)
    step.wait_for(r"^\s*0: training: ", 60)
    time.sleep(1.0)  # some steps in
    killed = time.monotonic()
    os.kill(int(worker.group(1)), signal.SIGKILL)
    rc = step.finish(90)
    ended = time.monotonic() - killed
    where = step.context()
    assert rc != 0, where
    assert "final test accuracy" not in step.text, where
    # srun ended it for the bad exit, not the tasks' --time-limit of 240 s
    err = "".join(step.stderr)
    assert re.search(r"srun: error: node2: task 3: Killed", err), where
    assert "--time-limit" not in err, where
    assert_all_gone(pids_of(step.text), where)
    print(f"worker killed: the step ended {ended:.1f} s later, exit {rc}")


def test_ps_stopped_chief_bounded_wait(cluster: SlurmCluster) -> None:
    """A chief that hangs (SIGSTOP) once it has its ClusterSpec: the ps and workers wait on the
    barrier only until --time-limit, then exit non-zero, and srun ends the step (the stopped
    chief too)."""
    # The time limit counts from each task's ClusterSpec (TensorFlow's import before it took
    # over 120 s in a clean clone's suite at a load average of 11-15, 2026-11-29, when it
    # counted from the start: 240 s then, the step's wall time). The waits for the chief's
    # line and the step's end are every launch's (TIMEOUT).
    limit = 30
    step = Step(cluster, [*SRUN, PY, "-u", TRAIN_PS, "--steps", "100000", "--time-limit",
                          str(limit), *START, "--port-base", "24440"])
    chief = step.wait_for(r"^\s*0: cluster: .* \(pid (\d+)\)$", TIMEOUT)
    assert chief is not None
    os.kill(int(chief.group(1)), signal.SIGSTOP)
    rc = step.finish(TIMEOUT)
    seconds = time.monotonic() - step.started
    where = step.context()
    assert rc != 0, where
    assert "final test accuracy" not in step.text, where
    err = "".join(step.stderr)
    waited = (rf"^\s*\d+: (ps:\d|worker:\d|rank \d): (not done after --time-limit {limit} s; "
              r"giving up|the other tasks did not finish within --time-limit)$")
    assert re.search(waited, err, re.M), where
    assert_all_gone(pids_of(step.text), where)
    print(f"chief stopped: the step ended after {seconds:.1f} s (--time-limit {limit}), "
          f"exit {rc}")
