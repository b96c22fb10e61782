"""Per-rank records, and the comparison of Slurm's view of the job with MPI's (pure)."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

from .errors import FormatError, ResolutionError
from .launchers import MpiLaunch, SlurmStep, slurm_describes_ranks
from .layout import slurm_placement

__all__ = ["RankRecord", "Difference", "same_host", "host_key", "compare", "likely_cause",
           "format_table", "make_record"]


def host_key(name: str) -> str:
    """Returns the short, lower-case form of a host name: node1.cluster.org -> node1."""
    return name.split(".", 1)[0].lower()


def same_host(a: str, b: str) -> bool:
    """Returns True when ``a`` and ``b`` name the same host (short and full names match)."""
    return host_key(a) == host_key(b)


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
    error: Optional[str] = None         # an error that rank hit before the exchange

    def to_json(self) -> str:
        """Returns the record as compact JSON."""
        return json.dumps(asdict(self), separators=(",", ":"))

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


def make_record(rank: int, size: int, host: str, env: Mapping[str, str], launch: MpiLaunch,
                visible: Optional[Tuple[str, ...]], probed: Optional[int],
                error: Optional[str]) -> RankRecord:
    """Returns this rank's record from its environment and what it found out locally."""
    step = SlurmStep(env)
    in_step = SlurmStep.present(env)
    return RankRecord(
        rank=rank, size=size, host=host, launcher=launch.name,
        procid=env.get("SLURM_PROCID"), num_tasks=env.get("SLURM_STEP_NUM_TASKS"),
        nodename=env.get("SLURMD_NODENAME"), step=step.digest() if in_step else None,
        slurm_ranks=slurm_describes_ranks(env, launch), visible=visible, probed=probed,
        error=error)


@dataclass(frozen=True)
class Difference:
    """One disagreement between Slurm and MPI about one rank."""

    rank: int
    check: str        # 'rank', 'size', 'host', 'step', 'gpus', 'mpi'
    slurm: str
    mpi: str


def _slurm_hosts(step: Optional[SlurmStep]) -> Optional[List[str]]:
    """Returns Slurm's host per rank from the step variables, or None where unknown."""
    if step is None:
        return None
    try:
        return slurm_placement(step.hostlist(), step.tasks_per_node(), step.distribution())
    except ResolutionError:
        return None


def compare(records: Sequence[RankRecord], step: Optional[SlurmStep]) -> List[Difference]:
    """Returns every difference between Slurm's variables and what MPI reports, rank by rank.

    ``records`` are all ranks' records (one per MPI rank); ``step`` is this rank's view of the
    step variables, used for the job-wide placement (every rank of one step sees the same).
    """
    diffs: List[Difference] = []
    size = len(records)
    placement = _slurm_hosts(step)
    if placement is not None and len(placement) != size:
        placement = None  # the size row below says why
    for r in records:
        if r.procid is None:
            diffs.append(Difference(r.rank, "step", "not a Slurm task", f"rank {r.rank}"))
            continue
        if r.num_tasks != str(size):
            diffs.append(Difference(r.rank, "size", f"{r.num_tasks} tasks",
                                    f"{size} process{'es' if size != 1 else ''}"))
        if r.procid != str(r.rank):
            diffs.append(Difference(r.rank, "rank", f"SLURM_PROCID={r.procid}",
                                    f"rank {r.rank}"))
        slurm_host = r.nodename
        if slurm_host is None and placement is not None and r.procid.isdigit() \
                and int(r.procid) < size:
            slurm_host = placement[int(r.procid)]
        if slurm_host is not None and not same_host(slurm_host, r.host):
            diffs.append(Difference(r.rank, "host", slurm_host, r.host))
    steps = {r.step for r in records if r.step is not None}
    if len(steps) > 1:
        first = records[0].step
        for r in records:
            if r.step != first:
                diffs.append(Difference(r.rank, "step", f"step {r.step}",
                                        f"same MPI world as rank 0 (step {first})"))
    diffs.extend(_gpu_differences(records))
    return sorted(diffs, key=lambda d: (d.rank, d.check))


