"""Per-rank records, and the comparison of Slurm's view of the job with MPI's (pure)."""

from __future__ import annotations

import json
from dataclasses import dataclass, fields
from functools import cached_property
from typing import Callable, Dict, List, Mapping, Optional, Sequence, Tuple

from ._gpu_allocation import SlurmGpus, conflicts, is_bound
from ._errors import FormatError, ResolutionError
from ._host_names import same_host
from ._tables import text_table
from ._launchers import (MPIRUN_LAUNCHERS, MpiLaunch, SlurmStep, slurm_describes_ranks,
                        srun_advice)
from ._layout import slurm_placement

__all__ = ["RankRecord", "Difference", "compare", "own_differences", "likely_cause",
           "format_table", "make_record", "slurm_hosts"]


@dataclass(frozen=True)
class RankRecord:
    """What one rank reports about itself in the exchange."""

    rank: int                       # MPI rank in the communicator
    size: int                       # MPI size as this rank sees it
    host: str                       # socket.gethostname()
    launcher: Optional[str]         # detect_mpi_launch(...).name
    procid: Optional[str] = None    # SLURM_PROCID as set (None: not in a step)
    num_tasks: Optional[str] = None     # SLURM_STEP_NUM_TASKS
    nodename: Optional[str] = None      # SLURMD_NODENAME
    step: Optional[str] = None          # SlurmStep.digest(): equal on all ranks of one step
    slurm_ranks: bool = False           # slurm_describes_ranks() on that rank
    visible: Optional[Tuple[str, ...]] = None   # CUDA_VISIBLE_DEVICES entries (None: unset)
    probed: Optional[int] = None        # nvidia-smi's count, on the rank that probed
    cpu_only: bool = False              # that probe found no nvidia-smi and no NVIDIA devices
    gpu_bind: Optional[str] = None      # SlurmGpus fields: SLURMD_TRES_BIND's GPU part,
    gpus_on_node: Optional[int] = None  # SLURM_GPUS_ON_NODE,
    tasks_per_gpu: Optional[int] = None  # SLURM_NTASKS_PER_TRES (or single:K),
    slurm_gpus_per_task: Optional[int] = None  # SLURM_GPUS_PER_TASK
    plan: Optional[str] = None          # what that rank's plan reads: Plan.uses
    port: Optional[int] = None          # the port it picked (port_base='auto'), else None
    error: Optional[str] = None         # an error that rank hit before the exchange

    def slurm_gpus(self) -> SlurmGpus:
        """Returns what Slurm's GPU variables said on that rank."""
        return SlurmGpus(self.gpu_bind, self.gpus_on_node, self.tasks_per_gpu,
                         self.slurm_gpus_per_task)

    def to_json(self) -> str:
        """Returns the record as compact JSON."""
        return json.dumps({f.name: getattr(self, f.name) for f in _FIELDS},
                          separators=(",", ":"))

    @cached_property
    def wire(self) -> bytes:
        """Returns the record as the exchange sends it (to_json, UTF-8), made once."""
        return self.to_json().encode()

    @classmethod
    def from_json(cls, text: str) -> "RankRecord":
        """Returns the record ``to_json`` wrote. Raises FormatError on anything else."""
        try:
            data = json.loads(text)
            if data.get("visible") is not None:
                data["visible"] = tuple(data["visible"])
            return cls(**data)
        except (ValueError, TypeError, AttributeError) as e:
            raise FormatError(f"a rank sent an unreadable record ({e}): {text[:200]!r}") from e


_FIELDS = fields(RankRecord)


def make_record(rank: int, size: int, host: str, env: Mapping[str, str], launch: MpiLaunch,
                visible: Optional[Tuple[str, ...]], probed: Optional[int],
                error: Optional[str], cpu_only: bool = False,
                plan: Optional[str] = None, port: Optional[int] = None) -> RankRecord:
    """Returns this rank's record from its environment and what it found out locally."""
    step = SlurmStep(env)
    in_step = SlurmStep.present(env)
    gpus = SlurmGpus.read(env)
    return RankRecord(
        rank=rank, size=size, host=host, launcher=launch.name,
        procid=env.get("SLURM_PROCID"), num_tasks=env.get("SLURM_STEP_NUM_TASKS"),
        nodename=env.get("SLURMD_NODENAME"), step=step.digest() if in_step else None,
        slurm_ranks=slurm_describes_ranks(env, launch), visible=visible, probed=probed,
        cpu_only=cpu_only, gpu_bind=gpus.bind, gpus_on_node=gpus.on_node,
        tasks_per_gpu=gpus.tasks_per_gpu, slurm_gpus_per_task=gpus.per_task, plan=plan,
        port=port, error=error)


