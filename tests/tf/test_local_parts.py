"""A TensorFlow worker's part of the node-local tier (tensorflow/local_parts) with the installed
TensorFlow: a snapshot packed as a file (TensorFlow's data file renamed, the rest after it)
and restored from its bytes, every value back, no scratch left; bytes that are not a whole
part refused, naming why; a scratch that cannot be written, no files written, and a part that
cannot be finished, an OSError naming it, nothing left."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Callable, Tuple

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


def part_of(checkpoint: Any, scratch: Path) -> Path:
    """Returns the file of ``checkpoint``'s part, packed in ``scratch``."""
    from mpi_resolver.tensorflow import snapshot
    from mpi_resolver.tensorflow.local_parts import packed

    return Path(packed(snapshot.take(checkpoint, "unused", snapshot.HostBuffers()),
                       str(scratch)).path)


def header(blob: bytes) -> Tuple[int, list]:
    """Returns where the part's header starts and what it says."""
    from mpi_resolver.tensorflow.local_parts import MAGIC

    size = int.from_bytes(blob[-len(MAGIC) - 8:-len(MAGIC)], "little")
    at = len(blob) - len(MAGIC) - 8 - size
    return at, json.loads(blob[at:at + size])


def test_a_part_restores_every_value_and_leaves_no_scratch(tmp_path: Path) -> None:
    """The part is the data file renamed, the index and the header after it."""
    import numpy as np

    from mpi_resolver.tensorflow.local_parts import MAGIC, restore_from, unpacked

    ckpt = state()
    part = part_of(ckpt, tmp_path / "pack")
    assert part == tmp_path / "pack.part" and os.listdir(tmp_path) == ["pack.part"]
    blob = part.read_bytes()
    at, files = header(blob)
    assert blob.endswith(MAGIC) and [n for n, _ in files] == ["ckpt.data-00000-of-00001",
                                                             "ckpt.index"]
    assert files[0][1] > MIB * 2 and at == files[0][1] + files[1][1]
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
    assert os.listdir(tmp_path) == ["pack.part"]


def test_a_scratch_that_cannot_be_written_is_an_os_error_naming_it(tmp_path: Path) -> None:
    from mpi_resolver.tensorflow.local_parts import unpacked

    (tmp_path / "file").write_text("")
    with pytest.raises(OSError) as e:
        part_of(state(), tmp_path / "file" / "pack")
    assert str(tmp_path / "file" / "pack") in str(e.value)
    blob = part_of(state(), tmp_path / "pack").read_bytes()
    with pytest.raises(OSError):
        unpacked(blob, str(tmp_path / "file" / "unpack"))
    assert sorted(os.listdir(tmp_path)) == ["file", "pack.part"]


def test_no_files_written_and_a_part_not_finished_leave_nothing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from mpi_resolver.tensorflow import local_parts

    real = local_parts._write
    monkeypatch.setattr(local_parts, "_write", lambda snap, prefix: os.makedirs(
        os.path.dirname(prefix)))
    with pytest.raises(OSError) as e:
        part_of(state(), tmp_path / "pack")
    assert str(e.value) == f"{tmp_path / 'pack'}: TensorFlow wrote no checkpoint files there"
    assert os.listdir(tmp_path) == []
    monkeypatch.setattr(local_parts, "_write", real)

    def full(*_: Any) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(local_parts.shutil, "copyfileobj", full)
    with pytest.raises(OSError, match="No space left"):
        part_of(state(), tmp_path / "pack")
    assert os.listdir(tmp_path) == []


def flipped(blob: bytes) -> bytes:
    """The part with a byte of its data changed (the index's checksum then fails)."""
    return blob[:100] + bytes([blob[100] ^ 0xFF]) + blob[101:]


def spoiled_header(blob: bytes) -> bytes:
    """The part with its header's first byte changed."""
    at, _ = header(blob)
    return blob[:at] + b"{" + blob[at + 1:]


def crafted(said: bytes) -> bytes:
    """A part of no files whose header is ``said``."""
    from mpi_resolver.tensorflow.local_parts import MAGIC

    return said + len(said).to_bytes(8, "little") + MAGIC


@pytest.mark.parametrize("spoil, says", [
    (lambda b: b"junk", "not a TensorFlow part of mpi_resolver's node-local tier"),
    (lambda b: b[:-1], "not a TensorFlow part"),  # cut short at its end
    (lambda b: b + b"x", "not a TensorFlow part"),
    (lambda b: b[-39:], "a part of 39 bytes whose header says it has "),  # the tail alone
    (lambda b: b[-40:], "a part of 40 bytes whose header says it has "),
    (lambda b: b[1:], "a part of {n} bytes where its header says {m}"),  # cut at its start
    (lambda b: b"x" + b, "a part of {n} bytes where its header says {m}"),
    (spoiled_header, "a part whose header cannot be read"),
    (lambda b: crafted(b"[1]"), "a part whose header cannot be read"),
    (lambda b: crafted(b'[["a", "b"]]'), "a part whose header cannot be read"),
    (flipped, "a part whose checkpoint cannot be read"),
])
def test_bytes_that_are_not_a_whole_part_are_refused(spoil: Callable[[bytes], bytes],
                                                     says: str, tmp_path: Path) -> None:
    from mpi_resolver.tensorflow.local_parts import PartMisfit, unpacked

    blob = part_of(state(), tmp_path / "pack").read_bytes()
    bad = spoil(blob)
    with pytest.raises(PartMisfit) as e:
        unpacked(bad, str(tmp_path / "unpack"))
    assert str(e.value).startswith(says.format(n=len(bad), m=len(blob))), str(e.value)
    assert os.listdir(tmp_path) == ["pack.part"]


def test_a_part_of_no_files_is_read_as_one(tmp_path: Path) -> None:
    """The header's sizes and the bytes agree at 0 too: TensorFlow then finds no checkpoint."""
    from mpi_resolver.tensorflow.local_parts import PartMisfit, unpacked

    with pytest.raises(PartMisfit, match="a part whose checkpoint cannot be read"):
        unpacked(crafted(b"[]"), str(tmp_path / "unpack"))
    assert os.listdir(tmp_path) == []
