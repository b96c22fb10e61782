"""supervise's requeue, the edge: a last look at what came to supervise since the run ended
(a scancel that lands between the step's exit and the requeue wins), ``scontrol requeue``,
then the nodes the next run must not get (drained, or failed twice in this job) excluded
from the pending job where its partition can do without them.
"""

from __future__ import annotations

import signal
import socket
import time
from typing import List, Optional, Sequence

from mpi_resolver.long_jobs import exits
from mpi_resolver.long_jobs.nodes import excludable, lemons
from mpi_resolver.long_jobs.policy import Came, came_of
from mpi_resolver.long_jobs.requeue import job_ending, requeue
from mpi_resolver.long_jobs.slurm_nodes import (drained, exclude, job_partition, node_states,
                                                partition_usable)
from mpi_resolver.long_jobs.supervision import Job, Verdict
from mpi_resolver.cli.step_run import Signals, say

__all__ = ["requeue_job", "KILL_WAIT", "exclusions", "came_now"]

#: Seconds from Slurm's SIGTERM to its SIGKILL where nothing says (KillWait's default).
KILL_WAIT = 30.0


def _left(signals: Signals) -> float:
    """Returns the seconds scontrol may take: what is left of KillWait after a stop."""
    if signals.stopped_at is None:
        return KILL_WAIT
    return max(KILL_WAIT - (time.monotonic() - signals.stopped_at), 2.0)


def came_now(job: Job, signals: Signals) -> Came:
    """Returns what came to supervise now, scontrol asked where SIGTERM came."""
    came = signals.snapshot()
    ending = None
    if int(signal.SIGTERM) in came and job.job is not None:
        ending = job_ending(job.job, timeout=_left(signals))
    return came_of(came, job.warning, ending)


def requeue_job(job: Job, verdict: Verdict, signals: Signals, blamed: Sequence[str],
                nodelist: Optional[str]) -> int:
    """Requeues ``job`` as ``verdict`` says, unless the job is being ended meanwhile; says
    the verdict's line with what scontrol did; returns the exit status (75; 143 where
    Slurm ends the job instead)."""
    assert job.job is not None  # the policy requeues a Slurm job only
    now = came_now(job, signals)
    if now in (Came.JOB_ENDS, Came.HANGUP):
        say(f"{verdict.line}; but {now.value} came to supervise since: job {job.job} is not "
            f"requeued: exit {exits.TERMINATED}")
        return exits.TERMINATED
    outcome = requeue(job.job, socket.gethostname(), exits.REQUEUE, timeout=_left(signals),
                      fallback=False)
    said = f"{verdict.line}; {outcome.message}"
    if outcome.done:
        excluded = exclusions(job, blamed, nodelist)
        if excluded:
            said += f"; {excluded}"
    say(f"{said}: exit {exits.REQUEUE}")
    return exits.REQUEUE


def exclusions(job: Job, blamed: Sequence[str], nodelist: Optional[str]) -> Optional[str]:
    """Excludes the drained nodes and those that failed twice in this job from the requeued
    job (``scontrol update ExcNodeList``), as many as its partition can spare; returns what
    was done, in words (None where there is nothing to exclude)."""
    assert job.job is not None
    states = node_states(nodelist) if nodelist else None
    nodes: List[str] = list(dict.fromkeys([*drained(states), *lemons(blamed)]))
    if not nodes:
        return None
    partition = job_partition(job.job)
    usable = partition_usable(partition) if partition else None
    size = len(states) if states else None
    chosen = excludable(nodes, usable, size or 0) if size else []
    if not chosen:
        return (f"{', '.join(nodes)} not excluded from the next run: partition "
                f"{partition or '?'} has no node to spare for them")
    done, what = exclude(job.job, chosen)
    return f"{'excluded' if done else 'could not exclude'} {', '.join(chosen)} ({what})"
