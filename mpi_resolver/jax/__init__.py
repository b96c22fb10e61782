"""The JAX edge: ``initialize(**options)`` resolves the job as MPIClusterResolver does and starts
``jax.distributed`` with the answer (start); ``register(**options)`` makes the same resolution
JAX's own cluster detection method ``"mpi_resolver"`` (detection); ``JaxTermination`` and
``keras_callback`` save at one step on Slurm's signal and requeue (long_jobs); what JAX is
given, from a resolution, is pure (arguments: the coordinator, the process id, the CUDA
ordinals of the task's GPUs, the CPU collectives).

May import every part below it, resolve/ included; only rehearsal/ (jax_deep) and the users'
scripts import it. The only part of the package that imports JAX. Importing
``mpi_resolver.jax`` imports neither JAX nor mpi4py: its names load their modules when first
used.

    from mpi_resolver.jax import initialize
    resolution = initialize(port_base="auto")   # then jax.process_index() == the Slurm rank
"""

from __future__ import annotations

from typing import Any

__all__ = ["initialize", "register", "JaxResolution", "JaxTermination", "keras_callback"]

#: The names loaded on first use (they import JAX), and their modules.
_LAZY = {"initialize": ".start", "JaxResolution": ".start", "register": ".detection",
         "JaxTermination": ".long_jobs", "keras_callback": ".long_jobs"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        from importlib import import_module

        return getattr(import_module(_LAZY[name], __name__), name)
    raise AttributeError(f"module 'mpi_resolver.jax' has no attribute {name!r}")
