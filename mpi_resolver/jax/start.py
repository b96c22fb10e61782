"""initialize(): the package's resolution, then jax.distributed.initialize with its answer.

Importing this module imports JAX; ``import mpi_resolver`` and ``import mpi_resolver.jax`` do
not (``mpi_resolver.jax.initialize`` loads it when first used).
"""

from __future__ import annotations

import math
import os
import socket
import time
from dataclasses import dataclass, fields
from typing import Any, Dict, Optional

from mpi_resolver.core.errors import MissingDependencyError, ResolutionError
from mpi_resolver.jax.arguments import JaxArguments, check_rpc_layer, jax_arguments
from mpi_resolver.options import (DEFAULT_SOURCE, DEFAULT_TIMEOUT, DEFAULT_VERIFY, Options,
                                  make_options)
from mpi_resolver.placement.addresses import DEFAULT_ADDRESS
from mpi_resolver.resolve.resolution import Resolution
from mpi_resolver.resolve.this_process import resolve_process

try:
    import jax
except ImportError as e:  # pragma: no cover - exercised only without JAX
    raise MissingDependencyError(
        f"JAX could not be imported ({e}). Install it with `pip install mpi_resolver[jax]` "
        "(or `pip install jax`); the TensorFlow path and the command line work without it."
    ) from e

__all__ = ["initialize", "JaxResolution", "resolve_for_jax"]


@dataclass(kw_only=True)
class JaxResolution(Resolution):
    """A Resolution plus what jax.distributed.initialize was given (``distributed``)."""

    distributed: JaxArguments


def resolve_for_jax(opts: Options, *, auto_set_gpu: bool = True, comm: Any = None
                    ) -> JaxResolution:
    """Returns this process's resolution (Slurm first, MPI as cross-check or alternative:
    MPIClusterResolver's) with the arguments for jax.distributed.initialize. Starts nothing
    of JAX.

    Raises:
      ResolutionError, FormatError, MismatchError: as MPIClusterResolver.
    """
    res = resolve_process(opts, comm=comm, auto_set_gpu=False)  # jax_arguments sets the GPUs
    args = jax_arguments(addresses=res.layout.addresses, rank=res.rank, own_gpus=res.own_gpus,
                         visible=os.environ.get("CUDA_VISIBLE_DEVICES"),
                         timeout=opts.timeout, auto_set_gpu=auto_set_gpu)
    values: Dict[str, Any] = {f.name: getattr(res, f.name) for f in fields(res)}
    return JaxResolution(**values, distributed=args)


def _check_not_started() -> None:
    """Raises ResolutionError where JAX is past the point initialize() must come before (on
    a JAX without these internals, JAX's own RuntimeError says it later)."""
    try:
        from jax._src import xla_bridge
        started = xla_bridge.backends_are_initialized
    except (ImportError, AttributeError):  # pragma: no cover - another JAX
        started = bool
    if jax.distributed.is_initialized():
        raise ResolutionError("jax.distributed is already initialized in this process; call "
                              "mpi_resolver.jax.initialize() once, instead of "
                              "jax.distributed.initialize().")
    if started():
        raise ResolutionError("JAX already started its devices in this process (a JAX "
                              "computation, or jax.devices(), ran before); call "
                              "mpi_resolver.jax.initialize() first thing, before any of them.")


#: The first bytes a gRPC server sends on a new connection: the 9-byte header of its HTTP/2
#: SETTINGS frame (RFC 9113 3.4 and 4.1: 3 bytes of length, then the type, 0x4).
_SETTINGS_TYPE_AT = 3
_SETTINGS = 0x4


def coordinator_answers(host: str, port: int, wait: float) -> bool:
    """Returns True when a gRPC (HTTP/2) server listens on ``host:port``: it sends its SETTINGS
    frame on a new connection, within ``wait`` seconds. A socket that only holds the port
    (the exchange's under port_base='auto', until rank 0 releases it) never speaks: False,
    as for a refused connection."""
    try:
        with socket.create_connection((host, port), timeout=wait) as sock:
            sock.settimeout(wait)
            head = b""
            while len(head) <= _SETTINGS_TYPE_AT:
                more = sock.recv(9 - len(head))
                if not more:
                    return False
                head += more
    except OSError:
        return False
    return head[_SETTINGS_TYPE_AT] == _SETTINGS


