"""mpi-resolver supervise for real, the restart policy's rows that a real job produces: batch
jobs on the two-node cluster whose script runs `mpi-resolver supervise -- srun --mpi=pmix
--kill-on-bad-exit=1 python STANDIN` (the stand-in, tests/cluster/supervise_standin.py, fails
as each case needs, and writes the job's manifest where a case makes progress), and supervise
in front of `mpirun` without Slurm; a three-node cluster for the nodes left out and excluded.

The jobs run at once (one CPU a node each), so the file takes about as long as the longest
(seconds: a restart is a new srun, 0.3-0.5 s here). Each case reads the job's output: srun's
own report line, supervise's line about it, the runs the stand-in counted, the job's exit code
as Slurm recorded it, and the job's ledger. The rows that need a real training or a cluster
of their own: tests/cluster/test_long_jobs.py (TensorFlow: the time limit and scancel under
supervise, the warning signal during a restart, a read-only checkpoint directory),
test_periodic_restart.py (a worker lost: restarted from the last checkpoint), test_hang.py (a
hang, before the first step too), test_out_of_memory.py (a task over its job's memory, where
Slurm enforces it), and tests/jax/test_long_jobs.py (JAX: a process killed, one lost after
the training completed, the template's requeue)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, Optional

import pytest

from tests.cluster.conftest import PY, RANK_ENV, ROOT, _started
from tests.cluster.longjobs import show
from tests.conftest import own_network
from tests.docs.blocks import assert_sample, block
from tests.harness.slurm_cluster import SlurmCluster

pytestmark = pytest.mark.cluster

STANDIN = str(Path(__file__).resolve().parent / "supervise_standin.py")
PREFIX = "mpi-resolver supervise: "
SCRIPT = """#!/bin/bash
set -euo pipefail
status=0
export MPI_RESOLVER_CHECKPOINT_DIR={dir}/ckpt
mkdir -p "$MPI_RESOLVER_CHECKPOINT_DIR"
python -m mpi_resolver supervise --max-restarts {restarts} {options} -- \\
  srun {nodes} --mpi=pmix --kill-on-bad-exit=1 python {standin} {mode} {dir} || status=$?
