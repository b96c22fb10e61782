"""mpi-resolver supervise for real: batch jobs on the two-node cluster whose script runs
`mpi-resolver supervise -- srun --mpi=pmix --kill-on-bad-exit=1 python STANDIN` (the stand-in,
tests/cluster/supervise_standin.py, fails as each case needs), and supervise in front of
`mpirun` without Slurm.

The four jobs run at once (one CPU a node each), so the file takes about as long as the
longest (a few seconds: a restart is a new srun, 0.3-0.5 s here). Each case reads the job's
output: srun's own report line, supervise's line about it, the runs the stand-in counted, and
the job's exit code as Slurm recorded it."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Dict

import pytest

from tests.cluster.conftest import PY, RANK_ENV, ROOT, _started
from tests.cluster.longjobs import show
from tests.conftest import own_network
from tests.harness.slurm_cluster import SlurmCluster

pytestmark = pytest.mark.cluster

STANDIN = str(Path(__file__).resolve().parent / "supervise_standin.py")
PREFIX = "mpi-resolver supervise: "
SCRIPT = """#!/bin/bash
set -euo pipefail
status=0
python -m mpi_resolver supervise --max-restarts {restarts} -- \\
  srun -N2 -n2 --ntasks-per-node=1 --mpi=pmix --kill-on-bad-exit=1 python {standin} {mode} {dir} \\
  || status=$?
