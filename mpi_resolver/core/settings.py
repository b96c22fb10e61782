"""The package's settings from the environment: the ``MPI_RESOLVER_*`` variables a batch
script sets so that a user's script runs with its own arguments only. An argument the script
passes wins; an unset or empty variable is not a setting (pure: the environment is passed in).
"""

from __future__ import annotations

from typing import Any, Callable, Dict, Mapping, TypeVar

from mpi_resolver.core.errors import (ConfigurationError, FormatError, ResolutionError,
                                      VariableError)

__all__ = ["PORT_BASE", "GPUS_PER_NODE", "CHECKPOINT_DIR", "SIGNAL", "CHECKPOINT_EVERY", "KEEP",
           "NODE_MTBF_HOURS", "STEP_TIMEOUT_FACTOR", "STEP_TIMEOUT_MIN", "START_TIMEOUT",
           "STRAGGLER_ROUND", "CHECKPOINT_ASYNC", "LOCAL_DIR", "SHARED_EVERY", "VARIABLES",
           "setting", "number_text"]

PORT_BASE = "MPI_RESOLVER_PORT_BASE"
GPUS_PER_NODE = "MPI_RESOLVER_GPUS_PER_NODE"
CHECKPOINT_DIR = "MPI_RESOLVER_CHECKPOINT_DIR"
SIGNAL = "MPI_RESOLVER_SIGNAL"
CHECKPOINT_EVERY = "MPI_RESOLVER_CHECKPOINT_EVERY"
KEEP = "MPI_RESOLVER_KEEP"
NODE_MTBF_HOURS = "MPI_RESOLVER_NODE_MTBF_HOURS"
STEP_TIMEOUT_FACTOR = "MPI_RESOLVER_STEP_TIMEOUT_FACTOR"
STEP_TIMEOUT_MIN = "MPI_RESOLVER_STEP_TIMEOUT_MIN"
START_TIMEOUT = "MPI_RESOLVER_START_TIMEOUT"
STRAGGLER_ROUND = "MPI_RESOLVER_STRAGGLER_ROUND"
CHECKPOINT_ASYNC = "MPI_RESOLVER_CHECKPOINT_ASYNC"
LOCAL_DIR = "MPI_RESOLVER_LOCAL_DIR"
SHARED_EVERY = "MPI_RESOLVER_SHARED_EVERY"

#: Each variable and the argument it stands for (docs/api.md lists them; a test keeps the two
#: the same).
VARIABLES: Dict[str, str] = {
    PORT_BASE: "MPIClusterResolver's port_base, and --port-base of the command line",
    GPUS_PER_NODE: "MPIClusterResolver's gpus_per_node, and --gpus-per-node",
    CHECKPOINT_DIR: "the long-job checkpoint directory (handler(), SlurmBackupAndRestore)",
    SIGNAL: "the warning signal and grace period ('USR1@120'), as signal=",
    CHECKPOINT_EVERY: "checkpoint_every= (N steps, a duration, 'auto')",
    KEEP: "keep= (checkpoints kept)",
    NODE_MTBF_HOURS: "node_mtbf_hours= (a node's mean time between failures, for 'auto')",
    STEP_TIMEOUT_FACTOR: "StepWatchdog's factor= (times the median step; 'off')",
    STEP_TIMEOUT_MIN: "StepWatchdog's minimum= (a step's least bound; 'off')",
    START_TIMEOUT: "StepWatchdog's start_timeout= (each step's bound before a median)",
    STRAGGLER_ROUND: "the seconds of training between two slow-rank rounds (45; 'off')",
    CHECKPOINT_ASYNC: "checkpoint_async= (periodic saves written in the background: 1, 0)",
    LOCAL_DIR: "local_dir= (JAX's LongJob: a node-local directory for the periodic saves)",
    SHARED_EVERY: "shared_every= (every how many local saves also go to the shared one)",
}

T = TypeVar("T")


def setting(given: Any, name: str, env: Mapping[str, str],
            check: Callable[[str], T]) -> Any:
    """Returns ``given`` where it is not None, else ``check`` of variable ``name``'s text
    (stripped), else None where the variable is unset or empty.

    Raises:
      VariableError (a FormatError), ConfigurationError: the variable's text fails
        ``check``, naming the variable first: a configuration error, which a restart would
        meet again.
    """
    if given is not None:
        return given
    text = env.get(name, "").strip()
    if not text:
        return None
    try:
        return check(text)
    except FormatError as e:
        raise VariableError(f"{name}={text!r}: {e}") from e
    except ResolutionError as e:
        raise ConfigurationError(f"{name}={text!r}: {e}") from e


def number_text(text: str) -> Any:
    """Returns ``text`` as an int where it is one (digits, a sign allowed), else unchanged,
    for the argument's own check to judge ('auto', a duration, a bad value)."""
    body = text[1:] if text[:1] in "+-" else text
    return int(text) if body.isascii() and body.isdigit() else text