echo "== supervise exited $status"
exit "$status"
"""
STEP_NODES = "-N2 -n2 --ntasks-per-node=1"
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
        """supervise's lines, the run's seconds as T, but for the job's line at its end
        (job_line)."""
        lines = [re.sub(r"\d+\.\d s into", "T s into", ln[len(PREFIX):])
                 for ln in self.output.splitlines() if ln.startswith(PREFIX)]
        return lines[:-1] if lines and JOB_LINE.fullmatch(lines[-1]) else lines

    def job_line(self) -> Optional[str]:
        """Returns the job's line supervise said at the job's end, None where it said none."""
        lines = [ln[len(PREFIX):] for ln in self.output.splitlines() if ln.startswith(PREFIX)]
        return lines[-1] if lines and JOB_LINE.fullmatch(lines[-1]) else None

    def ledger(self) -> list:
        from mpi_resolver.long_jobs import ledger

        return ledger.read(str(self.directory / "ckpt"))

    def context(self) -> str:
        return (f"\njob {self.job_id} ({self.mode}): {self.state} ExitCode={self.exit_code}, "
                f"{self.runs} runs, {self.seconds:.1f} s\n{self.output[-4000:]}")


def _submit(cluster: SlurmCluster, job: Job, nodes: int = 2, restarts: int = 2,
            options: str = "", step_nodes: str = STEP_NODES, *sbatch: str) -> None:
    job.directory.mkdir()
    script = job.directory / "job.sh"
    script.write_text(SCRIPT.format(standin=STANDIN, mode=job.mode, dir=job.directory,
                                    restarts=restarts, options=options, nodes=step_nodes))
    env = {**RANK_ENV, "PATH": f"{Path(PY).parent}:{cluster.env['PATH']}"}
    r = cluster.run(["sbatch", "--parsable", f"-N{nodes}", "--ntasks-per-node=1", *sbatch,
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


MODES = ("kill-once", "exit-3", "crash-loop", "usage", "config", "exit-75", "save-failed",
         "done-then-killed", "sleep")


@pytest.fixture(scope="module")
def jobs(cluster: SlurmCluster, tmp_path_factory) -> Dict[str, Job]:
    """Runs the jobs at once; the 'sleep' one is cancelled once both tasks started."""
    tmp = tmp_path_factory.mktemp("supervise")
    out = {mode: Job(mode, tmp / mode) for mode in MODES}
    started = time.monotonic()
    for job in out.values():
        _submit(cluster, job)
    deadline = started + 120
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


#: supervise's line at the job's end (long_jobs.report.end_line).
JOB_LINE = re.compile(r"job [^:]+: \d+ runs?, \d+ restarts?.*, \d+ requeues?.*, \d+ steps? "
                      r"lost, ETTR (\d\.\d\d|\?)")


def test_the_docs_show_what_supervise_said(jobs):
    """docs/long-jobs.md's lines of real runs are these jobs' own."""
    said = "\n".join(line for job in jobs.values() for line in job.output.splitlines()
                     if line.startswith(PREFIX))
    assert_sample(block("restart-policy-lines"), said, "the jobs' output", ordered=False)


def test_a_killed_task_is_named_and_the_step_runs_again_in_the_same_job(jobs):
    job = jobs["kill-once"]
    assert (job.state, job.exit_code) == ("COMPLETED", "0:0"), job.context()
    assert job.runs == 2, job.context()
    out = job.output
    assert re.search(r"^srun: error: node2: task 1: Killed$", out, re.M), job.context()
    assert job.said() == [
        "run 1: task 1 on node2: Killed (signal 9), T s into the run; no checkpoint yet: "
        "restart 1 of 2",
        "the step completed after 1 restart"], job.context()
    assert out.count("task 0 done") == out.count("task 1 done") == 1, job.context()
    assert "== supervise exited 0" in out, job.context()
    ends = [r for r in job.ledger() if r["event"] == "run_end"]
    assert [(r["run"], r["cause"], r["node"], r["action"]) for r in ends] == [
        (1, "killed by a signal", "node2", "restart"), (2, "completed", None, "end")]
    # the stand-in tasks write no ledger of their own: the training's time is not known
    assert job.job_line() == (f"job {job.job_id}: 2 runs, 1 restart (SIGKILL on node2), 0 "
                              "requeues, 0 steps lost, ETTR ?"), job.context()


def test_restarts_used_up_end_with_the_task_s_exit_code(jobs):
    """Each run makes progress (the manifest's step moves on): --max-restarts bounds it.
    node1, which failed twice, cannot be left out of the third run (the job has no spare
    node): said."""
    job = jobs["exit-3"]
    assert (job.state, job.exit_code) == ("FAILED", "3:0"), job.context()
    assert job.runs == 3, job.context()  # the first run and exactly 2 restarts
    assert job.output.count("srun: error: node1: task 0: Exited with exit code 3") == 3
    assert job.said() == [
        "run 1: task 0 on node1: Exited with exit code 3, T s into the run; the newest "
        "checkpoint advanced to step 10: restart 1 of 2",
        "run 2: task 0 on node1: Exited with exit code 3, T s into the run; the newest "
        "checkpoint advanced to step 20: restart 2 of 2",
        "node1 (failed twice in this job) is not left out of the next run: the job has no "
        "spare node for it; to leave it out, ask Slurm for 1 node more and raise SPARE_NODES "
        "(supervise --spare-nodes) by as many",
        "run 3: task 0 on node1: Exited with exit code 3, T s into the run; the newest "
        "checkpoint advanced to step 30: the restarts are used up (--max-restarts 2): exit 3"
    ], job.context()
    assert "== supervise exited 3" in job.output, job.context()


def test_a_crash_loop_stops_after_two_runs_and_is_not_requeued(jobs):
    """A task killed before any step, on every run: at most two runs, exit 79 (do not
    requeue), whatever --max-restarts says."""
    job = jobs["crash-loop"]
    assert (job.state, job.exit_code, job.restarts) == ("FAILED", "79:0", "0"), job.context()
    assert len([r for r in job.ledger() if r["event"] == "run_end"]) == 2, job.context()
    assert job.said() == [
        "run 1: task 1 on node2: Killed (signal 9), T s into the run; no checkpoint yet: "
        "restart 1 of 2",
        "run 2: task 1 on node2: Killed (signal 9), T s into the run; no checkpoint yet: no "
        "progress in the last two runs (run 1: task 1 on node2: Killed (signal 9)): the job "
        "stops, not requeued: exit 79"], job.context()


@pytest.mark.parametrize("mode, status, said", [
    ("usage", "2:0", "run 1: task 0 on node1: Exited with exit code 2, T s into the run; no "
                     "checkpoint yet: a usage or configuration error fails the same way again: "
                     "not restarted, not requeued: exit 2"),
    ("config", "78:0", "run 1: task 0 on node1: Exited with exit code 78, T s into the run; no "
                       "checkpoint yet: a usage or configuration error fails the same way "
                       "again: not restarted, not requeued: exit 78"),
    ("save-failed", "74:0", "run 1: task 0 on node1: Exited with exit code 74, T s into the "
                            "run; no checkpoint yet: the save failed and no checkpoint "
                            "advanced in this run: not requeued (a requeue would redo the run "
                            "and fail the same save): exit 74"),
])
def test_what_would_fail_again_is_one_run(jobs, mode, status, said):
    job = jobs[mode]
    assert (job.state, job.exit_code, job.restarts) == ("FAILED", status, "0"), job.context()
    assert len([r for r in job.ledger() if r["event"] == "run_end"]) == 1, job.context()
    assert [ln.replace("task 1 on node2", "task 0 on node1") for ln in job.said()] == [said], \
        job.context()


def test_exit_75_is_never_restarted_and_supervise_requeues_the_job(jobs):
    """75: saved, to run again: not restarted in this allocation; supervise requeues the job
    (pending in the queue, Restarts=1)."""
    job = jobs["exit-75"]
    assert (job.state, job.restarts) == ("PENDING", "1"), job.context()
    assert job.runs == 1, job.context()
    said = job.said()
    assert len(said) == 1 and re.fullmatch(
        r"run 1: task \d on node\d: Exited with exit code 75, T s into the run; no checkpoint "
        rf"yet: the tasks had the warning signal; requeued job {job.job_id} \(scontrol requeue "
        rf"{job.job_id}\): exit 75", said[0]), job.context()


def test_a_task_killed_after_training_completed_trains_nothing_again(jobs):
    job = jobs["done-then-killed"]
    assert (job.state, job.exit_code) == ("COMPLETED", "0:0"), job.context()
    assert job.runs == 1, job.context()
    assert job.said() == [
        "run 1: task 1 on node2: Killed (signal 9), T s into the run; its training completed "
        "at step 10: nothing is trained again: exit 0"], job.context()


def test_scancel_ends_the_job_and_nothing_is_restarted(jobs):
    job = jobs["sleep"]
    assert job.state == "CANCELLED", job.context()
    assert job.runs == 1, job.context()
    said = job.said()
    assert len(said) == 1 and re.fullmatch(
        r"SIGTERM \(Slurm ends the job\) came to supervise; run 1: .*: Slurm ends the job "
        r"\(scancel, or its own requeue or preemption\): exit 143", said[0]), job.context()
    assert job.seconds < 60, job.context()  # ended by SIGTERM, not the stand-in's minute


@pytest.fixture(scope="module")
def three_nodes():
    """node1, node2 and node3 (no GPUs), for a job with a spare node."""
    yield from _started(("node1", "node2", "node3"), gpus={})


def _after(job: Job, words: str) -> list:
    """Returns the (task, node) pairs the runs after supervise's line with ``words`` ran."""
    last = job.output.split(words)[1]
    return sorted(re.findall(r"^task (\d) on (node\d)$", last, re.M))


@pytest.mark.parametrize("options, step_nodes", [
    pytest.param("", "-N2 -n2 --ntasks-per-node=1", id="the step's own -N2"),
    pytest.param("--spare-nodes 1", "--ntasks-per-node=1", id="--spare-nodes 1 (SPARE_NODES)"),
])
def test_a_node_that_failed_twice_is_left_out_where_the_job_has_a_spare_node(
        three_nodes, tmp_path, options, step_nodes):
    """A 3-node job, a 2-node step: node2's task is killed on the first two runs; the third
    run leaves node2 out (srun --exclude=node2) and runs on node1 and node3."""
    job = Job("node2-twice", tmp_path / "node2-twice")
    started = time.monotonic()
    _submit(three_nodes, job, nodes=3, restarts=3, options=options, step_nodes=step_nodes)
    _wait(three_nodes, job, started + 90)
    assert (job.state, job.exit_code) == ("COMPLETED", "0:0"), job.context()
    assert job.runs == 3, job.context()
    assert job.said() == [
        "run 1: task 1 on node2: Killed (signal 9), T s into the run; the newest checkpoint "
        "advanced to step 10: restart 1 of 3",
        "run 2: task 1 on node2: Killed (signal 9), T s into the run; the newest checkpoint "
        "advanced to step 20: restart 2 of 3",
        "the next run leaves out node2 (failed twice in this job): the job has 1 node more "
        "than the step needs",
        "the step completed after 2 restarts"], job.context()
    assert _after(job, "the next run leaves out") == [("0", "node1"), ("1", "node3")], \
        job.context()


def test_a_node_the_site_drained_is_left_out_at_once(three_nodes, tmp_path):
    """node2 drained by the site while the job runs (scontrol update State=DRAIN), its task
    then killed: the next run leaves it out after one failure. The drain comes once node2's
    task runs (its file 'waiting'): drained before the step started, srun places the step on
    node1 and node3 and nothing fails (seen once in the suite, where the step took over the
    60 s the test then waited for task 0's line)."""
    job = Job("node2-drained", tmp_path / "node2-drained")
    started = time.monotonic()
    _submit(three_nodes, job, nodes=3, restarts=3, step_nodes="-N2 -n2 --ntasks-per-node=1")
    try:
        waiting = job.directory / "waiting"
        while not waiting.exists() and time.monotonic() < started + 180:
            time.sleep(0.2)
        assert waiting.exists(), f"node2's task did not start within 180 s{job.context()}"
        r = three_nodes.run(["scontrol", "update", "NodeName=node2", "State=DRAIN",
                             "Reason=mpi_resolver test"], timeout=30)
        assert r.returncode == 0, r.stderr
        (job.directory / "drained").touch()
        _wait(three_nodes, job, time.monotonic() + 90)
    finally:
        three_nodes.run(["scontrol", "update", "NodeName=node2", "State=RESUME"], timeout=30)
    assert (job.state, job.exit_code) == ("COMPLETED", "0:0"), job.context()
    assert job.said()[1:2] == ["the next run leaves out node2 (drained or down): the job has 1 "
                               "node more than the step needs"], job.context()
    assert _after(job, "the next run leaves out") == [("0", "node1"), ("1", "node3")], \
        job.context()


def test_a_node_that_failed_twice_is_excluded_from_the_requeued_job(three_nodes, tmp_path):
    """A 2-node job on a 3-node partition, no spare node in it: node2 fails twice (restarts
    on it), then the tasks save and ask to run again: supervise requeues the job and
    excludes node2 from it (scontrol update ExcNodeList on the pending job)."""
    job = Job("node2-twice-75", tmp_path / "node2-twice-75")
    started = time.monotonic()
    _submit(three_nodes, job, 2, 3, "", STEP_NODES, "--nodelist=node1,node2")
    try:
        fields: Dict[str, str] = {}
        while time.monotonic() < started + 90:  # requeued, and supervise said it all
            fields = show(three_nodes, job.job_id)
            if fields.get("JobState") in FINAL or (
                    fields.get("Restarts") == "1" and ": exit 75" in job.output):
                break
            time.sleep(0.3)
        fields = show(three_nodes, job.job_id)  # after supervise's last word
    finally:
        three_nodes.run(["scancel", job.job_id], timeout=30)
    assert job.runs == 3, job.context()
    assert fields.get("ExcNodeList") == "node2", (fields, job.context())
    assert re.fullmatch(
        r"run 3: task \d on node\d: Exited with exit code 75, T s into the run; the newest "
        rf"checkpoint advanced to step 30: the tasks had the warning signal; requeued job "
        rf"{job.job_id} \(scontrol requeue {job.job_id}\); excluded node2 \(scontrol update "
        rf"JobId={job.job_id} ExcNodeList=node2\): exit 75", job.said()[-1]), job.context()


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
    assert len(said) == 3, where  # the first: no checkpoint directory to see
    assert re.fullmatch(rf"run 1: rank 1 on {host}: Killed \(signal 9\), \d+\.\d s into the "
                        r"run: restart 1 of 1", said[1]), where
    assert said[2] == "the step completed after 1 restart", where
