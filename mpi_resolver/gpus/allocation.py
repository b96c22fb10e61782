"""Which GPUs each rank gets: a node's list divided, or Slurm's per-task binding kept (pure).

What a task sees (CUDA_VISIBLE_DEVICES, Slurm's GPU variables, nvidia-smi's count) is its
*list*. Node by node:

- ranks that see the same list divide it among themselves in rank order, ``per_task`` entries
  each (TensorFlow's rule, right where every task of a node sees the node's GPUs);
- ranks that see different lists keep their own (Slurm bound GPUs to tasks: --gpus-per-task,
  --gpu-bind=single/map_gpu/mask_gpu/closest, --ntasks-per-gpu);
- a list shorter than the ranks that see it stays shared: each of them keeps all of it.

A rank never gets a GPU outside its own list, and never none where its list has some.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

from mpi_resolver.core.errors import ResolutionError
from mpi_resolver.gpus.counts import NO_LIMIT, divided_fit, even_count, group_lists, share_count
from mpi_resolver.gpus.lists import SLURM_SAYS, Gpus, SlurmGpus
from mpi_resolver.gpus.notes import KINDS, shared_note
from mpi_resolver.gpus.mig import capped, check_request, is_mig

__all__ = ["KINDS", "GpuAllocation", "NodeGpus", "Share", "allocate_nodes", "allocate_own",
           "allocate_uniform"]


@dataclass(frozen=True)
class Share:
    """One list of GPUs and how the ranks that see it use it.

    ``kind``: 'divided' (rank i of those that see it takes entries [i*per_task,
    (i+1)*per_task)), 'own' (one rank sees it and keeps ``per_task`` of it), 'shared' (fewer
    GPUs than ranks: each keeps ``per_task`` of it; where ``spread_over`` ranks are given,
    rank i takes ``per_task`` from entry i*len(gpus)//spread_over on, so that the GPUs are
    shared evenly) or 'none' (no GPUs).
    """

    gpus: Gpus
    kind: str
    per_task: int
    spread_over: int = 0

    def of(self, index: int) -> Gpus:
        """Returns the GPUs of the ``index``-th rank of those that see this list."""
        if self.kind == "divided":
            return self.gpus[index * self.per_task:(index + 1) * self.per_task]
        if self.spread_over:
            m = len(self.gpus)
            start = index * m // self.spread_over
            return tuple(self.gpus[(start + j) % m] for j in range(self.per_task))
        return self.gpus[:self.per_task]


@dataclass(frozen=True)
class NodeGpus:
    """The GPUs of one node's ranks, by their index among the node's ranks.

    ``slots`` None: one share that all the node's ranks divide (index = local index).
    Otherwise ``slots[local index]`` is (share, index among that share's ranks), or None where
    that rank's GPUs are unknown (Slurm-only resolution of a bound task knows only its own).
    """

    shares: Tuple[Share, ...]
    slots: Optional[Tuple[Optional[Tuple[int, int]], ...]] = None

    def at(self, index: int) -> Tuple[Optional[Gpus], str]:
        """Returns (GPUs, kind) of the node's ``index``-th rank; (None, 'unknown') if unknown."""
        if self.slots is None:
            share, i = self.shares[0], index
        else:
            slot = self.slots[index] if 0 <= index < len(self.slots) else None
            if slot is None:
                return None, "unknown"
            share, i = self.shares[slot[0]], slot[1]
        return share.of(i), share.kind


@dataclass(frozen=True)
class GpuAllocation:
    """Every rank's GPUs: ``nodes[host]``, else ``by_count[tasks[host]]`` (nodes alike)."""

    nodes: Mapping[str, NodeGpus]
    per_task: int                     # GPUs each rank of a divided list gets
    notes: Tuple[str, ...] = ()
    tasks: Optional[Mapping[str, int]] = None
    by_count: Optional[Mapping[int, NodeGpus]] = None

    def _node(self, host: str) -> Optional[NodeGpus]:
        """Returns the NodeGpus of ``host``: its own, else its count's; None if unknown."""
        node = self.nodes.get(host)
        count = (self.tasks or {}).get(host)
        if node is None and count is not None and self.by_count is not None:
            node = self.by_count.get(count)
        return node

    def at(self, host: str, index: int) -> Tuple[Optional[Gpus], str]:
        """Returns (GPUs, kind) of the ``index``-th rank on ``host`` (kind: see KINDS)."""
        node = self._node(host)
        if node is None:
            return None, "unknown"
        return node.at(index)

    def node_gpus(self, host: str) -> Gpus:
        """Returns every GPU the lists of ``host``'s ranks name, in order (() if unknown)."""
        node = self._node(host)
        shares = node.shares if node is not None else ()
        return tuple(dict.fromkeys(g for share in shares for g in share.gpus))


def _share(gpus: Gpus, ranks: int, per_task: Optional[int], host: str, *, explicit: bool,
           said_by: str, alone: bool = False, even: Optional[int] = None) -> Share:
    """Returns how ``ranks`` ranks of ``host`` that all see ``gpus`` use them (``alone``:
    this list is one rank's own, on a node whose ranks see different lists; ``said_by``: what
    gave the list, see gpu_lists.SAID_BY; ``even``: the GPUs every rank of the job takes,
    at most what this list gives each, where counts are evened out). Fewer GPUs than ranks
    are shared where Slurm gave the list, or where nothing asked for GPUs per task.

    Raises:
      ResolutionError: an explicit gpus_per_task that the list cannot give every rank.
    """
    share = _own_share(gpus, ranks, per_task, host, explicit=explicit, alone=alone,
                       said_by=said_by)
    if even is None or even >= share.per_task:  # (an explicit gpus_per_task has no even)
        return share
    return Share(gpus, share.kind, even, ranks)  # spread_over counts for 'shared' alone


def _own_share(gpus: Gpus, ranks: int, per_task: Optional[int], host: str, *, explicit: bool,
               alone: bool, said_by: str) -> Share:
    """Returns _share's answer before counts are evened out; a task takes one MIG device at
    most (_mig).

    Raises:
      ResolutionError: as _share, also an explicit gpus_per_task above one MIG device.
    """
    m = len(gpus)
    if explicit and per_task == 0:
        return Share((), "none", 0)
    check_request(per_task if explicit else None, gpus, host)
    if m == 0:
        if explicit:
            raise ResolutionError(
                f"gpus_per_task={per_task}, but the {_tasks(ranks)} on {host} "
                f"{'has' if ranks == 1 else 'have'} no GPUs "
                f"(from {said_by}); ask Slurm for GPUs (--gres=gpu:N or --gpus-per-task=N), or "
                "pass gpus_per_task=0 (--gpus-per-task 0) to run on CPU.")
        return Share((), "none", 0)
    if m < ranks and (not explicit or said_by in SLURM_SAYS):
        if explicit and per_task is not None and per_task > m:
            raise ResolutionError(
                f"gpus_per_task={per_task}, but the {ranks} tasks on {host} that see GPUs "
                f"{','.join(gpus)} share {m}; lower gpus_per_task (--gpus-per-task).")
        each = per_task if explicit and per_task is not None else m
        return Share(gpus, "shared", capped(each, gpus), ranks if is_mig(gpus) else 0)
    g = per_task or capped(m // ranks, gpus)  # an explicit 0 gave no GPUs above
    if ranks * g > m:
        need = "needs" if ranks == 1 else "need"
        raise ResolutionError(
            f"{_tasks(ranks)} x gpus_per_task={g} {need} {ranks * g} GPUs on {host}, which has "
            f"{m} (from {said_by}); lower gpus_per_task (--gpus-per-task) or run fewer tasks "
            "per node.")
    return Share(gpus, "own" if alone else "divided", g)


def _tasks(n: int) -> str:
    return "1 task" if n == 1 else f"{n} tasks"


def _note(host: str, shared: Sequence[Tuple[Share, int]], per_gpu: Optional[int]) -> str:
    """Returns gpu_notes.shared_note for (share, ranks that see it) of ``host``."""
    return shared_note(host, [(s.gpus, n, s.per_task, s.spread_over) for s, n in shared],
                       per_gpu)


def allocate_nodes(lists: Mapping[str, Sequence[Gpus]], gpus_per_task: Optional[int], *,
                   tasks_per_gpu: Optional[int] = None,
                   divided_per_task: Optional[int] = None,
                   said_by: Optional[Mapping[str, str]] = None, uneven: bool = False,
                   counts: Optional[Tuple[int, int]] = None) -> GpuAllocation:
    """Returns every rank's GPUs from the lists all ranks reported (MPI), node by node.

    ``lists[host]`` holds the list of each rank on ``host``, in rank order. Nodes whose ranks
    all see one list divide it with one ``per_task`` for the job: ``gpus_per_task``, or the
    smallest len(list) // ranks of those nodes (TensorFlow's gpus_per_node // tasks where
    nodes are alike, and the same number of GPUs for every task where they are not);
    ``divided_per_task`` gives that smallest number where ``lists`` hold only some nodes.
    ``said_by[host]``: what gave that host's lists (gpu_lists.SAID_BY; CUDA_VISIBLE_DEVICES
    where not given). Unless ``uneven``, every rank then takes the same number of GPUs, the
    fewest any rank of the job can take (job_counts; ``counts`` gives (fewest, most) where
    ``lists`` hold only some nodes): MultiWorkerMirroredStrategy needs that.

    Raises:
      ResolutionError: an explicit gpus_per_task more than a list can give its ranks; ranks
        with GPUs and ranks without in one job, unless ``uneven``.
    """
    explicit = gpus_per_task is not None
    groups = {host: group_lists(per_rank) for host, per_rank in lists.items()}
    even = None
    if gpus_per_task is None and not uneven:
        gpus_per_task = even = even_count(groups, counts)
    elif gpus_per_task is None:
        fit = divided_per_task if divided_per_task is not None else min(
            (divided_fit(by_list) for by_list in groups.values()), default=NO_LIMIT)
        gpus_per_task = 0 if fit >= NO_LIMIT else fit
    nodes, notes = _nodes(groups, gpus_per_task, explicit, said_by or {}, even, tasks_per_gpu)
    return GpuAllocation(nodes, gpus_per_task, tuple(notes))


def _nodes(groups: Mapping[str, Mapping[Gpus, Sequence[int]]], per_task: int, explicit: bool,
           said: Mapping[str, str], even: Optional[int], tasks_per_gpu: Optional[int]
           ) -> Tuple[Dict[str, NodeGpus], List[str]]:
    """Returns ({host: its NodeGpus}, the one note on shared GPUs) for allocate_nodes."""
    nodes: Dict[str, NodeGpus] = {}
    alike: Dict[Tuple[Gpus, int, str], NodeGpus] = {}  # many nodes are alike: one object for them
    notes: List[str] = []
    for host, by_list in groups.items():
        source = said.get(host, "CUDA_VISIBLE_DEVICES")
        if len(by_list) == 1:
            (gpus, ranks), = by_list.items()
            key = (gpus, len(ranks), source)
            if key not in alike:
                share = _share(gpus, len(ranks), per_task, host, explicit=explicit,
                               said_by=source, even=even)
                alike[key] = NodeGpus((share,))
                if share.kind == "shared" and not notes:
                    notes.append(_note(host, [(share, len(ranks))], tasks_per_gpu))
            nodes[host] = alike[key]
        else:
            ranks_on_host = sum(len(ranks) for ranks in by_list.values())
            nodes[host], shared = _node_of_lists(host, by_list, ranks_on_host,
                                                 per_task if explicit else None, source, even)
            if shared and not notes:
                notes.append(_note(host, shared, tasks_per_gpu))
    return nodes, notes


def _node_of_lists(host: str, by_list: Mapping[Gpus, Sequence[int]], ranks_on_host: int,
                   gpus_per_task: Optional[int], said_by: str, even: Optional[int]
                   ) -> Tuple[NodeGpus, List[Tuple[Share, int]]]:
    """Returns the GPUs of a node whose ranks see different lists (each list its own share),
    and the shares that stay shared with their number of ranks."""
    shares: List[Share] = []
    slots: List[Optional[Tuple[int, int]]] = [None] * ranks_on_host
    shared: List[Tuple[Share, int]] = []
    for gpus, ranks in by_list.items():
        share = _share(gpus, len(ranks), gpus_per_task, host,
                       explicit=gpus_per_task is not None, alone=len(ranks) == 1,
                       said_by=said_by, even=even)
        if share.kind == "shared":
            shared.append((share, len(ranks)))
        for i, index in enumerate(ranks):
            slots[index] = (len(shares), i)
        shares.append(share)
    return NodeGpus(tuple(shares), tuple(slots)), shared


def allocate_uniform(gpus: Gpus, tasks: Mapping[str, int], gpus_per_task: Optional[int],
                     host: Optional[str] = None,
                     said_by: str = "CUDA_VISIBLE_DEVICES",
                     uneven: bool = False) -> GpuAllocation:
    """Returns every rank's GPUs where every node is taken to have ``gpus`` (as TensorFlow
    assumes when it reads Slurm's variables alone): nodes of ``tasks`` ({host: ranks}), the
    list said by ``said_by``; unless ``uneven``, every rank takes as many as the fewest (as
    allocate_nodes). Notes speak of ``host`` alone (this rank's: the others' GPUs are an
    assumption).

    Raises:
      ResolutionError: an explicit gpus_per_task that the list cannot give (_share).
    """
    counts = sorted(set(tasks.values()))
    explicit = gpus_per_task is not None
    even = None
    if gpus_per_task is None and not uneven:
        gpus_per_task = even = min((capped(share_count(len(gpus), n), gpus) for n in counts),
                                   default=0)
    elif gpus_per_task is None:
        gpus_per_task = min((capped(len(gpus) // n, gpus) for n in counts if len(gpus) >= n),
                            default=0)
    by_count: Dict[int, NodeGpus] = {}
    notes: List[str] = []
    for n in counts:
        named = next(h for h, k in tasks.items() if k == n)
        share = _share(gpus, n, gpus_per_task, named, explicit=explicit, said_by=said_by,
                       even=even)
        if share.kind == "shared" and host is not None and tasks.get(host) == n:
            notes.append(_note(host, [(share, n)], None))
        by_count[n] = NodeGpus((share,))
    return GpuAllocation({}, gpus_per_task, tuple(notes), tasks, by_count)


def allocate_own(gpus: Gpus, host: str, index: int, ranks_on_host: int, slurm: SlurmGpus,
                 gpus_per_task: Optional[int]) -> GpuAllocation:
    """Returns this rank's own GPUs, bound by Slurm, where Slurm's variables alone are read:
    other ranks' GPUs are unknown (their lists are theirs).

    Raises:
      ResolutionError: gpus_per_task above the number of GPUs Slurm bound to this task, or
        above one MIG device.
    """
    check_request(gpus_per_task, gpus, host)
    g = capped(len(gpus), gpus) if gpus_per_task is None else gpus_per_task
    if g > len(gpus):
        raise ResolutionError(
            f"gpus_per_task={g}, but Slurm bound {len(gpus)} GPU(s) ({','.join(gpus)}) to this "
            f"task on {host} (SLURMD_TRES_BIND=gpu:{slurm.bind}); lower gpus_per_task "
            "(--gpus-per-task).")
    per_gpu = slurm.tasks_per_gpu if slurm.tasks_per_gpu and slurm.tasks_per_gpu > 1 else None
    notes: Tuple[str, ...] = ()
    if not gpus or g == 0:
        share = Share((), "none", 0)
    elif per_gpu is not None:
        share = Share(gpus, "shared", g)
        notes = (_note(host, [(share, per_gpu)], per_gpu),)
    else:
        share = Share(gpus, "own", g)
    slots = tuple((0, 0) if i == index else None for i in range(ranks_on_host))
    return GpuAllocation({host: NodeGpus((share,), slots)}, share.per_task, notes)
