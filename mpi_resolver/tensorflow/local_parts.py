"""A TensorFlow worker's part of the node-local tier as bytes, and back (the TensorFlow edge;
importing this module imports TensorFlow): a snapshot's checkpoint files, in TensorFlow's own
format (snapshot.write, into this process's memory: TensorFlow's ram:// file system), packed
one after the other; read back into ram://, every tensor read before anything is restored
(a part cut short is refused whole), then restored from there as the shared directory's
checkpoints are.

Under MultiWorkerMirroredStrategy every worker holds the whole state, so a worker's part is
a whole checkpoint. The bytes: MAGIC, the header's length (8 bytes, little-endian), the
header (JSON: each file's name and length), then the files' bytes one after the other."""

from __future__ import annotations

import itertools
import json
import os
from typing import Any

import tensorflow as tf
from tensorflow.python.training import py_checkpoint_reader

from mpi_resolver.tensorflow import snapshot as snapshots

__all__ = ["packed", "unpacked", "restore_from", "PartMisfit", "MAGIC"]

#: A part's first bytes.
MAGIC = b"mpi_resolver tensorflow part 1\n"
#: Where parts are put together and taken apart: this process's memory.
_RAM = "ram://mpi_resolver/local_part"
_COUNT = itertools.count()
#: The bytes of a checkpoint file copied into a part at a time.
_PIECE = 64 * 2 ** 20


class PartMisfit(ValueError):
    """Bytes that are not a whole part (not one, cut short, or its tensors unreadable)."""


def _fresh() -> str:
    """Returns a ram:// directory of this process's that no other part uses."""
    return f"{_RAM}_{os.getpid()}_{next(_COUNT)}"


def packed(snap: snapshots.Snapshot) -> bytearray:
    """Returns ``snap``'s checkpoint files as a part's bytes (see the module): each file
    copied in pieces into the part, and removed once copied (at most the files and the part
    in memory at once: a state's size twice, not three times)."""
    base = _fresh()
    prefix = snapshots.write(snapshots.Snapshot(f"{base}/ckpt", snap.tensors))
    try:
        files = sorted(tf.io.gfile.glob(prefix + ".*"))
        sizes = [tf.io.gfile.stat(path).length for path in files]
        header = json.dumps([[os.path.basename(p), n] for p, n in
                             zip(files, sizes, strict=True)]).encode()
        head = MAGIC + len(header).to_bytes(8, "little") + header
        out = bytearray(len(head) + sum(sizes))
        out[:len(head)] = head
        at = len(head)
        for path, size in zip(files, sizes, strict=True):
            with tf.io.gfile.GFile(path, "rb") as f:
                for start in range(0, size, _PIECE):
                    piece = f.read(_PIECE)
                    out[at + start:at + start + len(piece)] = piece
            tf.io.gfile.remove(path)
            at += size
    finally:
        tf.io.gfile.rmtree(base)
    return out


def unpacked(blob: Any) -> str:
    """Returns the prefix of the checkpoint ``blob`` (a part's bytes) holds, its files put in
    this process's memory and every tensor read (restore_from next, which removes them).

    Raises:
      PartMisfit: ``blob`` is not a whole part, naming what is wrong.
    """
    view = memoryview(blob)
    start = len(MAGIC) + 8
    if bytes(view[:len(MAGIC)]) != MAGIC or len(view) < start:
        raise PartMisfit("not a TensorFlow part of mpi_resolver's node-local tier")
    size = int.from_bytes(view[len(MAGIC):start], "little")
    try:
        files = json.loads(bytes(view[start:start + size]))
    except ValueError as e:
        raise PartMisfit(f"a part whose header cannot be read ({e})") from e
    offset = start + size
    if offset + sum(n for _, n in files) != len(view):
        raise PartMisfit(f"a part of {len(view)} bytes where its header says "
                         f"{offset + sum(n for _, n in files)}")
    base = _fresh()
    tf.io.gfile.makedirs(base)
    for name, length in files:
        with tf.io.gfile.GFile(f"{base}/{name}", "wb") as f:
            f.write(bytes(view[offset:offset + length]))
        offset += length
    prefix = f"{base}/ckpt"
    try:
        # (tf.train.load_checkpoint takes a ram:// prefix of files for a directory)
        reader = py_checkpoint_reader.NewCheckpointReader(prefix)
        for name in reader.get_variable_to_shape_map():
            reader.get_tensor(name)
    except (tf.errors.OpError, ValueError) as e:
        tf.io.gfile.rmtree(base)
        raise PartMisfit(f"a part whose checkpoint cannot be read ({type(e).__name__})") from e
    return prefix


def restore_from(checkpoint: Any, prefix: str) -> None:
    """Restores ``checkpoint`` (a tf.train.Checkpoint) from the part ``unpacked`` put at
    ``prefix``, then removes the part's files."""
    try:
        checkpoint.restore(prefix).expect_partial()
    finally:
        tf.io.gfile.rmtree(os.path.dirname(prefix))
