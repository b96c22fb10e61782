"""The restart policy's rows where JAX's LongJob has code of its own, for real: batch jobs on
the two-node cluster whose script runs `mpi-resolver supervise -- srun --mpi=pmix
--kill-on-bad-exit=1` over a JAX loop with LongJob and the step watchdog (the policy itself,
the same whatever the framework: tests/cluster/test_supervise.py's stand-in):

- a configuration error (a bad checkpoint_every): LongJob ends the process with 78, one run;
- a crash loop (process 1 killed before any step, every run): two runs, 79, not requeued;
- every save failing (a full disk) and the warning signal: 74, one run, not requeued;
- process 1 stuck before its first step in run 1 (its start, a rendezvous): the watchdog's
  start bound ends it with 124 (LongJob's restore does not count: paused), supervise runs the
  step again, which completes.
The jobs run at once."""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Dict

import pytest

from tests.cluster.test_supervise import FINAL, Job, _wait
from tests.docs.blocks import assert_sample, block
from tests.harness.slurm_cluster import SlurmCluster
from tests.jax.conftest import JAX_ENV

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

LOOP = """import os, signal, sys, time
mode, directory = sys.argv[1], sys.argv[2]
from mpi_resolver.jax import initialize, LongJob
initialize(port_base="auto")
import jax, jax.numpy as jnp
from mpi_resolver import StepWatchdog
rank = jax.process_index()
runs = os.path.join(directory, "runs.txt")
if rank == 0:
    with open(runs, "a") as f:
        f.write("run\\n")
if mode == "crash-loop" and rank == 1:
    os.kill(os.getpid(), signal.SIGKILL)
job = LongJob(checkpoint_every="often" if mode == "config" else 5)
state = {"w": jnp.zeros(3)}
step, state = job.restore(state)
def full_disk():
    raise OSError(28, "No space left on device")
with StepWatchdog(minimum=60) as dog:
    if mode == "hang-start" and rank == 1 and not os.path.exists(directory + "/hung"):
        open(directory + "/hung", "w").close()
        time.sleep(300)  # its first step never comes
    while step < 20:
        state = {"w": state["w"] + 1}
        step += 1
        if mode == "save-failed" and step == 8 and rank == 1:
            os.kill(os.getpid(), signal.SIGUSR1)
        job.step_done(step, full_disk if mode == "save-failed" else state)
        dog.tick()
job.complete()
print("completed", step, flush=True)
"""
SCRIPT = """#!/bin/bash
status=0
export MPI_RESOLVER_CHECKPOINT_DIR={dir}/ckpt MPI_RESOLVER_START_TIMEOUT=8
mkdir -p "$MPI_RESOLVER_CHECKPOINT_DIR"
{python} -m mpi_resolver supervise --max-restarts 2 -- \\
  srun -N2 -n2 --ntasks-per-node=1 --mpi=pmix --kill-on-bad-exit=1 {python} {loop} {mode} \\
  {dir} || status=$?
echo "== supervise exited $status"
exit "$status"
"""
MODES = ("config", "crash-loop", "save-failed", "hang-start")
PREFIX = "mpi-resolver supervise: "


@pytest.fixture(scope="module")
def jobs(jax_cluster: SlurmCluster, jax_python: str, tmp_path_factory) -> Dict[str, Job]:
    tmp = tmp_path_factory.mktemp("supervise_jax")
    (tmp / "loop.py").write_text(LOOP)
    env = {**JAX_ENV, "PATH": f"{Path(jax_python).parent}:/usr/bin:/bin:/usr/sbin:/sbin"}
    out = {mode: Job(mode, tmp / mode) for mode in MODES}
    started = time.monotonic()
    for job in out.values():
        job.directory.mkdir()
        script = job.directory / "job.sh"
        script.write_text(SCRIPT.format(dir=job.directory, python=jax_python,
                                        loop=tmp / "loop.py", mode=job.mode))
        r = jax_cluster.run(["sbatch", "--parsable", "-N2", "--ntasks-per-node=1",
                             f"--output={job.directory / 'out.txt'}", str(script)], env=env,
                            timeout=30)
        assert r.returncode == 0, r.stderr
        job.job_id = r.stdout.strip()
    for job in out.values():
        _wait(jax_cluster, job, started + 300, FINAL)
        job.seconds = time.monotonic() - started
    return out


def test_the_docs_show_what_supervise_said(jobs):
    """docs/long-jobs.md's lines of JAX's runs are these jobs' own."""
    said = "\n".join(line for job in jobs.values() for line in job.output.splitlines()
                     if line.startswith(PREFIX))
    assert_sample(block("restart-policy-jax-lines"), said, "the jobs' output", ordered=False)


def runs_ended(job: Job) -> list:
    return [r for r in job.ledger() if r["event"] == "run_end"]


@pytest.mark.parametrize("mode, status, said", [
    ("config", "78:0", r"run 1: task [01] on node[12]: Exited with exit code 78, T s into the "
                       r"run; no checkpoint yet: a usage or configuration error fails the same "
                       r"way again: not restarted, not requeued: exit 78"),
    ("save-failed", "74:0", r"run 1: task [01] on node[12]: Exited with exit code 74, T s into "
                            r"the run; no checkpoint yet: the save failed and no checkpoint "
                            r"advanced in this run: not requeued \(a requeue would redo the "
                            r"run and fail the same save\): exit 74"),
])
def test_what_would_fail_again_is_one_run(jobs, mode, status, said):
    job = jobs[mode]
    assert (job.state, job.exit_code, job.restarts) == ("FAILED", status, "0"), job.context()
    assert job.runs == 1 and len(runs_ended(job)) == 1, job.context()
    assert len(job.said()) == 1 and re.fullmatch(said, job.said()[0]), job.context()


def test_the_bad_value_is_named(jobs):
    job = jobs["config"]
    assert "checkpoint_every='often'" in job.output, job.context()


def test_every_save_failing_is_said_and_the_training_went_on(jobs):
    job = jobs["save-failed"]
    assert "the checkpoint at step 5 was not saved ([Errno 28] No space left on device)" in \
        job.output and "the save on SIGUSR1 failed (" in job.output, job.context()


def test_a_crash_loop_stops_after_two_runs_and_is_not_requeued(jobs):
    job = jobs["crash-loop"]
    assert (job.state, job.exit_code, job.restarts) == ("FAILED", "79:0", "0"), job.context()
    assert job.runs == 2 and len(runs_ended(job)) == 2, job.context()
    assert job.said()[-1].startswith("run 2: task 1 on node2: Killed (signal 9), T s into the "
                                     "run; no checkpoint yet: no progress in the last two runs"), \
        job.context()


def test_a_stuck_start_ends_at_the_start_bound_and_the_step_runs_again(jobs):
    job = jobs["hang-start"]
    assert (job.state, job.exit_code) == ("COMPLETED", "0:0"), job.context()
    assert job.runs == 2 and "completed 20" in job.output, job.context()
    assert re.search(r"mpi_resolver: step watchdog: .*rank 1 on node2.*: step 1 has run "
                     r"\d+\.\d\d s, past its limit of 8\.00 s \(no step timed yet: the start "
                     r"bound", job.output), job.context()
    assert re.fullmatch(r"run 1: task 1 on node2: hung \(step 1 has run \d+\.\d\d s\), T s "
                        r"into the run; no checkpoint yet: restart 1 of 2", job.said()[0]), \
        job.context()  # the stuck rank's node, not the waiting one's
