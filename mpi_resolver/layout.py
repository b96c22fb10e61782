"""Where each rank runs (placement) and the ClusterSpec layout built from it (pure).

A placement is a list: ``placement[rank]`` is the host that rank runs on. TensorFlow's
SlurmClusterResolver assumes ``tf_placement``: hosts sorted as strings, consecutive ranks
packed onto each. The layout gives every rank ``host:port_base+i`` where ``i`` counts the
ranks before it on its host, and GPUs ``[i*g, (i+1)*g)`` of its node's list: for TensorFlow's
placement this is exactly TensorFlow's ClusterSpec and CUDA_VISIBLE_DEVICES.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

from .errors import MismatchError, ResolutionError

__all__ = ["tf_placement", "slurm_placement", "Layout", "build_layout", "assign_jobs",
           "count_per_host", "gpus_per_task_default"]


def tf_placement(task_configuration: Mapping[str, int]) -> List[str]:
    """Returns the placement TensorFlow assumes: sorted host names, ranks packed block-wise."""
    placement: List[str] = []
    for host, count in sorted(task_configuration.items()):
        placement.extend([host] * count)
    return placement


def slurm_placement(hosts: Sequence[str], counts: Sequence[int],
                    distribution: str) -> Optional[List[str]]:
    """Returns where Slurm put each rank, from the step's nodes, counts and distribution.

    ``block``: ranks fill the nodes in SLURM_STEP_NODELIST order. ``cyclic``: one rank per
    node in turn, skipping nodes that are full (``-N2 -n4`` gives node1, node2, node1, node1).
    None for ``plane``, ``arbitrary`` and unknown distributions, which the variables do not
    describe, except on one node or with one task per node, where block is the answer (for
    ``arbitrary``, only on one node: its order follows SLURM_HOSTFILE).
    """
    if len(hosts) > 1 and distribution == "arbitrary":
        return None  # ranks follow SLURM_HOSTFILE, which the step's variables do not carry
    if distribution == "block" or len(hosts) <= 1 or max(counts, default=0) <= 1:
        placement: List[str] = []
        for host, count in zip(hosts, counts):
            placement.extend([host] * count)
        return placement
    if distribution == "cyclic":
        remaining = list(counts)
        placement = []
        total = sum(counts)
        while len(placement) < total:
            for i, host in enumerate(hosts):
                if remaining[i]:
                    remaining[i] -= 1
                    placement.append(host)
        return placement
    return None


def count_per_host(placement: Sequence[str]) -> Dict[str, int]:
    """Returns {host: number of ranks on it}, hosts in order of first appearance."""
    counts: Dict[str, int] = {}
    for host in placement:
        counts[host] = counts.get(host, 0) + 1
    return counts


def assign_jobs(jobs: Mapping[str, int], num_tasks: int) -> List[Tuple[str, int, int]]:
    """Returns [(job name, first rank, count)] with jobs in sorted name order, as TensorFlow.

    Raises:
      ResolutionError: the job counts do not add up to ``num_tasks``.
    """
    out, start = [], 0
    for name, count in sorted(jobs.items()):
        out.append((name, start, count))
        start += count
    if start != num_tasks:
        raise ResolutionError(
            f"jobs={dict(jobs)!r} asks for {start} tasks but the job has {num_tasks}; make the "
            f"counts add up to {num_tasks} (e.g. jobs={{'worker': {num_tasks}}}) or change "
            "the number of tasks (srun -n / mpirun -n).")
    return out


def gpus_per_task_default(tasks: Mapping[str, int], gpus: Mapping[str, int]) -> int:
    """Returns the GPUs each task gets when not given: min over nodes of GPUs // tasks.

    For nodes that are all alike this is TensorFlow's ``gpus_per_node // max_tasks_per_node``.
    """
    return min((gpus[h] // n for h, n in tasks.items()), default=0)


@dataclass
class Layout:
    """The ClusterSpec of a job and each rank's task, address and GPUs."""

    placement: List[str]
    port_base: int
    jobs: List[Tuple[str, int, int]]
    node_gpus: Mapping[str, Sequence[str]]
    gpus_per_task: int
    addresses: List[str] = field(default_factory=list)
    local_index: List[int] = field(default_factory=list)
    tasks_per_host: Dict[str, int] = field(default_factory=dict)

    @property
    def cluster(self) -> Dict[str, List[str]]:
        """Returns {job name: [address of task 0, task 1, ...]}, jobs in sorted order."""
        return {name: self.addresses[start:start + count] for name, start, count in self.jobs}

    def task_of(self, rank: int) -> Tuple[str, int]:
        """Returns (task_type, task_id) of ``rank``."""
        for name, start, count in self.jobs:
            if start <= rank < start + count:
                return name, rank - start
        raise ResolutionError(f"rank {rank} is outside the job's {len(self.addresses)} tasks.")

    def gpus_of(self, rank: int) -> Tuple[str, ...]:
        """Returns the CUDA_VISIBLE_DEVICES entries of ``rank``: its slice of its node's GPUs."""
        g = self.gpus_per_task
        i = self.local_index[rank]
        return tuple(self.node_gpus[self.placement[rank]][i * g:(i + 1) * g])


