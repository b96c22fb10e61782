"""A task over its job's memory, for real: a cluster whose Slurm enforces memory (task/cgroup,
cgroup v1's memory limit), a job with --mem=200M, the stand-in's task 1 filling 600 MB on the
first run. The kernel's OOM killer ends it; srun says "Out Of Memory", slurmstepd counts the
oom-kill event; supervise reads both, names the task and its node, and restarts (the policy's
row for a failure: an out of memory may pass on the next run, and the restarts are bounded)."""

from __future__ import annotations

import re
import time
from typing import Iterator

import pytest

from mpi_resolver.long_jobs.step_report import StepReport
from tests.cluster.conftest import _started
from tests.cluster.test_supervise import STEP_NODES, Job, _submit, _wait
from tests.docs.blocks import assert_sample, block
from tests.harness.slurm_cluster import SlurmCluster

pytestmark = pytest.mark.cluster


@pytest.fixture(scope="module")
def memory_cluster() -> Iterator[SlurmCluster]:
    """node1 and node2, 1000 MB each, that Slurm allocates and enforces."""
    yield from _started(("node1", "node2"), gpus={}, memory_mb=1000)


def test_a_task_out_of_memory_is_named_and_restarted(memory_cluster, tmp_path):
    job = Job("oom-once", tmp_path / "oom-once")
    started = time.monotonic()
    _submit(memory_cluster, job, 2, 2, "", STEP_NODES, "--mem=200M")
    _wait(memory_cluster, job, started + 90)
    assert (job.state, job.exit_code) == ("COMPLETED", "0:0"), job.context()
    assert job.runs == 2, job.context()
    out = job.output
    assert re.search(r"^srun: error: node2: task 1: Out Of Memory$", out, re.M), job.context()
    assert re.search(r"^slurmstepd-node2: error: Detected \d+ oom-kill event", out, re.M), \
        job.context()
    report = StepReport()  # slurmstepd's line alone is read as the event
    for line in out.splitlines():
        if line.startswith("slurmstepd"):
            report.feed(line)
    assert report.oom_event, job.context()
    assert_sample(block("restart-policy-oom-line"), job.output, "the job's output")
    assert job.said() == [
        "run 1: task 1 on node2: Out Of Memory, T s into the run; the newest checkpoint "
        "advanced to step 10: restart 1 of 2",
        "the step completed after 1 restart"], job.context()
    ends = [r for r in job.ledger() if r["event"] == "run_end"]
    assert [(r["run"], r["cause"], r["node"], r["action"]) for r in ends] == [
        (1, "out of memory", "node2", "restart"), (2, "completed", None, "end")]
