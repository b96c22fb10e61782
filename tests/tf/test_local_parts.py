"""A TensorFlow worker's part of the node-local tier (tensorflow/local_parts) with the installed
TensorFlow: a snapshot packed as bytes (in a scratch directory) and restored from them, every
value back, no scratch left; bytes that are not a whole part refused, naming why; a scratch
that cannot be written, and a file that changes while read, an OSError naming it."""

from __future__ import annotations

import os
from pathlib import Path
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


def part_of(checkpoint: Any, scratch: Path) -> bytes:
    from mpi_resolver.tensorflow import snapshot
    from mpi_resolver.tensorflow.local_parts import packed

    return packed(snapshot.take(checkpoint, "unused", snapshot.HostBuffers()), str(scratch))


def test_a_part_restores_every_value_and_leaves_no_scratch(tmp_path: Path) -> None:
    import numpy as np

    from mpi_resolver.tensorflow.local_parts import MAGIC, restore_from, unpacked

    ckpt = state()
    blob = part_of(ckpt, tmp_path / "pack")
    assert blob.startswith(MAGIC) and len(blob) > MIB * 2
    assert os.listdir(tmp_path) == []
    ckpt.big.assign(ckpt.big * 0)  # the training goes on
    ckpt.small.assign([0, 0, 0])
    ckpt.step.assign(99)
    prefix = unpacked(blob, str(tmp_path / "unpack"))
    assert prefix == str(tmp_path / "unpack" / "ckpt")
    assert sorted(os.listdir(tmp_path / "unpack")) == ["ckpt.data-00000-of-00001",
                                                       "ckpt.index"]
    restore_from(ckpt, prefix)
    assert np.array_equal(ckpt.big.numpy(), np.arange(MIB // 2, dtype=np.float32))
    assert ckpt.small.numpy().tolist() == [1, 2, 3] and int(ckpt.step.numpy()) == 7
    assert os.listdir(tmp_path) == []


def test_a_scratch_that_cannot_be_written_is_an_os_error_naming_it(tmp_path: Path) -> None:
    from mpi_resolver.tensorflow.local_parts import unpacked

    (tmp_path / "file").write_text("")
    with pytest.raises(OSError) as e:
        part_of(state(), tmp_path / "file" / "pack")
    assert str(tmp_path / "file" / "pack") in str(e.value)
    blob = part_of(state(), tmp_path / "pack")
    with pytest.raises(OSError):
        unpacked(blob, str(tmp_path / "file" / "unpack"))
    assert sorted(os.listdir(tmp_path)) == ["file"]


@pytest.mark.parametrize("grown", [-1, 1])
def test_a_file_that_changes_while_read_is_an_os_error(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, grown: int) -> None:
    """A file shorter or longer than it was when the part was sized."""
    from mpi_resolver.tensorflow import local_parts

    real = os.path.getsize
    monkeypatch.setattr(local_parts.os.path, "getsize", lambda p: real(p) + grown)
    with pytest.raises(OSError) as e:
        part_of(state(), tmp_path / "pack")
    assert "changed while it was read into the part" in str(e.value)
    assert os.listdir(tmp_path) == []


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
                                                     says: str, tmp_path: Path) -> None:
    from mpi_resolver.tensorflow.local_parts import PartMisfit, unpacked

    blob = part_of(state(), tmp_path / "pack")
    bad = spoil(blob)
    with pytest.raises(PartMisfit) as e:
        unpacked(bad, str(tmp_path / "unpack"))
    assert str(e.value).startswith(says.format(n=len(bad), m=len(blob))), str(e.value)
    assert os.listdir(tmp_path) == []
