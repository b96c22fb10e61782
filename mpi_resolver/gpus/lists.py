"""A task's GPU list: what CUDA_VISIBLE_DEVICES, Slurm's GPU variables, gpus_per_node or
nvidia-smi's count say it may use, and lists that no Slurm binding gives (pure)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

from mpi_resolver.core.errors import FormatError
from mpi_resolver.gpus.mig import Probed, probed_list
from mpi_resolver.core.values import gpu_count, whole_number

Gpus = Tuple[str, ...]
_ENTRY = re.compile(r"[0-9]+|(?:GPU|MIG)-[A-Za-z0-9/-]+")

#: Slurm's variables that say how it gave GPUs to this task (measured on Slurm 22.05).
GPU_VARIABLES = {
    "SLURMD_TRES_BIND": "how srun bound GPUs to this task: gpu:per_task:2, gpu:single:1, "
                        "gpu:map_gpu:3,1, gpu:none ...",
    "SLURM_GPUS_ON_NODE": "the step's GPUs on this node (also where CUDA_VISIBLE_DEVICES is "
                          "unset)",
    "SLURM_NTASKS_PER_TRES": "tasks that share each GPU (--ntasks-per-gpu)",
    "SLURM_GPUS_PER_TASK": "GPUs per task of the allocation (sbatch/salloc --gpus-per-task)",
}


def parse_visible_devices(value: Optional[str]) -> Optional[Tuple[str, ...]]:
    """Returns the entries of CUDA_VISIBLE_DEVICES, or None when it is not set.

    ``''`` and ``'NoDevFiles'`` (Slurm's word for "no GPU allocated") mean no GPUs: ``()``.
    As CUDA does, a negative index ends the list (``'-1'`` hides every GPU). Entries are
    indices (``2,3``) or UUIDs (``GPU-...``, ``MIG-...``).

    Raises:
      FormatError: an entry that is neither, or the same entry twice.
    """
    if value is None:
        return None
    text = value.strip()
    if text in ("", "NoDevFiles"):
        return ()
    entries = []
    for raw in text.split(","):
        entry = raw.strip()
        if entry.startswith("-") and whole_number(entry[1:]) is not None:
            break
        if _ENTRY.fullmatch(entry) is None:
            raise FormatError(
                f"CUDA_VISIBLE_DEVICES={value!r}: entry {entry!r} is neither a GPU index nor a "
                "GPU-/MIG- UUID; expected e.g. '0,1' or 'GPU-<uuid>,GPU-<uuid>'.")
        if entry in entries:
            raise FormatError(f"CUDA_VISIBLE_DEVICES={value!r} lists {entry!r} twice.")
        entries.append(entry)
    return tuple(entries)


def _gpu_bind(value: Optional[str]) -> Optional[str]:
    """Returns the GPU part of SLURMD_TRES_BIND: 'gpu:verbose,per_task:2' -> 'per_task:2'."""
    if value is None:
        return None
    for part in value.split("+"):
        kind, _, rest = part.strip().partition(":")
        if kind == "gpu":
            rest = rest[len("verbose,"):] if rest.startswith("verbose,") else rest
            return rest.strip() or None
    return None


@dataclass(frozen=True)
class SlurmGpus:
    """What Slurm's variables say of one task's GPUs (all None outside a GPU step)."""

    bind: Optional[str] = None          # SLURMD_TRES_BIND's GPU part: 'per_task:2', 'none' ...
    on_node: Optional[int] = None       # SLURM_GPUS_ON_NODE
    tasks_per_gpu: Optional[int] = None  # SLURM_NTASKS_PER_TRES, or K of --gpu-bind=single:K
    per_task: Optional[int] = None      # SLURM_GPUS_PER_TASK

    @classmethod
    def read(cls, env: Mapping[str, str]) -> "SlurmGpus":
        """Returns what ``env``'s GPU variables say; malformed values count as unset.

        Raises:
          FormatError: a GPU count larger than a node can have (values.MAX_GPUS).
        """
        bind = _gpu_bind(env.get("SLURMD_TRES_BIND"))
        per_gpu = whole_number(env.get("SLURM_NTASKS_PER_TRES"))
        if per_gpu is None and bind is not None and bind.startswith("single:"):
            per_gpu = whole_number(bind[len("single:"):])
        return cls(bind, gpu_count(env.get("SLURM_GPUS_ON_NODE"), "SLURM_GPUS_ON_NODE"),
                   per_gpu, gpu_count(env.get("SLURM_GPUS_PER_TASK"), "SLURM_GPUS_PER_TASK"))


def is_bound(visible: Optional[Gpus], slurm: SlurmGpus) -> bool:
    """Returns True when Slurm gave this task GPUs of its own rather than the node's list.

    Slurm says so in SLURMD_TRES_BIND (any binding but ``none``); without it, a task that
    sees fewer GPUs than the step has on its node (SLURM_GPUS_ON_NODE) was given a subset.
    """
    if visible is None:
        return False
    if slurm.bind is not None:
        return slurm.bind != "none"
    return slurm.on_node is not None and len(visible) < slurm.on_node


def needs_probe(visible: Optional[Gpus], slurm: SlurmGpus,
                gpus_per_node: Optional[int]) -> bool:
    """Returns True when only nvidia-smi can say how many GPUs this task's node has."""
    return visible is None and slurm.on_node is None and gpus_per_node is None


#: What can say a task's GPU list (TaskList.said_by); the first three are Slurm's.
SLURM_SAYS = ("Slurm's binding", "CUDA_VISIBLE_DEVICES", "SLURM_GPUS_ON_NODE")
SAID_BY = SLURM_SAYS + ("gpus_per_node", "nvidia-smi")


@dataclass(frozen=True)
class TaskList:
    """A task's GPU list and what said it (one of SAID_BY)."""

    gpus: Gpus
    said_by: str

    @property
    def from_slurm(self) -> bool:
        """True when Slurm gave the list: its ranks may share it (--gres=gpu:1 for two
        tasks); a list of the user's gpus_per_node or of nvidia-smi's count is not shared."""
        return self.said_by in SLURM_SAYS


def task_list(visible: Optional[Gpus], slurm: SlurmGpus, probed: Optional[Probed],
              gpus_per_node: Optional[int]) -> Optional[TaskList]:
    """Returns the list of GPUs this task may use and what said it, or None where nothing says.

    Its own CUDA_VISIBLE_DEVICES where Slurm bound GPUs to it (``gpus_per_node`` cannot widen
    that); else ``gpus_per_node`` entries (named by CUDA_VISIBLE_DEVICES where it lists that
    many, else 0..n-1); else CUDA_VISIBLE_DEVICES; else 0..SLURM_GPUS_ON_NODE-1; else
    nvidia-smi's list (0..probed-1, or the MIG devices' UUIDs).
    """
    if is_bound(visible, slurm):
        assert visible is not None  # is_bound says so
        return TaskList(visible, SLURM_SAYS[0])
    if gpus_per_node is not None:
        if visible is not None and len(visible) >= gpus_per_node:
            return TaskList(visible[:gpus_per_node], "gpus_per_node")
        return TaskList(_indices(gpus_per_node), "gpus_per_node")
    if visible is not None:
        return TaskList(visible, "CUDA_VISIBLE_DEVICES")
    if slurm.on_node is not None:
        return TaskList(_indices(slurm.on_node), "SLURM_GPUS_ON_NODE")
    if probed is not None:
        return TaskList(probed_list(probed), "nvidia-smi")
    return None


def task_gpus(visible: Optional[Gpus], slurm: SlurmGpus, probed: Optional[Probed],
              gpus_per_node: Optional[int]) -> Optional[Gpus]:
    """Returns task_list's GPUs, or None where nothing says."""
    found = task_list(visible, slurm, probed, gpus_per_node)
    return None if found is None else found.gpus


def narrowing_changes(current: Optional[str], node_gpus: Gpus, wanted: Gpus) -> bool:
    """Returns True where setting CUDA_VISIBLE_DEVICES to ``wanted`` would change the GPUs of
    a process whose CUDA started with it at ``current`` (None: unset, so every GPU of the
    node, ``node_gpus``): False on a CPU-only node, or where it is already as wanted.

    Raises:
      FormatError: a malformed ``current``.
    """
    seen = parse_visible_devices(current)
    return set(node_gpus if seen is None else seen) != set(wanted)


def _indices(n: int) -> Gpus:
    return tuple(str(i) for i in range(n))


def conflicts(lists: Mapping[str, Sequence[Tuple[int, Gpus, bool]]]
              ) -> List[Tuple[int, int, str, Gpus, Gpus]]:
    """Returns ranks whose lists no Slurm binding gives: on one node, a list that overlaps
    another rank's but differs from it, where Slurm bound neither to its task.

    ``lists[host]`` holds (rank, list, bound by Slurm) of each rank on ``host``. Returns
    (rank, other rank, host, its list, the other's list), one row per such rank.
    """
    out = []
    for host, per_rank in lists.items():
        first: Dict[Gpus, Tuple[int, bool]] = {}
        for rank, gpus, bound in per_rank:
            if gpus in first:
                continue
            for other, (other_rank, other_bound) in first.items():
                if not (bound or other_bound) and set(gpus) & set(other):
                    out.append((rank, other_rank, host, gpus, other))
                    break
            first[gpus] = (rank, bound)
    return out
