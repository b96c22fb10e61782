"""A rank's record: what it reports about itself in the MPI exchange (pure but for the GPU
probe it is given)."""

from __future__ import annotations

import json
from dataclasses import dataclass, fields, replace
from functools import cached_property
from typing import Callable, Dict, List, Mapping, Optional, Sequence, Tuple

from mpi_resolver.core.errors import FormatError, ResolutionError
from mpi_resolver.gpus.lists import Gpus, SlurmGpus, conflicts, is_bound
from mpi_resolver.launch.launchers import Launch
from mpi_resolver.gpus.mig import Probed
from mpi_resolver.launch.slurm_step import SlurmStep, slurm_describes_ranks

#: Bytes a record may take in the gather of every rank's record.
RECORD_BYTES = 1024


@dataclass(frozen=True, kw_only=True)
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
    probed: Optional[Probed] = None     # nvidia-smi's count (or MIG names), on the rank that
    #                                     probed
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
            for name in ("visible", "probed"):
                if isinstance(data.get(name), list):
                    data[name] = tuple(data[name])
            return cls(**data)
        except (ValueError, TypeError, AttributeError) as e:
            raise FormatError(f"a rank sent an unreadable record ({e}): {text[:200]!r}") from e


_FIELDS = fields(RankRecord)


def make_record(rank: int, size: int, host: str, env: Mapping[str, str], launch: Launch,
                visible: Optional[Tuple[str, ...]], probed: Optional[Probed],
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


def local_record(env: Mapping[str, str], launch: Launch, rank: int, size: int, host: str,
                 discover: Callable[[], Tuple[Optional[Gpus], Optional[Probed], bool]], *,
                 plan: Optional[str] = None, error: Optional[str] = None,
                 port: Optional[int] = None) -> RankRecord:
    """Returns this rank's record. ``discover()`` returns what this rank finds out about its
    GPUs: (CUDA_VISIBLE_DEVICES entries, nvidia-smi's count, CPU-only). An error (``error``,
    or one met here) is carried in the record, so that every rank raises it; a record too
    long for the exchange is replaced by one that says so."""
    visible = probed = None
    cpu_only = False
    if error is None:
        try:
            visible, probed, cpu_only = discover()
        except ResolutionError as e:
            error = str(e)
    record = make_record(rank, size, host, env, launch, visible, probed, error, cpu_only, plan,
                         port)
    length = len(record.wire)
    if length > RECORD_BYTES:
        record = replace(record, visible=None, probed=None, error=(
            f"its record is {length} bytes, more than the {RECORD_BYTES} the exchange allows "
            "(CUDA_VISIBLE_DEVICES or nvidia-smi's list of MIG devices too long?); pass "
            "gpus_per_node, or set CUDA_VISIBLE_DEVICES to this task's own GPUs."))
    return record


def gpu_conflicts(records: Sequence[RankRecord]) -> List[Tuple[int, int, str, Gpus, Gpus]]:
    """Returns the ranks whose GPU lists no Slurm binding gives (gpu_lists.conflicts), among
    ``records`` grouped by host: (rank, other rank, host, its list, the other's list)."""
    lists: Dict[str, List[Tuple[int, Gpus, bool]]] = {}
    for r in records:
        if r.visible is not None:
            lists.setdefault(r.host, []).append(
                (r.rank, r.visible, is_bound(r.visible, r.slurm_gpus())))
    return conflicts(lists)
