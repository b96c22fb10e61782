"""``mpi-resolver supervise``'s own settings (pure): --max-restarts, the mark it puts in its
step's environment, how long it waits for a step after passing SIGTERM on. The decisions
themselves are the policy's table (policy), over the run's cause (causes)."""

from __future__ import annotations

from mpi_resolver.core.errors import FormatError
from mpi_resolver.core.values import whole_number

__all__ = ["parse_max_restarts", "DEFAULT_MAX_RESTARTS", "STOP_TIMEOUT", "SUPERVISED_ENV"]

#: Set to "1" by supervise in its step's environment: the tasks then leave the requeue to
#: supervise (exit 75: run again; 143: stop) and run no scontrol themselves.
SUPERVISED_ENV = "MPI_RESOLVER_SUPERVISED"
#: Restarts in the same allocation before supervise gives up (--max-restarts); two runs in a
#: row without progress stop the job sooner (policy).
DEFAULT_MAX_RESTARTS = 3
#: Seconds supervise waits for the step after passing SIGTERM on, before it kills it: Slurm
#: kills everything after KillWait (30 s by default) itself; this bounds a step without Slurm.
STOP_TIMEOUT = 120.0
_FORMS = "a whole number of restarts, 0 or more: --max-restarts 3 (the default), 0 (never)"


def parse_max_restarts(text: str) -> int:
    """Returns ``--max-restarts``' value as an int >= 0.

    Raises:
      FormatError: not a whole number (a negative one, a fraction, a word), naming the
        accepted forms.
    """
    number = whole_number(text)
    if number is None:
        raise FormatError(f"--max-restarts {text!r}: expected {_FORMS}.")
    return number
