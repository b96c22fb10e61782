"""What ``jax.distributed.initialize`` is given, from a Resolution (pure: no JAX import).

The coordinator is task 0's address (its port by the package's port rules, 'auto' included);
the process id is the rank as Slurm (or MPI) numbers it; ``local_device_ids`` are the CUDA
ordinals of this task's GPUs as this process sees them, that is their positions in its
CUDA_VISIBLE_DEVICES (Slurm's binding included), where JAX's own Slurm detection gives
``[SLURM_LOCALID]`` whatever Slurm bound.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional, Sequence, Tuple

from mpi_resolver.core.errors import ResolutionError
from mpi_resolver.core.values import whole_number
from mpi_resolver.gpus.lists import parse_visible_devices

__all__ = ["JaxArguments", "jax_arguments", "local_device_ids", "cpu_collectives",
           "check_rpc_layer", "initialization_timeout", "TESTED_JAX", "detection_supported"]

#: JAX versions whose internal cluster detection (jax._src.clusters.ClusterEnv) the package's
#: registration was tested with (tests/jax); others get the function and one message.
TESTED_JAX = ("0.10.2",)
#: JAX's CPU collectives across processes (jax_cpu_collectives_implementation).
GLOO = "gloo"


@dataclass(frozen=True)
class JaxArguments:
    """The arguments of jax.distributed.initialize for this process, and the CPU collectives
    to select first (None: leave JAX's setting)."""

    coordinator_address: str
    num_processes: int
    process_id: int
    local_device_ids: Optional[Tuple[int, ...]]
    cpu_collectives: Optional[str]
    initialization_timeout: int


def local_device_ids(own: Sequence[str], visible: Optional[str]) -> Optional[Tuple[int, ...]]:
    """Returns the CUDA ordinals of this task's GPUs ``own`` (CUDA_VISIBLE_DEVICES entries)
    in a process whose CUDA_VISIBLE_DEVICES is ``visible`` (None: unset, every GPU of the
    node, ordinals = indices); None where the task has no GPU (JAX keeps its CPU device).

    Raises:
      ResolutionError: a GPU this process cannot see, or a UUID with CUDA_VISIBLE_DEVICES
        unset (no ordinal to give it); FormatError: a malformed ``visible``.
    """
    if not own:
        return None
    seen = parse_visible_devices(visible)
    if seen is None:
        ordinals = [whole_number(gpu) for gpu in own]
        if any(n is None for n in ordinals):
            raise ResolutionError(
                f"GPUs {','.join(own)} are named by UUID but CUDA_VISIBLE_DEVICES is unset, so "
                "their CUDA ordinals are unknown; set CUDA_VISIBLE_DEVICES (e.g. to the "
                "node's GPU UUIDs) before starting the job, or pass gpus_per_node.")
        return tuple(n for n in ordinals if n is not None)
    missing = [gpu for gpu in own if gpu not in seen]
    if missing:
        raise ResolutionError(
            f"GPUs {','.join(missing)} of this task are not in its CUDA_VISIBLE_DEVICES="
            f"{visible!r}; JAX could not use them. Leave CUDA_VISIBLE_DEVICES as Slurm set "
            "it, or pass gpus_per_task / gpus_per_node that fit what this task sees.")
    return tuple(seen.index(gpu) for gpu in own)


def cpu_collectives(own: Sequence[str]) -> Optional[str]:
    """Returns 'gloo' for a task without GPUs (multi-process CPU jobs need JAX's CPU
    collectives), else None (GPUs: JAX's own collectives)."""
    return None if own else GLOO


def check_rpc_layer(rpc_layer: object) -> None:
    """Raises ResolutionError unless ``rpc_layer`` is 'grpc' (JAX's coordinator speaks gRPC;
    the argument is taken for MPIClusterResolver's signature)."""
    if rpc_layer != "grpc":
        raise ResolutionError(f"rpc_layer={rpc_layer!r}: JAX's coordination service speaks "
                              "gRPC only; pass rpc_layer='grpc' (the default) or leave it out.")


def initialization_timeout(timeout: float) -> int:
    """Returns JAX's initialization_timeout (whole seconds, at least 1) for the package's
    ``timeout``: one bound for the MPI exchange and for JAX's connection to the coordinator."""
    return max(1, math.ceil(timeout))


def jax_arguments(*, addresses: Sequence[str], rank: int, own_gpus: Sequence[str],
                  visible: Optional[str], timeout: float, auto_set_gpu: bool = True
                  ) -> JaxArguments:
    """Returns jax.distributed.initialize's arguments for rank ``rank`` of the job whose
    tasks' addresses are ``addresses`` (task 0's is the coordinator's); ``own_gpus`` this
    rank's GPUs, ``visible`` its CUDA_VISIBLE_DEVICES; ``auto_set_gpu=False`` leaves JAX every
    visible device.

    Raises:
      ResolutionError: see local_device_ids; a rank outside the job.
    """
    if not 0 <= rank < len(addresses):
        raise ResolutionError(f"rank {rank} is outside the job's {len(addresses)} tasks.")
    ids = local_device_ids(own_gpus, visible) if auto_set_gpu else None
    return JaxArguments(coordinator_address=addresses[0], num_processes=len(addresses),
                        process_id=rank, local_device_ids=ids,
                        cpu_collectives=cpu_collectives(own_gpus),
                        initialization_timeout=initialization_timeout(timeout))


def detection_supported(version: str) -> bool:
    """Returns True where JAX ``version`` is one the cluster-detection registration was
    tested with (TESTED_JAX)."""
    return version in TESTED_JAX
