"""mpi_resolver: TensorFlow's SlurmClusterResolver, cross-checked and completed by MPI.

``import mpi_resolver`` neither imports TensorFlow nor starts MPI: TensorFlow is imported the
first time ``mpi_resolver.MPIClusterResolver`` is used, mpi4py only when MPI is needed.
"""

from __future__ import annotations

from typing import Any

from ._errors import (ExchangeTimeout, FormatError, MismatchError, MissingDependencyError,
                     ResolutionError)

__all__ = ["MPIClusterResolver", "ResolutionError", "FormatError", "MismatchError",
           "MissingDependencyError", "ExchangeTimeout"]
__version__ = "0.1.0"


def __getattr__(name: str) -> Any:
    if name == "MPIClusterResolver":
        from ._tf_resolver import MPIClusterResolver

        return MPIClusterResolver
    raise AttributeError(f"module 'mpi_resolver' has no attribute {name!r}")
