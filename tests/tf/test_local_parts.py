"""A TensorFlow worker's part of the node-local tier (tensorflow/local_parts) with the installed
TensorFlow: a snapshot packed as bytes and restored from them, every value back, nothing left
in the process's memory file system; bytes that are not a whole part refused, naming why."""

from __future__ import annotations

from typing import Any, Callable

import pytest

pytestmark = pytest.mark.tf

MIB = 2 ** 20


@pytest.fixture(autouse=True)
def _fresh_context():
    """A fresh TensorFlow context after each test (tests/tf/test_snapshot.py says why)."""
    yield
    from tensorflow.python.eager import context

    context._reset_context()


def state() -> Any:
    """Returns a checkpoint of 2 MiB of float32 (copied by the snapshot), a small int and an
    optimizer step count."""
    import tensorflow as tf

    big = tf.Variable(tf.range(MIB // 2, dtype=tf.float32))
    small = tf.Variable([1, 2, 3], dtype=tf.int64)
    return tf.train.Checkpoint(big=big, small=small, step=tf.Variable(7, dtype=tf.int64))


def part_of(checkpoint: Any) -> bytes:
    from mpi_resolver.tensorflow import snapshot
    from mpi_resolver.tensorflow.local_parts import packed

    return packed(snapshot.take(checkpoint, "unused", snapshot.HostBuffers()))


def ram_files() -> list:
    import tensorflow as tf

    return tf.io.gfile.glob("ram://mpi_resolver/local_part*")


@pytest.mark.parametrize("piece", [None, 4099, 1000])  # the module's; pieces that divide none
def test_a_part_restores_every_value_and_leaves_nothing_in_memory(
        piece: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each file is copied into the part in pieces: whole whatever their size."""
    import numpy as np

    from mpi_resolver.tensorflow import local_parts
    from mpi_resolver.tensorflow.local_parts import MAGIC, restore_from, unpacked

    if piece is not None:
        monkeypatch.setattr(local_parts, "_PIECE", piece)
    ckpt = state()
    blob = part_of(ckpt)
    assert blob.startswith(MAGIC) and len(blob) > MIB * 2
    assert ram_files() == []
    ckpt.big.assign(ckpt.big * 0)  # the training goes on
    ckpt.small.assign([0, 0, 0])
    ckpt.step.assign(99)
    prefix = unpacked(blob)
    assert prefix.startswith("ram://mpi_resolver/local_part") and ram_files() != []
    restore_from(ckpt, prefix)
    assert np.array_equal(ckpt.big.numpy(), np.arange(MIB // 2, dtype=np.float32))
    assert ckpt.small.numpy().tolist() == [1, 2, 3] and int(ckpt.step.numpy()) == 7
    assert ram_files() == []


def flipped(blob: bytes) -> bytes:
    """The part with its last data byte changed (the index's checksum then fails)."""
    return blob[:-1] + bytes([blob[-1] ^ 0xFF])


@pytest.mark.parametrize("spoil, says", [
    (lambda b: b"junk", "not a TensorFlow part of mpi_resolver's node-local tier"),
    (lambda b: b[:35], "not a TensorFlow part"),  # MAGIC and half the header's length
    (lambda b: b[:-1], "a part of {n} bytes where its header says {m}"),
    (lambda b: b + b"x", "a part of {n} bytes where its header says {m}"),
    (lambda b: b[:len(b"mpi_resolver tensorflow part 1\n") + 8] + b"{" + b[40:],
     "a part whose header cannot be read"),
    (flipped, "a part whose checkpoint cannot be read"),
])
def test_bytes_that_are_not_a_whole_part_are_refused(spoil: Callable[[bytes], bytes],
                                                     says: str) -> None:
    from mpi_resolver.tensorflow.local_parts import PartMisfit, unpacked

    blob = part_of(state())
    bad = spoil(blob)
    with pytest.raises(PartMisfit) as e:
        unpacked(bad)
    assert str(e.value).startswith(says.format(n=len(bad), m=len(blob))), str(e.value)
    assert ram_files() == []
