"""examples/train_ps.py --checkpoint-dir on Slurm's signal, for real on the throw-away cluster.

A batch job (`sbatch --requeue --open-mode=append`) runs train_ps.py under `srun -N2 -n4
--mpi=pmix` (chief, ps, worker, worker). While the chief trains, the test sends USR1 the way
Slurm's `--signal=USR1@N` does (`scancel --signal=USR1`, to every task of the step). The chief
waits for its scheduled calls, saves one checkpoint, requeues the job (`scontrol requeue`) and
every task exits 75; the job is then PENDING with Reason=BeginTime (Slurm would start it 121 s
later), `scontrol update StartTime=now` starts it at once, and the second run resumes at the
saved step and trains to the planned total. 26 s on 2 idle cores, 42-50 s on loaded ones (8
TensorFlow imports; measured 2026-11-25), every wait bounded.
"""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Callable, Dict, List, Optional, Set, TypeVar

import pytest

from tests.cluster.conftest import PY
from tests.cluster.test_jobs import TRAIN_PS, assert_all_gone, pids_of, step_env
from tests.harness.requeue import start_due
from tests.harness.slurm_cluster import SlurmCluster

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

TOTAL = 1500  # steps: about 7 s of training at the 200 steps/s measured here
EVERY = 250  # steps between progress lines (and the periodic checkpoints)
PER_CALL = 10
PORT = 24450
MIN_ACCURACY = 0.8
REQUEUE_EXIT = 75
SCRIPT = """#!/bin/bash
echo "== run ${{SLURM_RESTART_COUNT:-0}} of job $SLURM_JOB_ID"
srun -N2 -n4 --mpi=pmix --kill-on-bad-exit=1 --label {py} -u {train} --steps {total} \\
    --checkpoint-every {every} --steps-per-call {per_call} --checkpoint-dir {ckpt} \\
    --port-base {port} --time-limit 240 --timeout 180
"""
RUN = re.compile(r"^== run (\d+) of job \d+$", re.M)
EXITED = re.compile(r"^srun: error: (node\d+): tasks? ([\d,-]+): Exited with exit code (\d+)$",
                    re.M)
#: Lines of task 0 that are not the chief's own: TensorFlow's and slurmstepd's.
#: Lines that are not train_ps.py's own prints: TensorFlow's, slurmstepd's, and the package's
#: log lines (stderr, which srun merges with stdout in no fixed order: once the package's
#: requeue line came after "steps done"; checked on their own).
NOISE = re.compile(r"^(slurmstepd|WARNING|[IWE]\d{4} |.*oneDNN|mpi_resolver: )")
T = TypeVar("T")


class Job:
    """A batch job of the throw-away cluster: its id, output file and state."""

    def __init__(self, cluster: SlurmCluster, workdir: Path, script: Path, out: Path) -> None:
        self.cluster, self.workdir, self.out = cluster, workdir, out
        r = self.client("sbatch", "--parsable", "--requeue", "--open-mode=append", "-N2",
                        "-n4", "-J", "ps-requeue", "-o", str(out), str(script))
        self.id = r.stdout.strip().split(";")[0]
        assert self.id.isdigit(), r.stdout + r.stderr

    def client(self, *args: str):
        """Runs a Slurm client command with the cluster's environment; fails on non-zero."""
        r = self.cluster.run(list(args), env=step_env(self.cluster), cwd=str(self.workdir),
                             timeout=30)
        assert r.returncode == 0, f"{' '.join(args)}: exit {r.returncode}\n{r.stdout}{r.stderr}"
        return r

    def fields(self) -> Dict[str, str]:
        """`scontrol show job -o`'s KEY=VALUE fields."""
        text = self.client("scontrol", "show", "job", "-o", self.id).stdout
        return dict(w.split("=", 1) for w in text.split() if "=" in w)

    def text(self) -> str:
        return self.out.read_text(errors="replace") if self.out.exists() else ""

    def wait(self, what: str, cond: Callable[[], Optional[T]], timeout: float) -> T:
        """Polls ``cond`` until it returns a true value (returned); fails past timeout, or at
        once where the job ended in a state the test never expects."""
        deadline = time.monotonic() + timeout
        while True:
            value = cond()
            if value:
                return value
            state = self.fields().get("JobState")
            if state in ("FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY"):
                pytest.fail(f"job {self.id} is {state} while waiting for {what}{self.context()}")
            if time.monotonic() > deadline:
                pytest.fail(f"no {what} within {timeout} s{self.context()}")
            time.sleep(0.2)

    def context(self) -> str:
        return f"\n--- scontrol show job\n{self.fields()}\n--- {self.out}\n{self.text()[-8000:]}"

    def cancel(self) -> None:
        self.cluster.run(["scancel", self.id], env=step_env(self.cluster), timeout=30)


def runs(text: str) -> Dict[int, str]:
    """The output of each run of the job, by SLURM_RESTART_COUNT (the batch script's marker)."""
    parts = RUN.split(text)
    return {int(parts[i]): parts[i + 1] for i in range(1, len(parts) - 1, 2)}