echo "== supervise exited $status"
exit "$status"
"""
FINAL = ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT")


@dataclass
class Job:
    mode: str
    directory: Path
    job_id: str = ""
    state: str = ""
    exit_code: str = ""
    restarts: str = ""
    seconds: float = 0.0

    @property
    def output(self) -> str:
        path = self.directory / "out.txt"
        return path.read_text(errors="replace") if path.exists() else ""

    @property
    def runs(self) -> int:
        path = self.directory / "runs.txt"
        return len(path.read_text().splitlines()) if path.exists() else 0

    def said(self) -> list:
        return [ln[len(PREFIX):] for ln in self.output.splitlines() if ln.startswith(PREFIX)]

    def context(self) -> str:
        return (f"\njob {self.job_id} ({self.mode}): {self.state} ExitCode={self.exit_code}, "
                f"{self.runs} runs, {self.seconds:.1f} s\n{self.output[-4000:]}")


def _submit(cluster: SlurmCluster, job: Job, nodes: int = 2, restarts: int = 2) -> None:
    job.directory.mkdir()
    script = job.directory / "job.sh"
    script.write_text(SCRIPT.format(standin=STANDIN, mode=job.mode, dir=job.directory,
                                    restarts=restarts))
    env = {**RANK_ENV, "PATH": f"{Path(PY).parent}:{cluster.env['PATH']}"}
    r = cluster.run(["sbatch", "--parsable", f"-N{nodes}", "--ntasks-per-node=1",
                     f"--output={job.directory / 'out.txt'}", str(script)], env=env, timeout=30)
    assert r.returncode == 0, r.stderr
    job.job_id = r.stdout.strip()


def _wait(cluster: SlurmCluster, job: Job, deadline: float, until=FINAL) -> None:
    """Waits for the job's end (a state in ``until``); records its state, exit code and
    restarts (Slurm keeps them a minute)."""
    while time.monotonic() < deadline:
        fields = show(cluster, job.job_id)
        if fields.get("JobState") in until:
            job.state, job.exit_code = fields["JobState"], fields.get("ExitCode", "")
            job.restarts = fields.get("Restarts", "")
            return
        time.sleep(0.3)
    cluster.run(["scancel", job.job_id], timeout=30)
    pytest.fail(f"job {job.job_id} did not end in time{job.context()}")


@pytest.fixture(scope="module")
def jobs(cluster: SlurmCluster, tmp_path_factory) -> Dict[str, Job]:
    """Runs the four jobs at once; the 'sleep' one is cancelled once both tasks started."""
    tmp = tmp_path_factory.mktemp("supervise")
    out = {mode: Job(mode, tmp / mode) for mode in ("kill-once", "exit-3", "exit-75", "sleep")}
    started = time.monotonic()
    for job in out.values():
        _submit(cluster, job)
    deadline = started + 90
    cancelled = out["sleep"]
    while cancelled.output.count(" started") < 2 and time.monotonic() < deadline:
        time.sleep(0.2)
    cluster.run(["scancel", cancelled.job_id], timeout=30)
    for job in out.values():
        # exit-75: supervise requeues the job: its end is the queue (then cancelled here)
        _wait(cluster, job, deadline, ("PENDING",) if job.mode == "exit-75" else FINAL)
        job.seconds = time.monotonic() - started
    cluster.run(["scancel", out["exit-75"].job_id], timeout=30)
    return out


def test_a_killed_task_is_named_and_the_step_runs_again_in_the_same_job(jobs):
    job = jobs["kill-once"]
    assert (job.state, job.exit_code) == ("COMPLETED", "0:0"), job.context()
    assert job.runs == 2, job.context()
    out = job.output
    assert re.search(r"^srun: error: node2: task 1: Killed$", out, re.M), job.context()
    said = job.said()
    assert len(said) == 2, job.context()
    assert re.fullmatch(r"task 1 on node2: Killed \(signal 9\), \d+\.\d s into the run; "
                        r"restart 1 of 2", said[0]), job.context()
    assert said[1] == "the step completed after 1 restart", job.context()
    assert out.count("task 0 done") == out.count("task 1 done") == 1, job.context()
    assert "== supervise exited 0" in out, job.context()


def test_restarts_used_up_end_with_the_task_s_exit_code(jobs):
    job = jobs["exit-3"]
    assert (job.state, job.exit_code) == ("FAILED", "3:0"), job.context()
    assert job.runs == 3, job.context()  # the first run and exactly 2 restarts
    assert job.output.count("srun: error: node1: task 0: Exited with exit code 3") == 3
    said = job.said()
    assert [re.sub(r"\d+\.\d s", "T s", line) for line in said] == [
        "task 0 on node1: Exited with exit code 3, T s into the run; restart 1 of 2",
        "task 0 on node1: Exited with exit code 3, T s into the run; restart 2 of 2",
        "task 0 on node1: Exited with exit code 3, T s into the run; its 2 restarts are used "
        "up (--max-restarts 2): exit 3"], job.context()
    assert "== supervise exited 3" in job.output, job.context()


def test_exit_75_is_never_restarted_and_supervise_requeues_the_job(jobs):
    """75: saved, to run again: not restarted in this allocation; supervise requeues the job
    (pending in the queue, Restarts=1)."""
    job = jobs["exit-75"]
    assert (job.state, job.restarts) == ("PENDING", "1"), job.context()
    assert job.runs == 1, job.context()
    said = job.said()
    assert len(said) == 2 and re.fullmatch(
        r"task \d on node\d: Exited with exit code 75: the checkpoint is saved and the job is "
        r"to run again \(not restarted here\)", said[0]), job.context()
    assert said[1] == f"requeued job {job.job_id} (scontrol requeue {job.job_id}): exit 75", \
        job.context()


def test_scancel_ends_the_job_and_nothing_is_restarted(jobs):
    job = jobs["sleep"]
    assert job.state == "CANCELLED", job.context()
    assert job.runs == 1, job.context()
    said = job.said()
    assert len(said) == 1 and re.fullmatch(
        r"the job is ending \(SIGTERM came to supervise\): not restarted: exit \d+",
        said[0]), job.context()
    assert job.seconds < 60, job.context()  # ended by SIGTERM, not the stand-in's minute


@pytest.fixture(scope="module")
def three_nodes():
    """node1, node2 and node3 (no GPUs), for a job with a spare node."""
    yield from _started(("node1", "node2", "node3"), gpus={})


def test_a_node_that_failed_twice_is_left_out_where_the_job_has_a_spare_node(three_nodes,
                                                                             tmp_path):
    """A 3-node job, a 2-node step (-N2): node2's task is killed on the first two runs; the
    third run leaves node2 out (srun --exclude=node2) and runs on node1 and node3."""
    job = Job("node2-twice", tmp_path / "node2-twice")
    started = time.monotonic()
    _submit(three_nodes, job, nodes=3, restarts=3)
    _wait(three_nodes, job, started + 60)
    job.seconds = time.monotonic() - started
    assert (job.state, job.exit_code) == ("COMPLETED", "0:0"), job.context()
    assert job.runs == 3, job.context()
    said = [re.sub(r"\d+\.\d s", "T s", line) for line in job.said()]
    assert said == [
        "task 1 on node2: Killed (signal 9), T s into the run; restart 1 of 3",
        "task 1 on node2: Killed (signal 9), T s into the run; restart 2 of 3",
        "node2 failed 2 times: the next run leaves it out (--exclude=node2; the job has 1 node "
        "more than the step)",
        "the step completed after 2 restarts"], job.context()
    last = job.output.split("the next run leaves it out")[1]
    assert sorted(re.findall(r"^task (\d) on (node\d)$", last, re.M)) == [
        ("0", "node1"), ("1", "node3")], job.context()


def mpirun_env() -> Dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("SLURM_", "SLURMD_", "PMI_", "PMIX_"))}
    return {**env, **RANK_ENV, "OMPI_ALLOW_RUN_AS_ROOT": "1",
            "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1", "OMPI_MCA_rmaps_base_oversubscribe": "1",
            "OMPI_MCA_hwloc_base_binding_policy": "none"}


def test_supervise_in_front_of_mpirun_without_slurm(tmp_path):
    """mpirun's own report names the rank, its node and the signal; the rerun completes."""
    proc = subprocess.run(own_network([
        sys.executable, "-m", "mpi_resolver", "supervise", "--max-restarts", "1", "--",
        "mpirun", "-n", "2", sys.executable, STANDIN, "kill-once", str(tmp_path)]),
        capture_output=True, text=True, timeout=120, env=mpirun_env(), cwd=ROOT)
    where = f"\n{proc.stdout}\n{proc.stderr}"
    assert proc.returncode == 0, where
    assert len((tmp_path / "runs.txt").read_text().splitlines()) == 2, where
    host = os.uname().nodename
    assert re.search(rf"^mpirun noticed that process rank 1 with PID \d+ on node {host} "
                     r"exited on signal 9 \(Killed\)\.$", proc.stderr, re.M), where
    said = [ln[len(PREFIX):] for ln in proc.stderr.splitlines() if ln.startswith(PREFIX)]
    assert len(said) == 2, where
    assert re.fullmatch(rf"rank 1 on {host}: Killed \(signal 9\), \d+\.\d s into the run; "
                        r"restart 1 of 1", said[0]), where
    assert said[1] == "the step completed after 1 restart", where
