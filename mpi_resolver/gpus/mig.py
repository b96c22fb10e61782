"""MIG devices (Multi-Instance GPU): CUDA's rules for them, as this package applies them (pure).

NVIDIA's MIG user guide ("CUDA device enumeration"): a CUDA process (CUDA 11 and 12) uses a
single MIG device however many CUDA_VISIBLE_DEVICES names, and names it by its UUID
(``MIG-<uuid>``, ``MIG-GPU-<uuid>/<gi>/<ci>`` before driver R470), never by an index. With
the variable unset, every process of a node lands on the same MIG device. So:

- where nvidia-smi lists MIG devices, a node's GPU list is their UUIDs (a GPU without MIG on
  that node is named by its ``GPU-`` UUID): each task then gets one of its own;
- a task takes at most one MIG device (MIG_PER_TASK): more is an error where asked for
  (gpus_per_task), and left unused with a note otherwise;
- what no setting can do: MIG devices have no NVLink or CUDA IPC between them, so NCCL's
  all-reduce between them goes through host memory (the note says so).
"""

from __future__ import annotations

import re
from typing import Optional, Sequence, Tuple, Union

from mpi_resolver.core.errors import ResolutionError

#: The MIG devices a CUDA process can use.
MIG_PER_TASK = 1
#: What nvidia-smi's probe found: a count of plain GPUs (indices 0..n-1), or device names.
Probed = Union[int, Tuple[str, ...]]

_UUID = re.compile(r"\(UUID: ((?:GPU|MIG)-[^)\s]+)\)")


def is_mig(gpus: Sequence[str]) -> bool:
    """Returns True when ``gpus`` (a GPU list) names a MIG device."""
    return any(g.startswith("MIG-") for g in gpus)


def capped(count: int, gpus: Sequence[str]) -> int:
    """Returns ``count`` GPUs per task, at most MIG_PER_TASK where ``gpus`` has MIG devices."""
    return min(count, MIG_PER_TASK) if is_mig(gpus) else count


def check_request(gpus_per_task: Optional[int], gpus: Sequence[str], host: str) -> None:
    """Raises ResolutionError where ``gpus_per_task`` asks for more MIG devices than CUDA lets a
    process use (``gpus``: the list of ``host`` the tasks take them from)."""
    if gpus_per_task is not None and gpus_per_task > MIG_PER_TASK and is_mig(gpus):
        raise ResolutionError(
            f"gpus_per_task={gpus_per_task}, but the GPUs of {host} are MIG devices "
            f"({', '.join(gpus[:2])}{', ...' if len(gpus) > 2 else ''}) and CUDA lets a "
            f"process use {MIG_PER_TASK}; pass gpus_per_task={MIG_PER_TASK} "
            f"(--gpus-per-task {MIG_PER_TASK}), or run more tasks per node.")


def probed_list(probed: Probed) -> Tuple[str, ...]:
    """Returns the GPU list nvidia-smi's probe gives: '0'..'n-1' for a count, else the names."""
    if isinstance(probed, int):
        return tuple(str(i) for i in range(probed))
    return tuple(probed)


def listed_devices(lines: Sequence[str]) -> Probed:
    """Returns what ``nvidia-smi --list-gpus`` lines (GPU lines, indented MIG lines) give
    CUDA: the number of GPUs where none has MIG devices, else every MIG device's UUID and the
    ``GPU-`` UUID of each GPU without, in the order listed.

    Raises:
      ResolutionError: a line of a node with MIG devices that names no UUID.
    """
    if not any(line.lstrip().startswith("MIG ") for line in lines):
        return sum(line.startswith("GPU ") for line in lines)
    names = []
    for i, line in enumerate(lines):
        next_is_mig = i + 1 < len(lines) and lines[i + 1].lstrip().startswith("MIG ")
        if line.startswith("GPU ") and next_is_mig:
            continue  # a GPU in MIG mode: CUDA uses its MIG devices, not the GPU
        found = _UUID.search(line)
        if found is None:
            raise ResolutionError(
                f"nvidia-smi --list-gpus printed {line[:120]!r} without a UUID on a node with "
                "MIG devices, which CUDA names by UUID only; set CUDA_VISIBLE_DEVICES to this "
                "task's MIG-<uuid>.")
        names.append(found.group(1))
    return tuple(names)


def mig_note(host: str) -> str:
    """Returns the note for a job whose tasks use MIG devices (``host``: the first such node)."""
    return (f"MIG devices on {host}: each task gets one, named by its UUID in "
            "CUDA_VISIBLE_DEVICES, as CUDA lets a process use only one MIG device. MIG "
            "devices have no NVLink or CUDA IPC between them, so NCCL's all-reduce between "
            "them goes through host memory.")
