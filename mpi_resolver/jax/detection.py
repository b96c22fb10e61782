"""register(): the package's resolution as JAX's own cluster detection method "mpi_resolver",
so that ``jax.distributed.initialize(cluster_detection_method="mpi_resolver")`` works.

JAX's ``ClusterEnv`` (jax._src.clusters) is internal: registration is made only on the JAX
versions it was tested with (arguments.TESTED_JAX); elsewhere register() says so once and
returns False, and ``mpi_resolver.jax.initialize()`` does the same job without it.
"""

from __future__ import annotations

import os
from typing import Any, Dict, Optional

import jax

from mpi_resolver.core.logs import log_once
from mpi_resolver.jax.arguments import TESTED_JAX, detection_supported
from mpi_resolver.jax.start import JaxResolution, resolve_for_jax
from mpi_resolver.options import make_options

__all__ = ["register", "METHOD"]

#: The name to pass as jax.distributed.initialize(cluster_detection_method=...).
METHOD = "mpi_resolver"
_state: Dict[str, Any] = {"cls": None, "options": None, "resolution": None}


def _resolution() -> JaxResolution:
    """Returns this process's resolution, made on first use with register()'s options; then
    selects the CPU collectives, and the visible devices where the task has several GPUs
    (JAX's ClusterEnv sets one device per process only)."""
    if _state["resolution"] is None:
        opts, auto_set_gpu, comm = _state["options"]
        res = resolve_for_jax(opts, auto_set_gpu=auto_set_gpu, comm=comm)
        args = res.distributed
        if args.cpu_collectives is not None:
            jax.config.update("jax_cpu_collectives_implementation", args.cpu_collectives)
        if args.local_device_ids is not None and len(args.local_device_ids) > 1:
            ids = ",".join(str(i) for i in args.local_device_ids)
            jax.config.update("jax_cuda_visible_devices", ids)
            jax.config.update("jax_rocm_visible_devices", ids)
        _state["resolution"] = res
    return _state["resolution"]


def _make_class() -> type:
    """Returns the ClusterEnv subclass (defining it registers it with JAX)."""
    from jax._src.clusters import ClusterEnv

    class MpiResolverCluster(ClusterEnv):
        """mpi_resolver's resolution as a JAX cluster environment (opt-in by name only)."""

        name = METHOD
        opt_in_only_method = True

        @classmethod
        def is_env_present(cls) -> bool:
            return True  # asked only when named; the resolution says what is wrong

        @classmethod
        def get_coordinator_address(cls, timeout_secs: Optional[int] = None,
                                    override_coordinator_port: Optional[str] = None) -> str:
            address = _resolution().distributed.coordinator_address
            if override_coordinator_port:  # JAX_COORDINATOR_PORT, as JAX's own methods
                return f"{address.rsplit(':', 1)[0]}:{override_coordinator_port}"
            return address

        @classmethod
        def get_process_count(cls) -> int:
            return _resolution().distributed.num_processes

        @classmethod
        def get_process_id(cls) -> int:
            return _resolution().distributed.process_id

        @classmethod
        def get_local_process_id(cls) -> Optional[int]:
            ids = _resolution().distributed.local_device_ids
            return ids[0] if ids is not None and len(ids) == 1 else None

    return MpiResolverCluster


def register(*, auto_set_gpu: bool = True, comm: Any = None, **options: Any) -> bool:
    """Makes ``cluster_detection_method="mpi_resolver"`` resolve with ``options``
    (MPIClusterResolver's: jobs, port_base, gpus_per_node, ..., timeout) when JAX asks.

    Returns:
      True where registered; False, with one logged message, where this JAX is not one it was
      tested with (then use mpi_resolver.jax.initialize()).

    Raises:
      ResolutionError: a bad option, naming it; TypeError: an unknown one.
    """
    opts = make_options(**options, env=os.environ)
    version = getattr(jax, "__version__", "?")
    if not detection_supported(version):
        log_once(f"JAX {version} is not a version mpi_resolver's cluster detection was tested "
                 f"with ({', '.join(TESTED_JAX)}): cluster_detection_method={METHOD!r} is not "
                 "registered; call mpi_resolver.jax.initialize() instead, which does the same "
                 "without JAX's internal ClusterEnv.")
        return False
    _state.update(options=(opts, auto_set_gpu, comm), resolution=None)
    if _state["cls"] is None:
        _state["cls"] = _make_class()
    return True
