"""This process's part of a JAX state as bytes (the node-local tier's unit) and back: each
JAX array as the data of the shards this process holds (each region once, with its bounds),
any other leaf (a NumPy array, a Python number) whole; read back into a template's shapes,
types and shardings, each array made from this process's shards alone (no collective).

The bytes: MAGIC, the header's length (8 bytes, little-endian), the header (JSON: the
leaves' index, each array's name, type, shape and offset), then the arrays' bytes one after
the other: packed with one copy (into memory, or straight into the tier's file), read back
without one (a .npz's zip and checksums took
1.3 s to read 512 MiB here)."""

from __future__ import annotations

import json
from typing import Any, Dict, List, Tuple

import jax
import numpy as np

from mpi_resolver.long_jobs.local_tier import Packed, remove_file

__all__ = ["part_snapshot", "packed", "packed_file", "unpacked", "part_bytes", "from_part",
           "PartMisfit", "MAGIC"]

Bounds = Tuple[Tuple[int, int], ...]


#: A part's first bytes.
MAGIC = b"mpi_resolver part 1\n"


class PartMisfit(ValueError):
    """A part written for another state (its leaves, shapes or types differ), or no part."""


def _bounds(index: Tuple[slice, ...], shape: Tuple[int, ...]) -> Bounds:
    """Returns a shard's region (``index``: its slices) as (start, stop) per dimension."""
    return tuple((s.start or 0, dim if s.stop is None else s.stop)
                 for s, dim in zip(index, shape, strict=True))


def part_snapshot(tree: Any) -> Dict[str, np.ndarray]:
    """Returns this process's part of ``tree`` (see the module) as host copies, named as the
    part's header names them: what a save in the background holds while the training goes on
    (a copy: a donated or reused device buffer may change under it)."""
    arrays: Dict[str, np.ndarray] = {}
    index: List[Any] = []
    for i, leaf in enumerate(jax.tree.leaves(tree)):
        if isinstance(leaf, jax.Array):
            regions: Dict[Bounds, np.ndarray] = {}
            for shard in leaf.addressable_shards:
                bounds = _bounds(shard.index, leaf.shape)
                if bounds not in regions:
                    regions[bounds] = np.array(shard.data, copy=True)
            index.append([list(leaf.shape), str(leaf.dtype), [list(b) for b in regions]])
            arrays.update({f"{i}.{j}": data for j, data in enumerate(regions.values())})
        else:
            arrays[str(i)] = np.array(leaf, copy=True)
            index.append(None)
    arrays["index"] = np.frombuffer(json.dumps(index).encode(), np.uint8)
    return arrays


def packed(arrays: Dict[str, np.ndarray]) -> bytearray:
    """Returns a part_snapshot as a part's bytes (see the module)."""
    head, offsets = _head(arrays)
    out = bytearray(len(head) + sum(data.nbytes for data in arrays.values()))
    out[:len(head)] = head
    view = memoryview(out)
    for at, data in zip(offsets, arrays.values(), strict=True):
        view[len(head) + at:len(head) + at + data.nbytes] = _flat(data)
    return out


def packed_file(arrays: Dict[str, np.ndarray], path: str) -> Packed:
    """Returns a part_snapshot written as a part's file at ``path`` (the bytes ``packed``
    gives, each array written from its own memory: one copy, none in between).

    Raises:
      OSError: the file cannot be written (none left).
    """
    head, _ = _head(arrays)
    try:
        with open(path, "wb") as f:
            f.write(head)
            for data in arrays.values():
                f.write(_flat(data))
    except OSError:
        remove_file(path)
        raise
    return Packed(path)


def _head(arrays: Dict[str, np.ndarray]) -> Tuple[bytes, List[int]]:
    """Returns a part's bytes before its arrays' (MAGIC, the header's length, the header)
    and each array's offset after them."""
    layout: List[Any] = []
    offsets: List[int] = []
    offset = 0
    for name, data in arrays.items():
        layout.append([name, data.dtype.str, list(data.shape), offset])
        offsets.append(offset)
        offset += data.nbytes
    header = json.dumps(layout).encode()
    return MAGIC + len(header).to_bytes(8, "little") + header, offsets


def _flat(data: np.ndarray) -> memoryview:
    """Returns ``data``'s bytes, in C order (a view where it is contiguous)."""
    return np.ascontiguousarray(data).reshape(-1).view(np.uint8).data


def unpacked(blob: Any) -> Dict[str, np.ndarray]:
    """Returns the arrays of a part's bytes ``blob``, views of it (no copy).

    Raises:
      PartMisfit: ``blob`` is not a whole part.
    """
    size = len(MAGIC) + 8
    if bytes(blob[:len(MAGIC)]) != MAGIC or len(blob) < size:
        raise PartMisfit("it is not a part of mpi_resolver's node-local tier")
    end = size + int.from_bytes(blob[len(MAGIC):size], "little")
    try:
        layout = json.loads(bytes(blob[size:end]))
        return {name: np.frombuffer(blob, np.dtype(kind), int(np.prod(shape)), end + at)
                .reshape(shape) for name, kind, shape, at in layout}
    except ValueError as e:  # a header or an array cut short
        raise PartMisfit(f"it is not whole ({e})") from e


def part_bytes(tree: Any) -> bytearray:
    """Returns this process's part of ``tree`` (see the module) as its bytes."""
    return packed(part_snapshot(tree))


def from_part(blob: Any, template: Any) -> Any:
    """Returns ``template`` with each leaf read from ``blob`` (part_bytes' form).

    Raises:
      PartMisfit: the part has other leaves, shapes or types than ``template``, naming the
        first leaf that differs.
    """
    arrays = unpacked(blob)
    index = json.loads(arrays.pop("index").tobytes())
    paths, treedef = jax.tree_util.tree_flatten_with_path(template)
    if len(index) != len(paths):
        raise PartMisfit(f"it holds {len(index)} arrays and numbers, the state "
                         f"{len(paths)}")
    leaves = [_leaf(arrays, i, entry, path, leaf)
              for i, (entry, (path, leaf)) in enumerate(zip(index, paths, strict=True))]
    return jax.tree_util.tree_unflatten(treedef, leaves)


def _leaf(arrays: Dict[str, np.ndarray], i: int, entry: Any, path: Any, leaf: Any) -> Any:
    """Returns leaf ``i`` of the part in ``leaf``'s form (raises PartMisfit, as from_part)."""
    name = jax.tree_util.keystr(path)
    if isinstance(leaf, jax.Array):
        if entry is None or (tuple(entry[0]), entry[1]) != (leaf.shape, str(leaf.dtype)):
            saved = "not an array" if entry is None else f"{tuple(entry[0])} {entry[1]}"
            raise PartMisfit(f"{name} is {saved} there, {leaf.shape} {leaf.dtype} in the "
                             "state")
        regions = {tuple(tuple(b) for b in bounds): arrays[f"{i}.{j}"]
                   for j, bounds in enumerate(entry[2])}
        try:
            return jax.make_array_from_callback(
                leaf.shape, leaf.sharding, lambda at: regions[_bounds(at, leaf.shape)])
        except KeyError as e:
            raise PartMisfit(f"{name} was held in other shards by this process") from e
    value = arrays.get(str(i))
    if value is None or np.shape(leaf) != value.shape:
        raise PartMisfit(f"{name} differs in the state")
    return type(leaf)(value.item()) if isinstance(leaf, (bool, int, float, complex)) \
        else value.copy()  # the caller's own, writable, not a view of the part
