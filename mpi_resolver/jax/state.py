"""A JAX training state (any pytree: parameters, the optimizer's state, a step counter) and
its checkpoints: whether a checkpoint's tree fits the state (every leaf's path, shape and
type, before Orbax reads it: Orbax would cast a type silently), and the named NumPy arrays of
the package's earlier format put back in the shape, type and placement of a template state,
each leaf checked. The JAX edge of the checkpoints (.orbax_checkpoints holds Orbax's files,
.checkpoints the earlier format's).
"""

from __future__ import annotations

from typing import Any, List, Mapping, Optional, Tuple

import jax
import numpy as np

from mpi_resolver.core.errors import ResolutionError

__all__ = ["misfit", "restored", "PATHS_KEY"]

#: The entry that lists the leaves' paths in the tree (as jax.tree_util.keystr writes them).
PATHS_KEY = "__paths__"


def _leaves(tree: Any) -> List[Tuple[str, Any]]:
    """Returns (path, leaf) for every leaf of ``tree``, in JAX's order."""
    flat, _ = jax.tree_util.tree_flatten_with_path(tree)
    return [(jax.tree_util.keystr(path) or "(the state)", leaf) for path, leaf in flat]


def misfit(saved: Any, template: Any, where: str) -> Optional[str]:
    """Returns why a checkpoint does not fit ``template`` (it was written for another model
    or optimizer), None where it fits. ``saved``: the checkpoint's tree, each leaf with the
    ``shape`` and ``dtype`` it was saved with (Orbax's metadata); ``template``: the state
    as Orbax saves it (its tree serialized); ``where`` names the checkpoint."""
    theirs, ours = _leaves(saved), _leaves(template)
    paths = [path for path, _ in theirs]
    if paths != [path for path, _ in ours]:
        return _mismatch(where, _first_difference(paths, ours))
    for (path, meta), (_, leaf) in zip(theirs, ours, strict=True):
        shape, dtype = tuple(meta.shape), np.dtype(meta.dtype)
        if isinstance(leaf, (bool, int, float, complex)):
            want = ((), dtype)  # a Python number: its type is the checkpoint's
        else:
            want = (tuple(np.shape(leaf)), np.dtype(leaf.dtype))
        if (shape, dtype) != want:
            return _mismatch(where, f"{path} is {dtype}{list(shape)} there, "
                                    f"{want[1]}{list(want[0])} here")
    return None


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
