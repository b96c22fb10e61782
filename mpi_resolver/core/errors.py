"""The exceptions mpi_resolver raises: all of them are ResolutionError."""

from __future__ import annotations

from typing import Optional, Sequence


class ResolutionError(RuntimeError):
    """The cluster could not be resolved; the message names the input and the fix.

    A RuntimeError, as TensorFlow documents for its cluster resolvers.
    """


class FormatError(ResolutionError, ValueError):
    """A malformed input string: a hostlist, a tasks-per-node list, a number, a job list."""


#: sysexits.h's EX_CONFIG: the exit status of a process a configuration error ended.
EX_CONFIG = 78


class ConfigurationError(ResolutionError):
    """The job's configuration is refused (another job's checkpoint directory, one that
    cannot be written): a restart would meet it again. Uncaught in a long job's process, it
    ends the process with ``exit_status`` (EX_CONFIG), which ``mpi-resolver supervise``
    never restarts (long_jobs.process_end)."""

    exit_status = EX_CONFIG


class SettingError(FormatError, ConfigurationError):
    """A long job's setting (an argument of its classes) holds a value its rule refuses: a
    FormatError, and a ConfigurationError (every run would meet it)."""


class VariableError(FormatError, ConfigurationError):
    """An ``MPI_RESOLVER_*`` variable holds a value its setting refuses: a FormatError and a
    ConfigurationError."""


class MismatchError(ResolutionError):
    """Slurm's view of the job and MPI's (or this rank's own variables) disagree.

    ``rows`` holds the per-rank differences (see ``topology.Difference``) when there are any;
    ``records`` every rank's record (``topology.RankRecord``) where the exchange gathered them.
    """

    def __init__(self, message: str, rows: Sequence[object] = (),
                 records: Optional[Sequence[object]] = None) -> None:
        super().__init__(message)
        self.rows = tuple(rows)
        self.records = None if records is None else list(records)


class MissingDependencyError(ResolutionError, ImportError):
    """An optional dependency (TensorFlow, mpi4py) is not installed."""


class ExchangeTimeout(ResolutionError):
    """The MPI exchange did not complete within the timeout; the message names the ranks that
    never came where rank 0 could tell. Each rank raises its own."""
