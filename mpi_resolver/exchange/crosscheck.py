"""The cross-check: Slurm's view of the job against every rank's record, and the likely cause
of a difference (pure)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, List, Optional, Sequence

from mpi_resolver.core.errors import MismatchError, ResolutionError
from mpi_resolver.placement.host_names import same_host
from mpi_resolver.launch.launchers import is_mpirun, srun_advice
from mpi_resolver.placement.layout import slurm_placement
from mpi_resolver.exchange.records import RankRecord, gpu_conflicts
from mpi_resolver.launch.slurm_step import SlurmStep
from mpi_resolver.core.tables import text_table
from mpi_resolver.core.values import whole_number


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
    task = whole_number(r.procid)
    if slurm_host is None and slurm_host_of is not None and task is not None and task < size:
        slurm_host = slurm_host_of(task)
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
    return [Difference(rank, "gpus", "no GPU binding (SLURMD_TRES_BIND unset)",
                       f"sees {','.join(mine)}; rank {other} on {host} sees {','.join(theirs)}")
            for rank, other, host, mine, theirs in gpu_conflicts(records)]


@dataclass(frozen=True)
class _Job:
    """What the causes below look at: the records, the differences, Slurm's task count."""

    records: Sequence[RankRecord]
    diffs: Sequence[Difference]
    slurm_tasks: Optional[int]

    @property
    def size(self) -> int:
        return len(self.records)

    @property
    def checks(self) -> set:
        return {d.check for d in self.diffs}

    @property
    def srun(self) -> str:
        """The srun launch to advise: from the one launcher of every rank, else generic."""
        launchers = {r.launcher for r in self.records}
        return srun_advice(self.records[0].launcher if len(launchers) == 1 else None)


def _world_of_one(job: _Job) -> Optional[str]:
    if job.size == 1 and job.slurm_tasks is not None and job.slurm_tasks > 1:
        return (f"MPI sees a world of 1 process while Slurm says the step has {job.slurm_tasks} "
                "tasks: each task started its own MPI. This is srun without the --mpi plugin "
                f"this MPI speaks (here: {job.records[0].launcher or 'none'}). Fix: "
                f"{srun_advice(None)}; see `srun --mpi=list`.")
    return None


def _plans_differ(job: _Job) -> Optional[str]:
    if "plan" not in job.checks:
        return None
    odd = sorted({d.rank for d in job.diffs if d.check == "plan"})
    return (f"Ranks see different launcher variables (rank(s) {', '.join(map(str, odd[:8]))}"
            " differ from rank 0), so they would not resolve the job alike: some from "
            "Slurm's step, some from MPI alone. Fix: start every rank the same way, with "
            f"one launcher ({job.srun} or one mpirun), and do not change SLURM_*, PMI*, or "
            "OMPI_* variables per rank.")


def _mpirun_in_allocation(job: _Job) -> Optional[str]:
    if not any(is_mpirun(r.launcher) for r in job.records) or job.records[0].procid is None:
        return None
    return ("mpirun/mpiexec was started inside a Slurm allocation (salloc or sbatch): "
            "every rank inherits SLURM_PROCID and SLURM_STEP_NUM_TASKS of the launcher "
            "daemon srun started on its node, so Slurm's variables describe the daemons, "
            "not the ranks. Fix: keep source='auto' (it uses MPI there), or launch with "
            f"{srun_advice(job.records[0].launcher)} instead of mpirun/mpiexec.")


def _step_smaller(job: _Job) -> Optional[str]:
    if job.slurm_tasks is None or job.slurm_tasks >= job.size:
        return None
    return (f"The Slurm step has {job.slurm_tasks} tasks but the MPI world has {job.size}: the "
            "step is smaller than the MPI world (e.g. mpirun -n inside a smaller step). "
            f"Fix: run {job.size} tasks with {srun_advice(job.records[0].launcher)} -n "
            f"{job.size}, or start the ranks with mpirun alone.")


def _not_the_step(job: _Job) -> Optional[str]:
    if "step" not in job.checks and (job.slurm_tasks is None or job.slurm_tasks <= job.size):
        return None
    return (f"The MPI world ({job.size} processes) is not the Slurm step ({job.slurm_tasks} "
            "tasks): MPI is not wired to the step (several separate MPI worlds, ranks from "
            f"different steps, or a sub-communicator passed as comm). Fix: {job.srun}"
            " and comm=MPI.COMM_WORLD.")


def _by_check(job: _Job) -> Optional[str]:
    """The causes named by one kind of difference alone, in order of precedence."""
    if "rank" in job.checks:
        return ("MPI numbers the ranks differently from Slurm's task ids (a reordered "
                "communicator, or MPI not wired to the step). Fix: pass comm=MPI.COMM_WORLD "
                f"and launch with {job.srun}.")
    if "host" in job.checks:
        return ("Ranks run on other hosts than Slurm's step variables say: MPI is not wired to "
                f"the step, or SLURM_DISTRIBUTION does not describe the real placement. Fix: "
                f"{job.srun}; mpi_resolver then builds the ClusterSpec from where ranks really "
                "run.")
    if "gpus" in job.checks:
        return ("Ranks on one node see different but overlapping CUDA_VISIBLE_DEVICES, which "
                "no Slurm GPU binding gives (SLURMD_TRES_BIND is unset): a wrapper script or "
                "an export changed it per task, so two tasks would train on one GPU. Fix: let "
                "Slurm bind GPUs (--gpus-per-task, --gpu-bind), or give every task of a node "
                "the same CUDA_VISIBLE_DEVICES.")
    return None


_CAUSES: Sequence[Callable[[_Job], Optional[str]]] = (
    _world_of_one, _plans_differ, _mpirun_in_allocation, _step_smaller, _not_the_step,
    _by_check)


def likely_cause(records: Sequence[RankRecord], diffs: Sequence[Difference],
                 slurm_tasks: Optional[int]) -> str:
    """Returns the likely cause of ``diffs`` and its fix, as one paragraph: the first of
    _CAUSES that applies."""
    job = _Job(records, diffs, slurm_tasks)
    for cause in _CAUSES:
        text = cause(job)
        if text is not None:
            return text
    return "Slurm and MPI disagree; see the table."


def format_table(diffs: Sequence[Difference], limit: int = 50) -> str:
    """Returns the differences as an aligned text table (at most ``limit`` rows)."""
    return text_table([{"rank": d.rank, "check": d.check, "Slurm says": d.slurm,
                        "MPI says": d.mpi} for d in diffs],
                      ("rank", "check", "Slurm says", "MPI says"), limit)


def raise_mismatch(records: List[RankRecord], step: Optional[SlurmStep]) -> None:
    """Raises MismatchError when Slurm and MPI disagree about any rank."""
    diffs = compare(records, step)
    if not diffs:
        return
    slurm_tasks = None if step is None else whole_number(step.env.get("SLURM_STEP_NUM_TASKS"))
    cause = likely_cause(records, diffs, slurm_tasks)
    raise MismatchError(
        f"Slurm and MPI disagree about this job ({len(diffs)} "
        f"difference{'s' if len(diffs) != 1 else ''}).\n"
        f"{format_table(diffs)}\nLikely cause: {cause}", diffs, records)