@dataclass(frozen=True)
class Difference:
    """One disagreement between Slurm and MPI about one rank."""

    rank: int
    check: str        # 'rank', 'size', 'host', 'step', 'gpus', 'mpi'
    slurm: str
    mpi: str


def slurm_hosts(step: Optional[SlurmStep]) -> Optional[List[str]]:
    """Returns Slurm's host per rank from the step variables, or None where unknown."""
    if step is None:
        return None
    try:
        return slurm_placement(step.hostlist(), step.tasks_per_node(), step.distribution())
    except ResolutionError:
        return None


def own_differences(r: RankRecord, size: int,
                    slurm_host_of: Optional[Callable[[int], str]]) -> List[Difference]:
    """Returns what one rank's own record contradicts: its Slurm task id against its MPI rank,
    the step's task count against the MPI size, and the node Slurm puts it on (SLURMD_NODENAME,
    else ``slurm_host_of(task id)`` where Slurm's variables say) against the host it runs on.

    Each rank can check this alone; ``compare`` runs it for every rank.
    """
    if r.procid is None:
        return [Difference(r.rank, "step", "not a Slurm task", f"rank {r.rank}")]
    diffs = []
    if r.num_tasks != str(size):
        diffs.append(Difference(r.rank, "size", f"{r.num_tasks or '?'} tasks",
                                f"{size} process{'es' if size != 1 else ''}"))
    if r.procid != str(r.rank):
        diffs.append(Difference(r.rank, "rank", f"SLURM_PROCID={r.procid}", f"rank {r.rank}"))
    slurm_host = r.nodename
    if slurm_host is None and slurm_host_of is not None and r.procid.isdigit() \
            and int(r.procid) < size:
        slurm_host = slurm_host_of(int(r.procid))
    if slurm_host is not None and not same_host(slurm_host, r.host):
        diffs.append(Difference(r.rank, "host", slurm_host, r.host))
    return diffs


def compare(records: Sequence[RankRecord], step: Optional[SlurmStep]) -> List[Difference]:
    """Returns every difference between Slurm's variables and what MPI reports, rank by rank.

    ``records`` are all ranks' records (one per MPI rank); ``step`` is this rank's view of the
    step variables, used for the job-wide placement (every rank of one step sees the same).
    """
    size = len(records)
    placement = slurm_hosts(step)
    if placement is not None and len(placement) != size:
        placement = None  # the size row says why
    host_of = None if placement is None else placement.__getitem__
    diffs = [d for r in records for d in own_differences(r, size, host_of)]
    first = records[0]
    for r in records:
        if r.plan != first.plan:
            diffs.append(Difference(r.rank, "plan", f"rank 0 resolves from {first.plan}",
                                    f"this rank from {r.plan}"))
    if len({r.step for r in records if r.step is not None}) > 1:
        for r in records:
            if r.step != first.step:
                diffs.append(Difference(r.rank, "step", f"step {r.step}",
                                        f"same MPI world as rank 0 (step {first.step})"))
    diffs.extend(_gpu_differences(records))
    return sorted(diffs, key=lambda d: (d.rank, d.check))


def _gpu_differences(records: Sequence[RankRecord]) -> List[Difference]:
    """Returns a row for each rank whose GPU list no Slurm binding gives: on its node, it
    overlaps another rank's list but differs from it, and Slurm bound neither."""
    lists: Dict[str, List[Tuple[int, Tuple[str, ...], bool]]] = {}
    for r in records:
        if r.visible is not None:
            lists.setdefault(r.host, []).append(
                (r.rank, r.visible, is_bound(r.visible, r.slurm_gpus())))
    return [Difference(rank, "gpus", "no GPU binding (SLURMD_TRES_BIND unset)",
                       f"sees {','.join(mine)}; rank {other} on {host} sees {','.join(theirs)}")
            for rank, other, host, mine, theirs in conflicts(lists)]


