"""Batch jobs on the throw-away cluster, waited for without `sbatch --wait`'s back-off: it
sleeps 2 s, 8 s, then 32 s between its looks (x4 while below MinJobAge/2, and the harness has
MinJobAge=60), so a 12 s job returned only after 42 s (measured: five template tests at 42.0 s
each). Here the job is looked at 4 times a second."""

from __future__ import annotations

import subprocess
import time
from dataclasses import dataclass
from typing import Mapping, Optional, Sequence

import pytest

from tests.harness.slurm_cluster import SlurmCluster

#: A batch job's states once it has ended (squeue's and scontrol's words).
ENDED = ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY",
         "BOOT_FAIL", "DEADLINE", "PREEMPTED")


def wait_for_job(cluster: SlurmCluster, job_id: str, timeout: float = 300) -> str:
    """Waits until the batch job ends; returns its 'JobState ExitCode' ('COMPLETED 0:0');
    fails the test, with what scontrol showed last, where it has not ended within
    ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        show = cluster.run(["scontrol", "-o", "show", "job", job_id], timeout=30).stdout
        fields = dict(f.split("=", 1) for f in show.split() if "=" in f)
        if fields.get("JobState") in ENDED:
            return f"{fields['JobState']} {fields.get('ExitCode')}"
        if time.monotonic() > deadline:
            pytest.fail(f"batch job {job_id} did not end within {timeout} s: {show}")
        time.sleep(0.25)


@dataclass
class Batch:
    """A batch job submitted and waited for: sbatch's own result and the job's end."""

    submitted: subprocess.CompletedProcess
    job_id: str
    state: str  #: 'JobState ExitCode', as wait_for_job returns it

    def context(self) -> str:
        return (f"sbatch: exit {self.submitted.returncode}, {self.submitted.stdout!r} "
                f"{self.submitted.stderr!r}; job {self.job_id}: {self.state}")


def sbatch_wait(cluster: SlurmCluster, argv: Sequence[str], *, timeout: float,
                env: Optional[Mapping[str, str]] = None, cwd: Optional[str] = None) -> Batch:
    """`sbatch --parsable ARGV`, then the job waited for (``timeout`` seconds); returns the
    Batch (state '' where sbatch itself failed: no job)."""
    sub = cluster.run(["sbatch", "--parsable", *argv], env=env, cwd=cwd, timeout=30)
    job_id = sub.stdout.strip().split(";")[0]
    if sub.returncode != 0 or not job_id.isdigit():
        return Batch(sub, job_id, "")
    return Batch(sub, job_id, wait_for_job(cluster, job_id, timeout))
