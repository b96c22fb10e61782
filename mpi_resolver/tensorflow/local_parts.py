"""A TensorFlow worker's part of the node-local tier as a file, and back (the TensorFlow edge;
importing this module imports TensorFlow): a snapshot's checkpoint files, in TensorFlow's own
format (snapshot.write, into a scratch directory the tier gives: the node's own disk or
memory), made one file: the largest (the tensors' data) renamed to be the part, no copy, the
others and the header added at its end; a part's files written back to a scratch directory,
every tensor read before anything is restored (a part cut short is refused whole), then
restored from there as the shared directory's checkpoints are.

Under MultiWorkerMirroredStrategy every worker holds the whole state, so a worker's part is
a whole checkpoint. The bytes: the files' bytes one after the other (the largest first), the
header (JSON: each file's name and length, in that order), the header's length (8 bytes,
little-endian), then MAGIC."""

from __future__ import annotations

import json
import os
import shutil
from typing import Any, List, Tuple

import tensorflow as tf
from tensorflow.python.training import py_checkpoint_reader

from mpi_resolver.long_jobs.local_tier import PACKED, Packed, remove_file
from mpi_resolver.tensorflow import snapshot as snapshots

__all__ = ["packed", "unpacked", "restore_from", "PartMisfit", "MAGIC"]

#: A part's last bytes.
MAGIC = b"mpi_resolver tensorflow part 2\n"
#: MAGIC and the header's length before it.
_TAIL = len(MAGIC) + 8


class PartMisfit(ValueError):
    """Bytes that are not a whole part (not one, cut short, or its tensors unreadable)."""


def packed(snap: snapshots.Snapshot, scratch: str) -> Packed:
    """Returns ``snap``'s checkpoint as a part's file (see the module), ``scratch`` + PACKED:
    its files written in ``scratch`` (a directory not there yet, removed after), the largest
    renamed to be the part, the others copied to its end.

    Raises:
      OSError: ``scratch`` cannot be written, or TensorFlow wrote nothing there (no part
        left).
    """
    part = scratch + PACKED
    try:
        _write(snap, f"{scratch}/ckpt")
        files = sorted((os.path.join(scratch, n) for n in os.listdir(scratch)
                        if n.startswith("ckpt.")), key=os.path.getsize, reverse=True)
        if not files:
            raise OSError(f"{scratch}: TensorFlow wrote no checkpoint files there")
        sizes = [os.path.getsize(path) for path in files]
        os.replace(files[0], part)
        with open(part, "ab") as out:
            for path in files[1:]:
                with open(path, "rb") as f:
                    shutil.copyfileobj(f, out, 2 ** 20)
            header = json.dumps([[os.path.basename(p), n] for p, n in
                                 zip(files, sizes, strict=True)]).encode()
            out.write(header + len(header).to_bytes(8, "little") + MAGIC)
    except OSError:
        remove_file(part)
        raise
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return Packed(part)


def _write(snap: snapshots.Snapshot, prefix: str) -> None:
    """Writes ``snap``'s checkpoint files at ``prefix``.

    Raises:
      OSError: TensorFlow could not write it (its error's message).
    """
    try:
        snapshots.write(snapshots.Snapshot(prefix, snap.tensors))
    except tf.errors.OpError as e:
        raise OSError(f"{os.path.dirname(prefix)}: {e.message}") from e


def unpacked(blob: Any, scratch: str) -> str:
    """Returns the prefix of the checkpoint ``blob`` (a part's bytes) holds, its files written
    in ``scratch`` (a directory not there yet; restore_from removes it) and every tensor read.

    Raises:
      PartMisfit: ``blob`` is not a whole part, naming what is wrong.
      OSError: ``scratch`` cannot be written.
    """
    view = memoryview(blob)
    files, offset = _files(view), 0
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


def _files(view: memoryview) -> List[Tuple[str, int]]:
    """Returns the (name, length) of each file of the part ``view``, in the part's order.

    Raises:
      PartMisfit: ``view`` is not a whole part, naming what is wrong.
    """
    if len(view) < _TAIL or bytes(view[-len(MAGIC):]) != MAGIC:
        raise PartMisfit("not a TensorFlow part of mpi_resolver's node-local tier")
    size = int.from_bytes(view[-_TAIL:-len(MAGIC)], "little")
    at = len(view) - _TAIL - size  # the header's start, after the files
    if at < 0:
        raise PartMisfit(f"a part of {len(view)} bytes whose header says it has {size}")
    try:
        files = [(str(name), int(n)) for name, n in json.loads(bytes(view[at:at + size]))]
    except (ValueError, TypeError) as e:
        raise PartMisfit(f"a part whose header cannot be read ({e})") from e
    if at != sum(n for _, n in files):
        raise PartMisfit(f"a part of {len(view)} bytes where its header says "
                         f"{sum(n for _, n in files) + size + _TAIL}")
    return files


def restore_from(checkpoint: Any, prefix: str) -> None:
    """Restores ``checkpoint`` (a tf.train.Checkpoint) from the part ``unpacked`` put at
    ``prefix``, then removes the part's files."""
    try:
        checkpoint.restore(prefix).expect_partial()
    finally:
        shutil.rmtree(os.path.dirname(prefix), ignore_errors=True)
