"""Which checkpoint a long JAX job resumes from, the same on every process: process 0 lists
the checkpoints (Orbax's, and the package's earlier format's), every process reads the newest
in turn (the shards it owns), all say how it went, and the first that every process read
whole is taken: a torn one is skipped with a warning (long_jobs.resume's rule), one that does
not fit the state ends every process naming why (never skipped to an older one). A checkpoint
of the earlier format is restored once, with a warning: the next saves are Orbax's. The JAX
edge; importing this module imports JAX and Orbax.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple

from mpi_resolver.core.errors import ConfigurationError, ResolutionError
from mpi_resolver.jax.coordinator import JaxCoordinator
from mpi_resolver.jax.npz_checkpoints import NpzCheckpoints, checkpoint_name, step_of
from mpi_resolver.jax.orbax_checkpoints import OrbaxCheckpoints, orbax_name, serialized
from mpi_resolver.jax.state import misfit, restored
from mpi_resolver.long_jobs.resume import first_line, restore_newest

__all__ = ["Restored", "restore_agreed", "DoesNotFit", "candidates"]

#: What a process says of a checkpoint it read whole and that fits.
_WHOLE = "whole"
#: The start of what a process says of a checkpoint that does not fit the state.
_MISFIT = "misfit: "


class DoesNotFit(ConfigurationError):
    """A whole checkpoint written for another state (another model or optimizer): a run
    again would meet it again (uncaught: exit 78)."""


@dataclass(frozen=True)
class Restored:
    """The checkpoint restored: its ``step`` (None: none), the ``tree`` read into the
    template, its ``name`` in the directory, and the ``warnings`` (torn ones skipped, the
    earlier format)."""

    step: Optional[int] = None
    tree: Any = None
    name: Optional[str] = None
    warnings: List[str] = field(default_factory=list)


def candidates(orbax_steps: List[int], npz_steps: List[int]) -> List[str]:
    """Returns the checkpoints' names, oldest first (at one step, the earlier format's
    first, so that Orbax's is tried first)."""
    named = [(step, 0, checkpoint_name(step)) for step in npz_steps]
    named += [(step, 1, orbax_name(step)) for step in orbax_steps]
    return [name for _, _, name in sorted(named)]


def restore_agreed(coord: JaxCoordinator, key: str, orbax: OrbaxCheckpoints,
                   npz: NpzCheckpoints, template: Any) -> Restored:
    """Returns the checkpoint every process restored (see the module); every process calls
    it.

    Raises:
      DoesNotFit: the newest whole checkpoint was written for another state.
      ResolutionError: a process did not say how its reading went in time.
    """
    listed = ",".join(candidates(orbax.steps(), npz.steps())) if coord.chief else ""
    told = coord.agree(f"{key}_candidates", listed, "which checkpoints there are")
    names = told.split(",") if told else []
    trees: Dict[str, Any] = {}

    def read(name: str) -> None:
        said, tree = _read(orbax, npz, name, template)
        heard = coord.gather(f"{key}_read_{name}", said, f"how it read {name}")
        for one in heard:
            if one.startswith(_MISFIT):  # every process raises: process 0 last
                coord.leave(f"{key}_read_{name}_left")
                raise DoesNotFit(one[len(_MISFIT):])
        torn = [(rank, one) for rank, one in enumerate(heard) if one != _WHOLE]
        if torn:
            rank, why = torn[0]
            raise OSError(why if coord.size == 1 else f"process {rank}: {why}")
        trees[name] = tree

    chosen, warnings = restore_newest(names, read, orbax.directory, fatal=(DoesNotFit,))
    if chosen is None:
        return Restored(warnings=warnings)
    step = step_of(chosen)
    if step is not None:
        warnings.append(f"checkpoint {chosen} in {orbax.directory} is in the package's earlier "
                        "format (NumPy): restored this once; the next checkpoints are Orbax's")
    return Restored(int(chosen) if step is None else step, trees[chosen], chosen, warnings)


def _read(orbax: OrbaxCheckpoints, npz: NpzCheckpoints, name: str,
          template: Any) -> Tuple[str, Any]:
    """Returns (what this process says of checkpoint ``name``: whole, misfit or why it is
    torn; the tree it read, None where it did not)."""
    where = f"{orbax.directory}/{name}"
    step = step_of(name)
    try:
        if step is not None:  # the earlier format
            arrays = npz.load(step)
        else:
            why = misfit(orbax.saved_tree(int(name)), serialized(template), where)
            if why is not None:
                return _MISFIT + why, None
    except Exception as e:  # noqa: BLE001 - any failure to read means: torn
        return first_line(e), None
    try:
        if step is not None:
            return _WHOLE, restored(template, arrays, where)
        return _WHOLE, orbax.restore(int(name), template)
    except ResolutionError as e:  # the earlier format's leaves do not fit
        return _MISFIT + str(e), None
    except Exception as e:  # noqa: BLE001
        return first_line(e), None

