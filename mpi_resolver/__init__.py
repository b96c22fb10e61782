"""mpi_resolver: TensorFlow's SlurmClusterResolver, cross-checked and completed by MPI.

``import mpi_resolver`` neither imports TensorFlow nor starts MPI: TensorFlow is imported the
first time ``mpi_resolver.MPIClusterResolver`` (or one of the long-job names,
``SlurmTerminationConfig``, ``SlurmBackupAndRestore`` and ``StepWatchdogCallback``) is used,
mpi4py only when MPI is needed; ``StepWatchdog`` and ``long_job_settings`` import neither.
"""

from __future__ import annotations

from typing import Any

from mpi_resolver.core.errors import (ConfigurationError, ExchangeTimeout, FormatError,
                                      MismatchError, MissingDependencyError, ResolutionError)

__all__ = ["MPIClusterResolver", "ResolutionError", "FormatError", "MismatchError",
           "MissingDependencyError", "ExchangeTimeout", "ConfigurationError",
           "SlurmTerminationConfig",
           "SlurmBackupAndRestore", "StepWatchdog", "StepWatchdogCallback", "long_job_settings"]
__version__ = "0.1.0"


#: The names imported on first use (all but StepWatchdog and long_job_settings import
#: TensorFlow), and their modules.
_LAZY = {"MPIClusterResolver": ".resolve.tf_resolver",
         "SlurmTerminationConfig": ".tensorflow.termination_config",
         "SlurmBackupAndRestore": ".tensorflow.keras_callback",
         "StepWatchdog": ".long_jobs.step_watchdog",
         "StepWatchdogCallback": ".tensorflow.watchdog_callback",
         "long_job_settings": ".long_jobs.job_settings"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        from importlib import import_module

        return getattr(import_module(_LAZY[name], __name__), name)
    raise AttributeError(f"module 'mpi_resolver' has no attribute {name!r}")