def build_layout(placement: List[str], *, jobs: Mapping[str, int], port_base: int,
                 node_gpus: Mapping[str, Sequence[str]],
                 gpus_per_task: Optional[int]) -> Layout:
    """Returns the layout for ``placement``: addresses, tasks and GPUs of every rank.

    Raises:
      ResolutionError: jobs that do not add up, a port above 65535, or more GPUs per task than
        a node has for its tasks.
    """
    num_tasks = len(placement)
    job_slices = assign_jobs(jobs, num_tasks)
    tasks = count_per_host(placement)
    max_tasks = max(tasks.values(), default=0)
    if port_base + max_tasks - 1 > 65535:
        raise ResolutionError(
            f"port_base={port_base} with {max_tasks} tasks on one node needs port "
            f"{port_base + max_tasks - 1}, above 65535; use a lower port_base (--port-base).")
    counts = {h: len(node_gpus[h]) for h in tasks}
    if gpus_per_task is None:
        gpus_per_task = gpus_per_task_default(tasks, counts)
    for host, n in tasks.items():
        if n * gpus_per_task > counts[host]:
            raise ResolutionError(
                f"{n} tasks x gpus_per_task={gpus_per_task} need {n * gpus_per_task} GPUs on "
                f"{host}, which has {counts[host]}; lower gpus_per_task (--gpus-per-task) or "
                "run fewer tasks per node.")
    suffixes = [f":{port_base + i}" for i in range(max_tasks)]
    if placement == sorted(placement):  # block-wise in sorted order: the fast, common case
        addresses: List[str] = []
        local_index: List[int] = []
        for host, n in tasks.items():
            addresses.extend([host + s for s in suffixes[:n]])
            local_index.extend(range(n))
    else:
        seen: Dict[str, int] = {}
        local_index = []
        for host in placement:
            i = seen.get(host, 0)
            seen[host] = i + 1
            local_index.append(i)
        addresses = [host + suffixes[i] for host, i in zip(placement, local_index)]
    return Layout(placement, port_base, job_slices, node_gpus, gpus_per_task, addresses,
                  local_index, tasks)


def check_own_placement(placement: Sequence[str], rank: int, nodename: Optional[str],
                        gtids: Optional[Sequence[int]], same_host) -> None:
    """Raises MismatchError when this rank's own Slurm variables contradict ``placement``.

    ``nodename`` is SLURMD_NODENAME, ``gtids`` SLURM_GTIDS; ``same_host(a, b)`` compares names.
    """
    if nodename is not None and not same_host(placement[rank], nodename):
        raise MismatchError(
            f"Slurm's step variables place rank {rank} on {placement[rank]} but "
            f"SLURMD_NODENAME={nodename}: the addresses would point at hosts where ranks do "
            "not run. Launch with `srun --mpi=pmix` so that mpi_resolver learns placement "
            "from MPI (source='auto'), or use --distribution=block.")
    if gtids is not None and nodename is not None:
        expected = tuple(r for r, h in enumerate(placement) if same_host(h, nodename))
        if tuple(sorted(gtids)) != expected:
            raise MismatchError(
                f"SLURM_GTIDS={','.join(map(str, gtids))} on {nodename}, but the step "
                f"variables place ranks {','.join(map(str, expected))} there. Launch with "
                "`srun --mpi=pmix` so that mpi_resolver learns placement from MPI "
                "(source='auto'), or use --distribution=block.")