def _gpu_differences(records: Sequence[RankRecord]) -> List[Difference]:
    """Returns a row for each rank whose visible GPU count differs from its node's first rank."""
    first: Dict[str, RankRecord] = {}
    diffs = []
    for r in records:
        key = host_key(r.host)
        if key not in first:
            first[key] = r
            continue
        a, b = first[key].visible, r.visible
        if a is not None and b is not None and len(a) != len(b):
            diffs.append(Difference(r.rank, "gpus", f"{len(a)} on rank {first[key].rank}",
                                    f"{len(b)} visible"))
    return diffs


def likely_cause(records: Sequence[RankRecord], diffs: Sequence[Difference],
                 slurm_tasks: Optional[int]) -> str:
    """Returns the likely cause of ``diffs`` and its fix, as one paragraph."""
    size = len(records)
    checks = {d.check for d in diffs}
    launchers = {r.launcher for r in records}
    if size == 1 and slurm_tasks is not None and slurm_tasks > 1:
        return (f"MPI sees a world of 1 process while Slurm says the step has {slurm_tasks} "
                "tasks: each task started its own MPI. This is `srun` without `--mpi=pmix` "
                "(or an MPI that does not speak the step's PMI). Fix: `srun --mpi=pmix ...` "
                "(see `srun --mpi=list`), or MpiDefault=pmix in slurm.conf.")
    if launchers & {"openmpi", "hydra"} and records[0].procid is not None:
        return ("mpirun/mpiexec was started inside a Slurm allocation (salloc or sbatch): "
                "every rank inherits SLURM_PROCID and SLURM_STEP_NUM_TASKS of the launcher "
                "daemon srun started on its node, so Slurm's variables describe the daemons, "
                "not the ranks. Fix: keep source='auto' (it uses MPI there), or launch with "
                "`srun --mpi=pmix` instead of mpirun.")
    if slurm_tasks is not None and slurm_tasks < size:
        return (f"The Slurm step has {slurm_tasks} tasks but the MPI world has {size}: the "
                "step is smaller than the MPI world (e.g. mpirun -n inside a smaller step). "
                f"Fix: run {size} tasks with `srun -n {size} --mpi=pmix`, or start the ranks "
                "with mpirun alone.")
    if "step" in checks or (slurm_tasks is not None and slurm_tasks > size):
        return (f"The MPI world ({size} processes) is not the Slurm step ({slurm_tasks} tasks):"
                " MPI is not wired to the step (several separate MPI worlds, ranks from "
                "different steps, or a sub-communicator passed as comm). Fix: `srun --mpi=pmix`"
                " and comm=MPI.COMM_WORLD.")
    if "rank" in checks:
        return ("MPI numbers the ranks differently from Slurm's task ids (a reordered "
                "communicator, or MPI not wired to the step). Fix: pass comm=MPI.COMM_WORLD "
                "and launch with `srun --mpi=pmix`.")
    if "host" in checks:
        return ("Ranks run on other hosts than Slurm's step variables say: MPI is not wired to "
                "the step, or SLURM_DISTRIBUTION does not describe the real placement. Fix: "
                "`srun --mpi=pmix`; mpi_resolver then builds the ClusterSpec from where ranks "
                "really run.")
    if "gpus" in checks:
        return ("Ranks on one node see different CUDA_VISIBLE_DEVICES. Fix: set the same "
                "CUDA_VISIBLE_DEVICES for every task of a node, or pass gpus_per_node.")
    return "Slurm and MPI disagree; see the table."


def format_table(diffs: Sequence[Difference], limit: int = 50) -> str:
    """Returns the differences as an aligned text table (at most ``limit`` rows)."""
    rows = [("rank", "check", "Slurm says", "MPI says")]
    rows += [(str(d.rank), d.check, d.slurm, d.mpi) for d in diffs[:limit]]
    widths = [max(len(row[i]) for row in rows) for i in range(4)]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in rows]
    if len(diffs) > limit:
        lines.append(f"... and {len(diffs) - limit} more rows")
    return "\n".join(lines)