def chief_lines(run: str) -> List[str]:
    """Task 0's own lines (its label taken off; TensorFlow's and slurmstepd's left out)."""
    lines = [m.group(1) for m in re.finditer(r"^\s*0: (.*)$", run, re.M)]
    return [line for line in lines if not NOISE.match(line)]


def exit_codes(run: str) -> Dict[int, int]:
    """Each task's exit code, as srun reported the tasks that exited non-zero."""
    codes: Dict[int, int] = {}
    for _, tasks, code in EXITED.findall(run):
        for part in tasks.split(","):
            first, _, last = part.partition("-")
            for task in range(int(first), int(last or first) + 1):
                codes[task] = int(code)
    return codes


def progress(job: Job) -> Optional[str]:
    """The chief's first progress line of the first run, once it printed one."""
    m = re.search(r"^\s*0: (step \d+/%d: .*)$" % TOTAL, job.text(), re.M)
    return m.group(1) if m else None


def requeued(job: Job) -> bool:
    """True once the job waits to run again, as Slurm's requeue leaves it, and the requeue is
    old enough for a start at once (tests/harness/requeue.py: an update sent in the requeue's
    own second starts a launch that fails: FAILED, RunTime 0, ExitCode 1:0, seen in a run
    of the suite)."""
    return start_due(job.fields(), time.time())


def test_ps_saves_requeues_and_resumes_on_slurms_signal(cluster: SlurmCluster,
                                                       tmp_path: Path) -> None:
    """USR1 mid-training: the chief saves step K (0 < K < TOTAL) and requeues, every task of
    the first run exits 75; the second run resumes at K, ends at TOTAL and exits 0;
    Restarts=1."""
    ckpt, out, script = tmp_path / "ckpt", tmp_path / "job.out", tmp_path / "job.sh"
    script.write_text(SCRIPT.format(py=PY, train=TRAIN_PS, total=TOTAL, every=EVERY,
                                    per_call=PER_CALL, ckpt=ckpt, port=PORT))
    start = time.monotonic()
    job = Job(cluster, tmp_path, script, out)
    try:
        first = job.wait("progress line of the chief", lambda: progress(job), 120)
        signalled = time.monotonic()
        for _ in range(2):  # a second signal, while the chief saves, changes nothing
            job.client("scancel", "--signal=USR1", job.id)
        job.wait("requeue (PENDING, Reason=BeginTime)", lambda: requeued(job), 40)
        pending = time.monotonic()
        job.client("scontrol", "update", f"JobId={job.id}", "StartTime=now")
        job.wait("end of the second run", lambda: job.fields().get("JobState") == "COMPLETED",
                 120)
        done = time.monotonic()
        fields = job.fields()
    finally:
        job.cancel()
    where = job.context()
    check_runs(job.text(), ckpt, where)
    assert fields.get("Restarts") == "1" and fields.get("ExitCode") == "0:0", where
    assert_all_gone(pids_of(job.text()), where)
    took = re.search(r"written (\S+) s after the signal", job.text()).group(1)
    print(f"train_ps.py requeue: {done - start:.1f} s in all; first progress: {first!r}; "
          f"signal -> checkpoint {took} s, -> PENDING {pending - signalled:.1f} s; "
          f"StartTime=now -> completed {done - pending:.1f} s")


def check_runs(text: str, ckpt: Path, where: str) -> None:
    """The two runs' output: the first saved K and exited 75 everywhere, the second resumed
    at K and completed."""
    by_run = runs(text)
    assert sorted(by_run) == [0, 1], where
    chief = chief_lines(by_run[0])
    m = re.fullmatch(r"steps done: (\d+) \(resumed from 0\)", chief[-1])
    assert m, where
    k = int(m.group(1))
    assert EVERY <= k < TOTAL and k % PER_CALL == 0, where
    assert f"SIGUSR1: checkpoint ckpt-{k} (step {k}) written" in "\n".join(chief), where
    assert re.search(r"mpi_resolver: checkpoint saved on SIGUSR1; requeued job \d+ \(scontrol "
                     r"requeue \d+\); exit code 75", by_run[0]), where
    assert exit_codes(by_run[0]) == {t: REQUEUE_EXIT for t in range(4)}, where
    assert "final test accuracy" not in by_run[0], where
    chief = chief_lines(by_run[1])
    assert f"resumed from the checkpoint in {ckpt} at step {k}" in chief, where
    assert chief[-1] == f"steps done: {TOTAL} (resumed from {k})", where
    accuracy = [float(x) for x in re.findall(r"^final test accuracy: (\S+)$", "\n".join(chief),
                                             re.M)]
    assert len(accuracy) == 1 and accuracy[0] > MIN_ACCURACY, where
    assert exit_codes(by_run[1]) == {}, where
    served: Set[str] = set(re.findall(r"^\s*\d+: ((?:ps|worker):\d): serving", by_run[1], re.M))
    assert served == {"ps:0", "worker:0", "worker:1"}, where