def likely_cause(records: Sequence[RankRecord], diffs: Sequence[Difference],
                 slurm_tasks: Optional[int]) -> str:
    """Returns the likely cause of ``diffs`` and its fix, as one paragraph."""
    size = len(records)
    checks = {d.check for d in diffs}
    launchers = {r.launcher for r in records}
    srun = srun_advice(records[0].launcher if len(launchers) == 1 else None)
    if size == 1 and slurm_tasks is not None and slurm_tasks > 1:
        return (f"MPI sees a world of 1 process while Slurm says the step has {slurm_tasks} "
                "tasks: each task started its own MPI. This is srun without the --mpi plugin "
                f"this MPI speaks (here: {records[0].launcher or 'none'}). Fix: "
                f"{srun_advice(None)}; see `srun --mpi=list`.")
    if "plan" in checks:
        odd = sorted({d.rank for d in diffs if d.check == "plan"})
        return (f"Ranks see different launcher variables (rank(s) {', '.join(map(str, odd[:8]))}"
                " differ from rank 0), so they would not resolve the job alike: some from "
                "Slurm's step, some from MPI alone. Fix: start every rank the same way, with "
                f"one launcher ({srun} or one mpirun), and do not change SLURM_*, PMI*, or "
                "OMPI_* variables per rank.")
    if launchers & set(MPIRUN_LAUNCHERS) and records[0].procid is not None:
        return ("mpirun/mpiexec was started inside a Slurm allocation (salloc or sbatch): "
                "every rank inherits SLURM_PROCID and SLURM_STEP_NUM_TASKS of the launcher "
                "daemon srun started on its node, so Slurm's variables describe the daemons, "
                "not the ranks. Fix: keep source='auto' (it uses MPI there), or launch with "
                f"{srun_advice(records[0].launcher)} instead of mpirun/mpiexec.")
    if slurm_tasks is not None and slurm_tasks < size:
        return (f"The Slurm step has {slurm_tasks} tasks but the MPI world has {size}: the "
                "step is smaller than the MPI world (e.g. mpirun -n inside a smaller step). "
                f"Fix: run {size} tasks with {srun_advice(records[0].launcher)} -n {size}, or "
                "start the ranks with mpirun alone.")
    if "step" in checks or (slurm_tasks is not None and slurm_tasks > size):
        return (f"The MPI world ({size} processes) is not the Slurm step ({slurm_tasks} tasks):"
                " MPI is not wired to the step (several separate MPI worlds, ranks from "
                f"different steps, or a sub-communicator passed as comm). Fix: {srun}"
                " and comm=MPI.COMM_WORLD.")
    if "rank" in checks:
        return ("MPI numbers the ranks differently from Slurm's task ids (a reordered "
                "communicator, or MPI not wired to the step). Fix: pass comm=MPI.COMM_WORLD "
                f"and launch with {srun}.")
    if "host" in checks:
        return ("Ranks run on other hosts than Slurm's step variables say: MPI is not wired to "
                f"the step, or SLURM_DISTRIBUTION does not describe the real placement. Fix: "
                f"{srun}; mpi_resolver then builds the ClusterSpec from where ranks really "
                "run.")
    if "gpus" in checks:
        return ("Ranks on one node see different but overlapping CUDA_VISIBLE_DEVICES, which "
                "no Slurm GPU binding gives (SLURMD_TRES_BIND is unset): a wrapper script or "
                "an export changed it per task, so two tasks would train on one GPU. Fix: let "
                "Slurm bind GPUs (--gpus-per-task, --gpu-bind), or give every task of a node "
                "the same CUDA_VISIBLE_DEVICES.")
    return "Slurm and MPI disagree; see the table."


def format_table(diffs: Sequence[Difference], limit: int = 50) -> str:
    """Returns the differences as an aligned text table (at most ``limit`` rows)."""
    return text_table([{"rank": d.rank, "check": d.check, "Slurm says": d.slurm,
                        "MPI says": d.mpi} for d in diffs],
                      ("rank", "check", "Slurm says", "MPI says"), limit)
