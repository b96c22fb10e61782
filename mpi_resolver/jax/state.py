"""A JAX training state (any pytree: parameters, the optimizer's state, a step counter) to
named NumPy arrays and back: this process's copy of each leaf (replicated state, as data
parallelism keeps it; a leaf sharded across processes is refused with what to use instead),
and the arrays put back in the shape, type and placement of a template state, each leaf
checked. The JAX edge of the checkpoints (.checkpoints holds the files).
"""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, Tuple

import jax
import numpy as np

from mpi_resolver.core.errors import ResolutionError

__all__ = ["named_arrays", "restored", "PATHS_KEY"]

#: The entry that lists the leaves' paths in the tree (as jax.tree_util.keystr writes them).
PATHS_KEY = "__paths__"


def _leaves(tree: Any) -> List[Tuple[str, Any]]:
    """Returns (path, leaf) for every leaf of ``tree``, in JAX's order."""
    flat, _ = jax.tree_util.tree_flatten_with_path(tree)
    return [(jax.tree_util.keystr(path) or "(the state)", leaf) for path, leaf in flat]


def _local_copy(path: str, leaf: Any) -> np.ndarray:
    """Returns this process's copy of ``leaf`` as a NumPy array.

    Raises:
      ResolutionError: the leaf is sharded across processes (no process has all of it).
    """
    if not getattr(leaf, "is_fully_addressable", True):  # a jax.Array spread over processes
        if not leaf.is_fully_replicated:
            raise ResolutionError(
                f"state {path} is sharded across processes ({leaf.sharding}): mpi_resolver.jax "
                "saves replicated state (data parallelism) from process 0; for state sharded "
                "across processes use Orbax's checkpointing (orbax.checkpoint) with the "
                "package's signal handling (JaxTermination).")
        leaf = leaf.addressable_data(0)
    return np.asarray(leaf)


def named_arrays(tree: Any) -> Dict[str, np.ndarray]:
    """Returns ``tree``'s leaves as NumPy arrays named 's0', 's1', ... in JAX's order, and
    their paths under PATHS_KEY.

    Raises:
      ResolutionError: a leaf sharded across processes.
    """
    leaves = _leaves(tree)
    arrays = {f"s{i}": _local_copy(path, leaf) for i, (path, leaf) in enumerate(leaves)}
    arrays[PATHS_KEY] = np.array([path for path, _ in leaves], dtype=np.str_)
    return arrays


def restored(template: Any, arrays: Mapping[str, np.ndarray], where: str) -> Any:
    """Returns ``template`` with every leaf replaced by the saved array of the same path:
    a JAX array placed as the template's leaf is (its sharding), a Python number as a
    number, anything else as a NumPy array. ``where`` names the checkpoint in errors.

    Raises:
      ResolutionError: the checkpoint holds other leaves, shapes or types than the template
        (it was written for another model or optimizer).
    """
    leaves = _leaves(template)
    paths = [str(p) for p in arrays.get(PATHS_KEY, np.array([], dtype=np.str_)).tolist()]
    if paths != [path for path, _ in leaves]:
        raise ResolutionError(_mismatch(where, _first_difference(paths, leaves)))
    values = []
    for i, (path, leaf) in enumerate(leaves):
        saved = arrays[f"s{i}"]
        want = np.asarray(leaf) if not isinstance(leaf, jax.Array) else leaf
        if tuple(saved.shape) != tuple(np.shape(want)) or saved.dtype != want.dtype:
            raise ResolutionError(_mismatch(where, f"{path} is {saved.dtype}{list(saved.shape)}"
                                                   f" there, {want.dtype}"
                                                   f"{list(np.shape(want))} here"))
        values.append(_placed(leaf, saved))
    return jax.tree_util.tree_unflatten(jax.tree_util.tree_structure(template), values)


def _placed(leaf: Any, saved: np.ndarray) -> Any:
    """Returns ``saved`` as ``leaf`` was: a JAX array with its sharding, a number, NumPy."""
    if isinstance(leaf, jax.Array):
        return jax.make_array_from_callback(saved.shape, leaf.sharding, lambda i: saved[i])
    if isinstance(leaf, (bool, int, float, complex)):
        return type(leaf)(saved.item())
    return saved


def _first_difference(paths: List[str], leaves: List[Tuple[str, Any]]) -> str:
    """Returns the first leaf where the checkpoint's paths and the template's differ."""
    here = [path for path, _ in leaves]
    for saved, own in zip(paths, here, strict=False):
        if saved != own:
            return f"the checkpoint has {saved} where this state has {own}"
    return f"the checkpoint has {len(paths)} leaves, this state {len(here)}"


def _mismatch(where: str, what: str) -> str:
    return (f"{where} does not fit this training state ({what}): it was written for another "
            "model or optimizer. Give this run its own checkpoint directory, or remove that "
            "checkpoint.")
