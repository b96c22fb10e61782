"""A long job's settings, each from the script's argument where it passes one, else from the
batch script's ``MPI_RESOLVER_*`` variable, else the default (pure: the environment is passed
in), so that a template can run any script with exactly its user's arguments."""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from typing import Any, Mapping, Optional, Union

from mpi_resolver.core import settings
from mpi_resolver.core.errors import FormatError
from mpi_resolver.core.settings import setting
from mpi_resolver.core.values import switch
from mpi_resolver.long_jobs.interval import (DEFAULT_KEEP, DEFAULT_NODE_MTBF_HOURS, job_mtbf,
                                              parse_every, parse_keep)
from mpi_resolver.long_jobs.signals import DEFAULT_SIGNAL, grace_seconds, parse_signal

__all__ = ["JobSettings", "job_settings", "said_checkpoint_dir", "checkpoint_dir",
           "check_every_steps", "long_job_settings"]


@dataclass(frozen=True)
class JobSettings:
    """The settings a SlurmTerminationConfig is built with (each checked by its own rule
    later, as an argument would be), and the checkpoint directory for its handler() and
    SlurmBackupAndRestore (None: neither the script nor the batch script says one)."""

    signal: Union[str, int]
    checkpoint_every: Any
    keep: int
    node_mtbf_hours: float
    grace_period: Optional[float] = None  # long_job_settings() fills it
    checkpoint_dir: Optional[str] = None  # long_job_settings() fills it
    checkpoint_async: bool = True  # periodic saves written in the background


def _checked(rule: Any) -> Any:
    """Returns a check that runs ``rule`` on a variable's text and keeps the text."""
    def check(text: str) -> str:
        rule(text)
        return text
    return check


def _hours(text: str) -> float:
    """Returns a variable's hours as a float, checked as node_mtbf_hours is.

    Raises:
      FormatError: not a number of hours > 0.
    """
    try:
        hours = float(text)
    except ValueError:
        raise FormatError("expected a number of hours > 0, e.g. 6000") from None
    job_mtbf(1, hours)
    return hours


def job_settings(env: Mapping[str, str], *, signal: Any = None, checkpoint_every: Any = None,
                 keep: Any = None, node_mtbf_hours: Any = None,
                 checkpoint_async: Any = None) -> JobSettings:
    """Returns the settings: each argument not None as given, else its variable's
    (MPI_RESOLVER_SIGNAL, _CHECKPOINT_EVERY, _KEEP, _NODE_MTBF_HOURS, _CHECKPOINT_ASYNC),
    else the default.

    Raises:
      FormatError, ResolutionError: a variable that its argument's rule refuses, named.
    """
    signal = setting(signal, settings.SIGNAL, env, _checked(parse_signal))
    every = setting(checkpoint_every, settings.CHECKPOINT_EVERY, env, _checked(parse_every))
    keep = setting(keep, settings.KEEP, env, parse_keep)
    hours = setting(node_mtbf_hours, settings.NODE_MTBF_HOURS, env, _hours)
    background = setting(checkpoint_async, settings.CHECKPOINT_ASYNC, env,
                         lambda text: switch(text, "checkpoint_async"))
    return JobSettings(DEFAULT_SIGNAL if signal is None else signal, every,
                       DEFAULT_KEEP if keep is None else keep,
                       DEFAULT_NODE_MTBF_HOURS if hours is None else hours,
                       checkpoint_async=True if background is None else
                       switch(background, "checkpoint_async"))


def long_job_settings(*, signal: Any = None, grace_period: Optional[float] = None,
                      checkpoint_every: Any = None, keep: Any = None,
                      node_mtbf_hours: Any = None, checkpoint_dir: Optional[str] = None,
                      checkpoint_async: Any = None,
                      env: Optional[Mapping[str, str]] = None,
                      names: Optional[Mapping[str, str]] = None) -> JobSettings:
    """Returns a long job's settings as SlurmTerminationConfig takes them (each argument, else
    its MPI_RESOLVER_* variable from ``env``, default this process's environment, else the
    default), checked by the same rules, without TensorFlow: for a script to refuse bad
    input before it starts. ``names`` gives the script's own names of the arguments in the
    errors (``{"signal": "--signal", ...}``). Its ``checkpoint_dir`` is the argument, else
    MPI_RESOLVER_CHECKPOINT_DIR (an empty one is not set), else None: the directory
    ``handler()`` and SlurmBackupAndRestore would use.

    Raises:
      FormatError, ResolutionError: a value its rule refuses, naming the argument or the
        variable.
    """
    name = {**{k: k for k in ("signal", "grace_period", "checkpoint_every", "keep",
                              "checkpoint_async")}, **(names or {})}
    env = os.environ if env is None else env
    if checkpoint_async is not None:
        switch(checkpoint_async, name["checkpoint_async"])
    given = job_settings(env, signal=signal, checkpoint_every=checkpoint_every, keep=keep,
                         node_mtbf_hours=node_mtbf_hours, checkpoint_async=checkpoint_async)
    grace = grace_seconds(grace_period, parse_signal(given.signal, name["signal"]),
                          name["grace_period"], name["signal"])
    parse_every(given.checkpoint_every, name["checkpoint_every"])
    parse_keep(given.keep, name["keep"])
    job_mtbf(1, given.node_mtbf_hours)
    return replace(given, grace_period=grace,
                   checkpoint_dir=said_checkpoint_dir(checkpoint_dir, env))


def check_every_steps(value: Any) -> int:
    """Returns ``check_every``, the steps between two agreements on Slurm's signal.

    Raises:
      FormatError: not a whole number >= 1, naming it.
    """
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise FormatError(f"check_every={value!r}: expected a whole number of steps >= 1.")
    return value


def said_checkpoint_dir(given: Optional[str], env: Mapping[str, str]) -> Optional[str]:
    """Returns ``given`` where it is not empty, else MPI_RESOLVER_CHECKPOINT_DIR's text
    (stripped), else None (the variable unset or empty)."""
    return setting(given or None, settings.CHECKPOINT_DIR, env, str)


def checkpoint_dir(given: Optional[str], env: Mapping[str, str], where: str) -> str:
    """Returns the long job's checkpoint directory: ``given``, else MPI_RESOLVER_CHECKPOINT_DIR.

    Raises:
      FormatError: neither says one (``where`` names the argument).
    """
    directory = said_checkpoint_dir(given, env)
    if not directory:
        raise FormatError(f"{where} is not given and {settings.CHECKPOINT_DIR} is not set: "
                          "pass the checkpoint directory (one every node sees), or export "
                          f"{settings.CHECKPOINT_DIR}=DIR in the batch script.")
    return directory
