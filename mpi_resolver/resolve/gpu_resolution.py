"""Every rank's GPUs for a resolution: what each task finds out (gpu_lists), the allocation
rules (gpu_allocation) applied to it from Slurm's variables alone or from the ranks' records,
and the notes that say what was done (pure but for the probe it is given)."""

from __future__ import annotations

from dataclasses import replace
from typing import Callable, Dict, List, Mapping, Optional, Sequence, Tuple

from mpi_resolver.core.errors import ResolutionError
from mpi_resolver.core.agreement import NodeSummary
from mpi_resolver.gpus.allocation import (GpuAllocation, allocate_nodes, allocate_own,
                                          allocate_uniform)
from mpi_resolver.gpus.counts import NO_LIMIT, divided_fit, group_lists, job_counts
from mpi_resolver.gpus.lists import (Gpus, SlurmGpus, is_bound, needs_probe,
                         parse_visible_devices, task_list)
from mpi_resolver.placement.layout import Layout, Runs, count_runs, host_of_rank
from mpi_resolver.gpus.mig import Probed, is_mig, mig_note
from mpi_resolver.options import Options
from mpi_resolver.exchange.records import RankRecord, gpu_conflicts

#: probe() -> (GPUs on this node, True when it is CPU-only); see gpu_discovery.probe_gpus.
Probe = Callable[[], Tuple[Probed, bool]]
#: (host, record) of each rank, in rank order.
Ranks = Sequence[Tuple[str, RankRecord]]


def discover(opts: Options, env: Mapping[str, str], probe: Probe, may_probe: bool
             ) -> Tuple[Optional[Gpus], SlurmGpus, Optional[Probed], bool]:
    """Returns what this task finds out about its GPUs: (CUDA_VISIBLE_DEVICES entries, Slurm's
    GPU variables, nvidia-smi's count, CPU-only); nvidia-smi runs only where ``may_probe`` and
    neither CUDA_VISIBLE_DEVICES nor Slurm nor gpus_per_node says."""
    visible = parse_visible_devices(env.get("CUDA_VISIBLE_DEVICES"))
    slurm = SlurmGpus.read(env)
    probed, cpu_only = None, False
    if may_probe and needs_probe(visible, slurm, opts.gpus_per_node):
        probed, cpu_only = probe()
    return visible, slurm, probed, cpu_only


def for_record(opts: Options, env: Mapping[str, str], probe: Probe, may_probe: bool
               ) -> Callable[[], Tuple[Optional[Gpus], Optional[Probed], bool]]:
    """Returns what records.local_record calls for this rank's GPUs: discover's answer
    without Slurm's variables (the record reads those itself)."""
    def found() -> Tuple[Optional[Gpus], Optional[Probed], bool]:
        visible, _, probed, cpu_only = discover(opts, env, probe, may_probe)
        return visible, probed, cpu_only
    return found


def node_summary(opts: Options, node: List[RankRecord]) -> NodeSummary:
    """Returns what this node's records say of its GPUs for the exchange: the GPUs per task
    its ranks could divide (or NO_LIMIT), the fewest and most a rank takes left to itself,
    and whether it has a problem every rank must see (GPU lists that conflict, or that
    cannot be given)."""
    try:
        lists, said_by = _task_lists(opts, [(r.host, r) for r in node])
        allocate_nodes(lists, opts.gpus_per_task, said_by=said_by, uneven=True)
    except ResolutionError:
        return NodeSummary(per_task=NO_LIMIT, fewest=0, most=0, problem=True)
    groups = {host: group_lists(per_rank) for host, per_rank in lists.items()}
    fewest, most = job_counts(groups)
    return NodeSummary(per_task=divided_fit(groups[node[0].host]), fewest=fewest, most=most,
                       problem=bool(gpu_conflicts(node)))


def _cpu_only_note(hosts: Sequence[str]) -> str:
    shown = ", ".join(hosts[:3]) + (f" and {len(hosts) - 3} more" if len(hosts) > 3 else "")
    return (f"no GPUs found on {shown} (no nvidia-smi, no /dev/nvidia* devices, "
            "CUDA_VISIBLE_DEVICES and SLURM_GPUS_ON_NODE unset): running on CPU.")


