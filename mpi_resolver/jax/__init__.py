"""The JAX edge: ``initialize(**options)`` resolves the job as MPIClusterResolver does and starts
``jax.distributed`` with the answer (start); ``register(**options)`` makes the same resolution
JAX's own cluster detection method ``"mpi_resolver"`` (detection); ``LongJob`` keeps a training
loop's checkpoints (periodic, and at one step on Slurm's signal, then the requeue) and resumes
from the newest whole one (long_jobs, over checkpoints, state, termination and coordinator),
``restore_model`` and ``keras_callback`` do it for Keras 3's ``fit`` (keras_job); what JAX is
given, from a resolution, is pure (arguments: the coordinator, the process id, the CUDA
ordinals of the task's GPUs, the CPU collectives).

May import every part below it, resolve/ and the long-job core (long_jobs/) included,
never the TensorFlow edge (mpi_resolver.tensorflow) beside it; only rehearsal/ (jax_deep)
and the users' scripts import it. The only part of the package that imports JAX. Importing
``mpi_resolver.jax`` imports neither JAX nor mpi4py: its names load their modules when first
used.

    from mpi_resolver.jax import initialize
    resolution = initialize(port_base="auto")   # then jax.process_index() == the Slurm rank
"""

from __future__ import annotations

from typing import Any

__all__ = ["initialize", "register", "JaxResolution", "JaxTermination", "LongJob",
           "keras_callback", "restore_model"]

#: The names loaded on first use (they import JAX), and their modules.
_LAZY = {"initialize": ".start", "JaxResolution": ".start", "register": ".detection",
         "JaxTermination": ".termination", "LongJob": ".long_jobs",
         "keras_callback": ".keras_job", "restore_model": ".keras_job"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        from importlib import import_module

        return getattr(import_module(_LAZY[name], __name__), name)
    raise AttributeError(f"module 'mpi_resolver.jax' has no attribute {name!r}")
