"""The node-local tier's settings (pure: the environment is passed in): the local directory's
pattern (``local_dir``, else MPI_RESOLVER_LOCAL_DIR; none: no tier) and every how many local
saves also go to the shared directory (``shared_every``, else MPI_RESOLVER_SHARED_EVERY, else
DEFAULT_SHARED_EVERY), each checked as soon as it is read."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Optional

from mpi_resolver.core import settings
from mpi_resolver.core.errors import FormatError
from mpi_resolver.core.settings import number_text, setting
from mpi_resolver.long_jobs.manifest import this_job
from mpi_resolver.long_jobs.tiers import local_path

__all__ = ["TierSettings", "tier_settings", "DEFAULT_SHARED_EVERY"]

#: Local saves per save to the shared directory, by default.
DEFAULT_SHARED_EVERY = 10


@dataclass(frozen=True)
class TierSettings:
    """The local directory's ``pattern`` (its name in the errors: ``name``) and
    ``shared_every``."""

    pattern: str
    name: str
    shared_every: int


def _shared_every(value: Any, name: str = "shared_every") -> int:
    """Returns ``value`` as the local saves per shared one.

    Raises:
      FormatError: not a whole number >= 1, naming ``name``.
    """
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise FormatError(f"{name}={value!r}: expected a whole number of local saves >= 1 "
                          f"(default {DEFAULT_SHARED_EVERY}).")
    return value


def tier_settings(env: Mapping[str, str], local_dir: Optional[str] = None,
                  shared_every: Any = None) -> Optional[TierSettings]:
    """Returns the tier's settings, None where neither ``local_dir`` nor the variable gives
    a local directory.

    Raises:
      FormatError: a pattern local_path refuses (not absolute, an unknown '%', %j outside a
        job), a shared_every that is not a whole number >= 1; each naming the argument or the
        variable.
    """
    every = setting(shared_every, settings.SHARED_EVERY, env,
                    lambda text: _shared_every(number_text(text), "its value"))
    every = DEFAULT_SHARED_EVERY if every is None else _shared_every(every)
    name = "local_dir" if local_dir is not None else settings.LOCAL_DIR
    pattern = setting(local_dir, settings.LOCAL_DIR, env, str)
    if pattern is None:
        return None
    local_path(pattern, "node", 0, this_job(env), "user", name)  # refused now, not later
    return TierSettings(pattern, name, every)