def _ignored_note(gpus_per_node: int, bind: Optional[str]) -> str:
    how = f"SLURMD_TRES_BIND=gpu:{bind}" if bind else "fewer GPUs than SLURM_GPUS_ON_NODE"
    return (f"gpus_per_node={gpus_per_node} is ignored for tasks that Slurm bound GPUs to "
            f"({how}): each keeps the GPUs Slurm gave it.")


def _unchecked_note(host: str, gpus: Gpus) -> str:
    return (f"the other nodes' GPUs are not checked without MPI: each is taken to have what "
            f"{host} has ({','.join(gpus)}), as TensorFlow does; start the job with srun "
            "--mpi=pmix to check that every worker gets the same number.")


def _with_mig_note(gpus: GpuAllocation, hosts: Sequence[str]) -> GpuAllocation:
    """Returns ``gpus`` with the MIG note (_mig.mig_note) where a node of ``hosts`` has MIG
    devices."""
    host = next((h for h in hosts if is_mig(gpus.node_gpus(h))), None)
    return gpus if host is None else replace(gpus, notes=gpus.notes + (mig_note(host),))


def gpus_from_slurm(opts: Options, env: Mapping[str, str], host: str, index: int,
                    tasks_per_host: Mapping[str, int], probe: Probe) -> GpuAllocation:
    """Returns the GPUs from this task's own variables (no MPI): its own list where Slurm
    bound GPUs to it, else its node's list, which every node is taken to have (as
    TensorFlow does). This task is the ``index``-th of ``host``; ``tasks_per_host``: {host:
    its tasks} of the step."""
    gpus = _slurm_gpus(opts, env, host, index, tasks_per_host, probe)
    return _with_mig_note(gpus, [host])


def gpus_before_mpi(opts: Options, env: Mapping[str, str], runs: Optional[Runs],
                    rank: int) -> Optional[Gpus]:
    """Returns this rank's GPUs as Slurm's variables alone give them, for
    CUDA_VISIBLE_DEVICES before MPI starts (a CUDA-aware MPI may start CUDA in MPI_Init):
    None where Slurm's placement (``runs``) is unknown, where only nvidia-smi could say, or
    where they give no answer (the resolution then says why)."""
    visible = parse_visible_devices(env.get("CUDA_VISIBLE_DEVICES"))
    if runs is None or needs_probe(visible, SlurmGpus.read(env), opts.gpus_per_node):
        return None
    try:
        host, index = host_of_rank(runs, rank)
        return gpus_from_slurm(opts, env, host, index, count_runs(runs), _never).at(host,
                                                                                  index)[0]
    except ResolutionError:
        return None


def _never() -> Tuple[Probed, bool]:
    raise ResolutionError("internal: nvidia-smi is not run before MPI starts.")


def _slurm_gpus(opts: Options, env: Mapping[str, str], host: str, index: int,
                tasks_per_host: Mapping[str, int], probe: Probe) -> GpuAllocation:
    """Returns gpus_from_slurm's answer without the MIG note."""
    visible, slurm, probed, cpu_only = discover(opts, env, probe, True)
    if is_bound(visible, slurm):
        assert visible is not None  # is_bound says so
        gpus = allocate_own(visible, host, index, tasks_per_host[host], slurm,
                            opts.gpus_per_task)
        if opts.gpus_per_node is not None:
            return GpuAllocation(gpus.nodes, gpus.per_task,
                                 gpus.notes + (_ignored_note(opts.gpus_per_node, slurm.bind),))
        return gpus
    own = task_list(visible, slurm, probed, opts.gpus_per_node)
    if own is None:  # discover ran nvidia-smi wherever nothing else says: never here
        raise ResolutionError(f"nothing says how many GPUs {host} has; set gpus_per_node.")
    gpus = allocate_uniform(own.gpus, tasks_per_host, opts.gpus_per_task, host,
                            own.said_by, opts.uneven_gpus)
    if own.gpus and len(tasks_per_host) > 1 and opts.gpus_per_task is None:
        gpus = replace(gpus, notes=gpus.notes + (_unchecked_note(host, own.gpus),))
    if cpu_only:
        return GpuAllocation(gpus.nodes, gpus.per_task, gpus.notes + (_cpu_only_note([host]),),
                             gpus.tasks, gpus.by_count)
    return gpus