def wait_for_coordinator(address: str, deadline: float) -> None:
    """Returns once the coordinator at ``address`` ('host:port', '[v6]:port') answers, or at
    ``deadline`` (time.monotonic()), whichever is first; never raises (JAX's own connection
    then says what is wrong).

    Why: JAX's client makes one gRPC connection; where it is refused (task 0 has not started
    the coordinator yet, which is the rule after the MPI exchange: every task leaves it at the
    same moment) gRPC retries after its reconnect backoff, 1 s (+-20 %), and every task waits
    that second, since the coordinator waits for all. This probe retries within milliseconds.
    """
    host, _, port = address.rpartition(":")
    try:
        number = int(port)
    except ValueError:
        return
    host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    delay = 0.002
    while True:
        left = deadline - time.monotonic()
        if left <= 0 or coordinator_answers(host, number, min(0.5, max(0.05, left))):
            return
        time.sleep(min(delay, max(0.0, deadline - time.monotonic())))
        delay = min(delay * 2, 0.05)


def start_jax(args: JaxArguments) -> None:
    """Selects the CPU collectives where the task has no GPU, then calls
    jax.distributed.initialize with ``args`` (JAX's own detection off: nothing of it
    overrides the package's answer). A task other than 0 first waits until the coordinator
    answers (wait_for_coordinator), within the same ``initialization_timeout``: JAX gets what
    is left of it (at least 1 s)."""
    if args.cpu_collectives is not None:
        jax.config.update("jax_cpu_collectives_implementation", args.cpu_collectives)
    ids = list(args.local_device_ids) if args.local_device_ids is not None else None
    timeout = args.initialization_timeout
    if args.process_id != 0:
        deadline = time.monotonic() + timeout
        wait_for_coordinator(args.coordinator_address, deadline)
        timeout = max(1, math.ceil(deadline - time.monotonic()))
    jax.distributed.initialize(coordinator_address=args.coordinator_address,
                               num_processes=args.num_processes, process_id=args.process_id,
                               local_device_ids=ids, cluster_detection_method="deactivate",
                               initialization_timeout=timeout)


def initialize(*, jobs: Optional[Dict[str, int]] = None, port_base: Any = None,
               gpus_per_node: Optional[int] = None, gpus_per_task: Optional[int] = None,
               tasks_per_node: Any = None, auto_set_gpu: bool = True, rpc_layer: str = "grpc",
               source: str = DEFAULT_SOURCE, verify: Any = DEFAULT_VERIFY, comm: Any = None,
               timeout: float = DEFAULT_TIMEOUT, uneven_gpus: bool = False,
               address: str = DEFAULT_ADDRESS) -> JaxResolution:
    """Resolves the job as MPIClusterResolver does (same options, same meaning, the same
    MPI_RESOLVER_* variables where an option is not given), then starts
    JAX's distributed runtime: coordinator = task 0's address, process_id = the rank as Slurm
    (or MPI) numbers it, local_device_ids = this task's GPUs as Slurm bound them (all visible
    devices with ``auto_set_gpu=False``), gloo collectives on a task without GPUs.
    ``timeout`` bounds the MPI exchange and JAX's connection to the coordinator.

    Returns:
      The JaxResolution (layout, GPUs, notes, and ``distributed``: what JAX was given).

    Raises:
      ResolutionError: a bad argument (naming it), JAX already started in this process, or
        anything that keeps the job from resolving (FormatError, MismatchError where Slurm and
        MPI disagree); all before JAX's runtime starts.
    """
    opts = make_options(jobs=jobs, port_base=port_base, gpus_per_node=gpus_per_node,
                        gpus_per_task=gpus_per_task, tasks_per_node=tasks_per_node,
                        source=source, verify=verify, timeout=timeout, uneven_gpus=uneven_gpus,
                        address=address, env=os.environ)
    check_rpc_layer(rpc_layer)
    if not isinstance(auto_set_gpu, bool):
        raise ResolutionError(f"auto_set_gpu={auto_set_gpu!r}: expected True or False.")
    _check_not_started()
    res = resolve_for_jax(opts, auto_set_gpu=auto_set_gpu, comm=comm)
    start_jax(res.distributed)
    return res
