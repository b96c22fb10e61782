"""supervise's requeue, the edge: a last look at what came to supervise since the run ended
(a scancel that lands between the step's exit and the requeue wins), ``scontrol requeue``,
then the nodes the next run must not get (drained, or failed twice in this job) excluded
from the pending job where its partition can do without them.
"""

from __future__ import annotations

import signal
import socket
import time
from typing import List, Optional, Sequence, Tuple

from mpi_resolver.long_jobs import exits
from mpi_resolver.long_jobs.nodes import excludable, unwanted
from mpi_resolver.long_jobs.policy import Came, came_of
from mpi_resolver.long_jobs.requeue import job_ending, requeue
from mpi_resolver.long_jobs.slurm_nodes import (current_exclusions, drained, exclude,
                                                job_partition, merged_exclusions, node_states,
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
    Slurm ends the job instead). The nodes to exclude are found first, while the job runs
    (Slurm's SIGTERM after the requeue leaves supervise KillWait), and set on the pending
    job right after the requeue (Slurm refuses it for a running job)."""
    assert job.job is not None  # the policy requeues a Slurm job only
    now = came_now(job, signals)
    if now in (Came.JOB_ENDS, Came.HANGUP):
        say(f"{verdict.line}; but {now.value} came to supervise since: job {job.job} is not "
            f"requeued: exit {exits.TERMINATED}")
        return exits.TERMINATED
    plan = exclusions(job, blamed, nodelist)
    outcome = requeue(job.job, socket.gethostname(), exits.REQUEUE, timeout=_left(signals),
                      fallback=False)
    said = f"{verdict.line}; {outcome.message}"
    if outcome.done and plan is not None:
        chosen, merged, refused = plan
        if chosen:
            done, what = exclude(job.job, merged)
            said += f"; {'excluded' if done else 'could not exclude'} {', '.join(chosen)} ({what})"
        else:
            said += f"; {refused}"
    say(f"{said}: exit {exits.REQUEUE}")
    return exits.REQUEUE


def exclusions(job: Job, blamed: Sequence[str], nodelist: Optional[str]
               ) -> Optional[Tuple[List[str], str, str]]:
    """Returns what to exclude from the requeued job: (the drained nodes and those that
    failed twice in this job, as many as its partition can spare; the job's ExcNodeList with
    them; why none where none can be), None where no node is to be excluded."""
    assert job.job is not None
    states = node_states(nodelist) if nodelist else None
    nodes = unwanted(blamed, drained(states))
    if not nodes:
        return None
    partition = job_partition(job.job)
    usable = partition_usable(partition) if partition else None
    chosen = excludable(nodes, usable, len(states)) if states else []
    refused = (f"{', '.join(nodes)} not excluded from the next run: partition "
               f"{partition or '?'} has no node to spare for them")
    merged = merged_exclusions(current_exclusions(job.job), chosen)
    return chosen, merged, refused