def _task_lists(opts: Options, ranks: Ranks
                ) -> Tuple[Dict[str, List[Gpus]], Dict[str, str]]:
    """Returns ({host: the GPU list of each of its ranks, in rank order}, {host: what said
    its first rank's list}) (gpu_lists.task_list), nvidia-smi's count coming from the rank of
    that host that ran it.

    Raises:
      ResolutionError: a host none of whose ranks could say.
    """
    probed: Dict[str, Probed] = {}
    for host, r in ranks:
        if r.probed is not None:
            probed.setdefault(host, r.probed)
    lists: Dict[str, List[Gpus]] = {}
    said_by: Dict[str, str] = {}
    for host, r in ranks:
        found = task_list(r.visible, r.slurm_gpus(), probed.get(host), opts.gpus_per_node)
        if found is None:
            raise ResolutionError(
                f"no rank on {host} reported its GPUs (CUDA_VISIBLE_DEVICES and "
                "SLURM_GPUS_ON_NODE unset, and no local rank 0 ran nvidia-smi); set "
                "gpus_per_node or CUDA_VISIBLE_DEVICES.")
        lists.setdefault(host, []).append(found.gpus)
        said_by.setdefault(host, found.said_by)
    return lists, said_by


def _gpu_notes(opts: Options, ranks: Ranks) -> List[str]:
    """Returns the notes on CPU-only hosts and on gpus_per_node ignored for bound tasks."""
    notes = []
    cpu_hosts = list(dict.fromkeys(h for h, r in ranks if r.cpu_only))
    if cpu_hosts:
        notes.append(_cpu_only_note(cpu_hosts))
    bound = next((r for _, r in ranks if is_bound(r.visible, r.slurm_gpus())), None)
    if opts.gpus_per_node is not None and bound is not None:
        notes.append(_ignored_note(opts.gpus_per_node, bound.gpu_bind))
    return notes


def _allocate(opts: Options, placement: Sequence[str], records: Sequence[RankRecord],
              divided_per_task: Optional[int] = None,
              counts: Optional[Tuple[int, int]] = None) -> GpuAllocation:
    """Returns the GPUs of the ranks of ``records`` (gpu_allocation.allocate_nodes), with
    notes; ``divided_per_task`` and ``counts`` from the exchange where ``records`` are one
    node's.

    Raises:
      ValueError: ``placement`` and ``records`` of different lengths.
    """
    ranks = list(zip(placement, records, strict=True))
    lists, said_by = _task_lists(opts, ranks)
    gpus = allocate_nodes(lists, opts.gpus_per_task, said_by=said_by,
                          tasks_per_gpu=max((r.tasks_per_gpu for r in records
                                             if r.tasks_per_gpu), default=None),
                          divided_per_task=divided_per_task, uneven=opts.uneven_gpus,
                          counts=counts)
    return _with_mig_note(GpuAllocation(gpus.nodes, gpus.per_task,
                                        gpus.notes + tuple(_gpu_notes(opts, ranks))), list(lists))


def gpus_from_records(opts: Options, layout: Layout,
                       records: List[RankRecord]) -> GpuAllocation:
    """Returns every rank's GPUs from every rank's record."""
    return _allocate(opts, layout.placement, records)


def gpus_from_node(opts: Options, host: str, node: List[RankRecord], per_task: Optional[int],
                   counts: Optional[Tuple[int, int]] = None) -> GpuAllocation:
    """Returns the GPUs of this rank's node (``node``: its ranks' records, named ``host``),
    with ``per_task`` the job's GPUs per task of divided lists (from the exchange: NO_LIMIT
    where no node divides one, this node included, so it divides none either) and
    ``counts`` the (fewest, most) GPUs any rank of the job takes."""
    return _allocate(opts, [host] * len(node), node, per_task, counts)
