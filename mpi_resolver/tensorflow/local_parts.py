"""A TensorFlow worker's part of the node-local tier as bytes, and back (the TensorFlow edge;
importing this module imports TensorFlow): a snapshot's checkpoint files, in TensorFlow's own
format (snapshot.write, into a scratch directory the tier gives: the node's own disk or
memory), read into the part one after the other; a part's files written back there, every
tensor read before anything is restored (a part cut short is refused whole), then restored
from there as the shared directory's checkpoints are.

Under MultiWorkerMirroredStrategy every worker holds the whole state, so a worker's part is
a whole checkpoint. The bytes: MAGIC, the header's length (8 bytes, little-endian), the
header (JSON: each file's name and length), then the files' bytes one after the other."""

from __future__ import annotations

import json
import os
import shutil
from typing import Any

import tensorflow as tf
from tensorflow.python.training import py_checkpoint_reader

from mpi_resolver.tensorflow import snapshot as snapshots

__all__ = ["packed", "unpacked", "restore_from", "PartMisfit", "MAGIC"]

#: A part's first bytes.
MAGIC = b"mpi_resolver tensorflow part 1\n"


class PartMisfit(ValueError):
    """Bytes that are not a whole part (not one, cut short, or its tensors unreadable)."""


def packed(snap: snapshots.Snapshot, scratch: str) -> bytearray:
    """Returns ``snap``'s checkpoint files as a part's bytes (see the module): written in
    ``scratch`` (a directory not there yet, removed after), each file read straight into the
    part and removed once read (the files and the part at once: a state's size twice).

    Raises:
      OSError: ``scratch`` cannot be written, or a file changed while read.
    """
    try:
        _write(snap, f"{scratch}/ckpt")
        files = sorted(os.path.join(scratch, n) for n in os.listdir(scratch)
                       if n.startswith("ckpt."))
        sizes = [os.path.getsize(path) for path in files]
        header = json.dumps([[os.path.basename(p), n] for p, n in
                             zip(files, sizes, strict=True)]).encode()
        head = MAGIC + len(header).to_bytes(8, "little") + header
        out = bytearray(len(head) + sum(sizes))
        out[:len(head)] = head
        view, at = memoryview(out), len(head)
        for path, size in zip(files, sizes, strict=True):
            _read_into(path, view[at:at + size])
            os.remove(path)
            at += size
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return out


def _write(snap: snapshots.Snapshot, prefix: str) -> None:
    """Writes ``snap``'s checkpoint files at ``prefix``.

    Raises:
      OSError: TensorFlow could not write it (its error's message).
    """
    try:
        snapshots.write(snapshots.Snapshot(prefix, snap.tensors))
    except tf.errors.OpError as e:
        raise OSError(f"{os.path.dirname(prefix)}: {e.message}") from e


def _read_into(path: str, view: memoryview) -> None:
    """Fills ``view`` with file ``path``'s bytes.

    Raises:
      OSError: the file is shorter or longer than ``view`` (it changed), or cannot be read.
    """
    with open(path, "rb", buffering=0) as f:
        got = 0
        while got < len(view):
            n = f.readinto(view[got:])
            if not n:
                break
            got += n
        if got != len(view) or f.read(1):
            raise OSError(f"{path} changed while it was read into the part")


def unpacked(blob: Any, scratch: str) -> str:
    """Returns the prefix of the checkpoint ``blob`` (a part's bytes) holds, its files written
    in ``scratch`` (a directory not there yet; restore_from removes it) and every tensor read.

    Raises:
      PartMisfit: ``blob`` is not a whole part, naming what is wrong.
      OSError: ``scratch`` cannot be written.
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
    try:
        os.makedirs(scratch)
        for name, length in files:
            with open(os.path.join(scratch, os.path.basename(name)), "wb") as f:
                f.write(view[offset:offset + length])
            offset += length
        prefix = os.path.join(scratch, "ckpt")
        reader = py_checkpoint_reader.NewCheckpointReader(prefix)
        for name in reader.get_variable_to_shape_map():
            reader.get_tensor(name)
    except (tf.errors.OpError, ValueError, OSError) as e:
        shutil.rmtree(scratch, ignore_errors=True)
        if isinstance(e, OSError):
            raise
        raise PartMisfit(f"a part whose checkpoint cannot be read ({type(e).__name__})") from e
    return prefix


def restore_from(checkpoint: Any, prefix: str) -> None:
    """Restores ``checkpoint`` (a tf.train.Checkpoint) from the part ``unpacked`` put at
    ``prefix``, then removes the part's files."""
    try:
        checkpoint.restore(prefix).expect_partial()
    finally:
        shutil.rmtree(os.path.dirname(prefix), ignore_errors=True)
