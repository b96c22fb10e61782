"""Where each rank runs (placement) and the ClusterSpec layout built from it (pure).

A placement is a list: ``placement[rank]`` is the host that rank runs on; ``runs`` is the same
as [(host, consecutive ranks)], which stays small for 100,000 nodes. TensorFlow's
SlurmClusterResolver assumes ``tf_runs``: hosts sorted as strings, consecutive ranks packed
onto each. The layout gives every rank ``host:port_base+i`` where ``i`` counts the ranks
before it on its host: for TensorFlow's placement this is exactly TensorFlow's ClusterSpec.
Where the ports were picked per rank (port_base='auto' with MPI), it takes them as given.
Which GPUs each rank gets is binding.py's business.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Iterator, List, Mapping, Optional, Sequence, Tuple, Union

from mpi_resolver.core.errors import MismatchError, ResolutionError
from mpi_resolver.placement.host_names import HostIndex, same_host
from mpi_resolver.placement.hostlist import check_host_name
from mpi_resolver.core.values import PORT_MAX


Runs = List[Tuple[str, int]]   # [(host, consecutive ranks on it)], in rank order


def expand_runs(runs: Runs) -> List[str]:
    """Returns the per-rank placement of ``runs``: [('a', 2), ('b', 1)] -> ['a', 'a', 'b']."""
    placement: List[str] = []
    for host, count in runs:
        placement.extend([host] * count)
    return placement


def runs_of(placement: Sequence[str]) -> Runs:
    """Returns ``placement`` as runs of consecutive ranks on one host."""
    runs: Runs = []
    for host in placement:
        if runs and runs[-1][0] == host:
            runs[-1] = (host, runs[-1][1] + 1)
        else:
            runs.append((host, 1))
    return runs


def tf_runs(task_configuration: Mapping[str, int]) -> Runs:
    """Returns the runs TensorFlow assumes: sorted host names, ranks packed block-wise."""
    return sorted(task_configuration.items())


def slurm_runs(hosts: Sequence[str], counts: Sequence[int], distribution: str) -> Optional[Runs]:
    """Returns where Slurm put each rank, as runs, from the step's nodes, counts, distribution.

    ``block``: ranks fill the nodes in SLURM_STEP_NODELIST order. ``cyclic``: one rank per
    node in turn, skipping nodes that are full (``-N2 -n4`` gives node1, node2, node1, node1).
    None for ``plane``, ``arbitrary`` and unknown distributions, which the variables do not
    describe, except on one node or with one task per node, where block is the answer (for
    ``arbitrary``, only on one node: its order follows SLURM_HOSTFILE).
    """
    if len(hosts) > 1 and distribution == "arbitrary":
        return None
    if distribution == "block" or len(hosts) <= 1 or all(n <= 1 for n in counts):
        return list(zip(hosts, counts, strict=True))
    if distribution == "cyclic":
        remaining = list(counts)
        placement: List[str] = []
        total = sum(counts)
        while len(placement) < total:
            for i, host in enumerate(hosts):
                if remaining[i]:
                    remaining[i] -= 1
                    placement.append(host)
        return runs_of(placement)
    return None


def slurm_placement(hosts: Sequence[str], counts: Sequence[int],
                    distribution: str) -> Optional[List[str]]:
    """Returns ``slurm_runs`` as a per-rank placement (or None)."""
    runs = slurm_runs(hosts, counts, distribution)
    return None if runs is None else expand_runs(runs)


def run_offsets(runs: Runs) -> Iterator[Tuple[str, int, int]]:
    """Yields (host, ranks in the run, index of its first rank among that host's ranks)."""
    seen: Dict[str, int] = {}
    for host, n in runs:
        first = seen.get(host, 0)
        yield host, n, first
        seen[host] = first + n


def host_of_rank(runs: Runs, rank: int) -> Tuple[str, int]:
    """Returns (host, index among the ranks on that host) of ``rank``.

    Raises:
      ResolutionError: ``rank`` is outside the runs.
    """
    start = 0
    for host, n, first in run_offsets(runs):
        if rank < start + n:
            return host, first + rank - start
        start += n
    raise ResolutionError(f"rank {rank} is outside the job's {start} tasks.")


def ranks_on(runs: Runs, host: str) -> List[int]:
    """Returns the ranks that ``runs`` put on ``host``, in order."""
    out: List[int] = []
    start = 0
    for h, n in runs:
        if h == host:
            out.extend(range(start, start + n))
        start += n
    return out


def count_per_host(placement: Sequence[str]) -> Dict[str, int]:
    """Returns {host: number of ranks on it}, hosts in order of first appearance."""
    return count_runs(runs_of(placement))


def count_runs(runs: Runs) -> Dict[str, int]:
    """Returns {host: number of ranks on it} from runs, hosts in order of first appearance."""
    counts: Dict[str, int] = {}
    for host, n in runs:
        counts[host] = counts.get(host, 0) + n
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


@dataclass
class Layout:
    """The ClusterSpec of a job and each rank's task and address."""

    runs: Runs
    port_base: int
    jobs: List[Tuple[str, int, int]]
    addresses: List[str]
    tasks_per_host: Dict[str, int]

    @property
    def cluster(self) -> Dict[str, List[str]]:
        """Returns {job name: [address of task 0, task 1, ...]}, jobs in sorted order."""
        return {name: self.addresses[start:start + count] for name, start, count in self.jobs}

    @property
    def placement(self) -> List[str]:
        """Returns the host of every rank."""
        return expand_runs(self.runs)

    @property
    def local_index(self) -> List[int]:
        """Returns every rank's index among the ranks on its host."""
        out: List[int] = []
        for _, n, first in run_offsets(self.runs):
            out.extend(range(first, first + n))
        return out

    def host_of(self, rank: int) -> Tuple[str, int]:
        """Returns (host, index among the ranks on that host) of ``rank``."""
        return host_of_rank(self.runs, rank)

    def port_of(self, rank: int) -> int:
        """Returns the port in ``rank``'s address."""
        return int(self.addresses[rank].split(":")[-1])

    def task_of(self, rank: int) -> Tuple[str, int]:
        """Returns (task_type, task_id) of ``rank``."""
        for name, start, count in self.jobs:
            if start <= rank < start + count:
                return name, rank - start
        raise ResolutionError(f"rank {rank} is outside the job's {len(self.addresses)} tasks.")


def build_layout_runs(runs: Runs, *, jobs: Mapping[str, int], port_base: int,
                      ports: Optional[Sequence[int]] = None) -> Layout:
    """Returns the layout for ``runs``: every rank's address and task. ``ports``: every rank's
    port, where each rank picked its own; else ``port_base`` and up on each host.

    Raises:
      ResolutionError: jobs that do not add up, a port above 65535, or two ranks of one host
        given one port.
    """
    tasks = count_runs(runs)
    num_tasks = sum(tasks.values())
    job_slices = assign_jobs(jobs, num_tasks)
    if ports is not None:
        return Layout(runs, port_base, job_slices, _given_ports(runs, ports), tasks)
    max_tasks = max(tasks.values())
    if port_base + max_tasks - 1 > PORT_MAX:
        raise ResolutionError(
            f"port_base={port_base} with {max_tasks} tasks on one node needs port "
            f"{port_base + max_tasks - 1}, above {PORT_MAX}; use a lower port_base "
            "(--port-base).")
    suffixes = [f":{port_base + i}" for i in range(max_tasks)]
    addresses: List[str] = []
    if len(tasks) == len(runs):  # every host holds one run of ranks: block-wise
        for host, n in runs:
            addresses += [host + s for s in suffixes[:n]]
    else:
        for host, n, first in run_offsets(runs):
            addresses += [host + s for s in suffixes[first:first + n]]
    return Layout(runs, port_base, job_slices, addresses, tasks)


def _given_ports(runs: Runs, ports: Sequence[int]) -> List[str]:
    """Returns every rank's address from its host and its own port; raises ResolutionError
    where two ranks of one host have one port."""
    addresses: List[str] = []
    taken: Dict[Tuple[str, int], int] = {}
    for rank, (host, port) in enumerate(zip(expand_runs(runs), ports, strict=True)):
        other = taken.setdefault((host, port), rank)
        if other != rank:
            raise ResolutionError(
                f"ranks {other} and {rank} on {host} were both given port {port}; resolve "
                "again, or pass a number as port_base.")
        addresses.append(f"{host}:{port}")
    return addresses


def check_own_placement(runs: Runs, rank: int, nodename: Optional[str],
                        gtids: Optional[Sequence[int]], fix: str) -> None:
    """Raises MismatchError when this rank's own Slurm variables contradict ``runs``.

    ``nodename`` is SLURMD_NODENAME, ``gtids`` SLURM_GTIDS; ``fix`` ends the message.
    """
    if nodename is None:
        return
    mine = host_of_rank(runs, rank)[0] if 0 <= rank < sum(n for _, n in runs) else None
    on_node: List[int] = []
    start = 0
    for host, n in runs:
        if same_host(host, nodename):
            on_node.extend(range(start, start + n))
        start += n
    if mine is not None and not same_host(mine, nodename):
        raise MismatchError(
            f"Slurm's step variables place rank {rank} on {mine} but "
            f"SLURMD_NODENAME={nodename}: the addresses would point at hosts where ranks do "
            f"not run. {fix}")
    if gtids is not None and tuple(sorted(gtids)) != tuple(on_node):
        raise MismatchError(
            f"SLURM_GTIDS={','.join(map(str, gtids))} on {nodename}, but the step "
            f"variables place ranks {','.join(map(str, on_node))} there. {fix}")


def mpi_runs(placement: List[str], declared: Union[None, int, Mapping[str, int]] = None
             ) -> Runs:
    """Returns where MPI ranks run (``placement``: every rank's host), as runs, each host's
    name checked, and checked against a ``declared`` tasks_per_node.

    Raises:
      FormatError: a host name that cannot be in a 'host:port' address.
      MismatchError: ``declared`` contradicts where the ranks run.
    """
    first_rank: Dict[str, int] = {}
    for rank, host in enumerate(placement):
        first_rank.setdefault(host, rank)
    for host, rank in first_rank.items():  # each host once, named by its first rank
        check_host_name(host, what=f"host name of MPI rank {rank}")
    if declared is not None:
        _check_declared(declared, placement)
    return runs_of(placement)


def _check_declared(declared: Union[int, Mapping[str, int]], placement: List[str]) -> None:
    """Raises MismatchError when a given tasks_per_node contradicts where MPI ranks run."""
    actual = count_per_host(placement)
    expected = {h: declared for h in actual} if isinstance(declared, int) else dict(declared)
    index = HostIndex(expected)
    matched = {index.find(h): n for h, n in actual.items()}
    if matched != expected:
        raise MismatchError(
            f"tasks_per_node={declared!r} does not match where MPI ranks run: "
            f"{dict(actual)!r}. Leave tasks_per_node unset to use MPI's placement.")
