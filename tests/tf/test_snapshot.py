"""The snapshot of a save in the background (tensorflow/snapshot) with the installed
TensorFlow: which tensors are copied into the kept host buffers and which are held, the
buffers reused from one save to the next, and the checkpoint written from them holding its
step's state while the training goes on writing its own variables."""

from __future__ import annotations

import pytest

from tests.tf.test_background_saves import slow_writes
from tests.tf.test_periodic import ckpts

pytestmark = pytest.mark.tf

MIB = 2 ** 20


@pytest.fixture(autouse=True)
def _fresh_context():
    """A fresh TensorFlow context after each test: this one's ops listed the process's
    devices, and a resolver made later in this process would refuse (tests/tf/conftest.py's
    slurm_config does the same)."""
    yield
    from tensorflow.python.eager import context

    context._reset_context()


def tensors():
    """The cases of ``copied``: (name, a tensor or value, copied)."""
    import numpy as np
    import tensorflow as tf

    return [
        ("1 MiB of float32", tf.zeros([MIB // 4]), True),
        ("one value less", tf.zeros([MIB // 4 - 1]), False),
        ("1 MiB of int8, 2-D", tf.zeros([1024, 1024], tf.int8), True),
        ("1 MiB of bfloat16", tf.zeros([MIB // 2], tf.bfloat16), True),
        ("half a MiB of float64 rows", tf.zeros([256, 256], tf.float64), False),
        ("a scalar", tf.constant(3, tf.int64), False),
        ("strings", tf.constant(["x" * 64] * (MIB // 64)), False),
        ("a NumPy array", np.zeros(MIB // 4, np.float32), False),
        ("a Python number", 3.0, False),
    ]


def test_which_tensors_are_copied() -> None:
    from mpi_resolver.tensorflow.snapshot import copied

    assert [(name, copied(t)) for name, t, _ in tensors()] == \
        [(name, want) for name, _, want in tensors()]


def test_a_buffer_is_kept_and_made_anew_for_another_shape_or_type() -> None:
    import numpy as np
    import tensorflow as tf

    from mpi_resolver.tensorflow.snapshot import HostBuffers

    buffers = HostBuffers()
    first = buffers.copy((1, "v"), tf.fill([MIB // 4], 2.0))
    again = buffers.copy((1, "v"), tf.fill([MIB // 4], 3.0))
    assert again._numpy().ctypes.data == first._numpy().ctypes.data and len(buffers) == 1
    assert float(again[0]) == 3.0 and float(again[-1]) == 3.0
    wider = buffers.copy((1, "v"), tf.fill([MIB // 2], 4.0))
    assert wider.shape == [MIB // 2] and float(wider[-1]) == 4.0
    typed = buffers.copy((1, "v"), tf.fill([MIB // 2], np.int32(5)))
    assert typed.dtype == tf.int32 and int(typed[0]) == 5
    assert buffers.copy((2, "v"), tf.fill([MIB // 2], 6))._numpy().ctypes.data != \
        typed._numpy().ctypes.data and len(buffers) == 2


def test_a_snapshot_copies_the_large_variable_and_holds_the_small_one() -> None:
    import tensorflow as tf

    from mpi_resolver.tensorflow.snapshot import HostBuffers, take

    large, small = tf.Variable(tf.fill([MIB // 4], 1.0)), tf.Variable(1.0)
    checkpoint = tf.train.Checkpoint(large=large, small=small)
    buffers = HostBuffers()
    snap = take(checkpoint, "unused", buffers)
    large.assign_add(tf.ones_like(large))  # the training's next write
    small.assign_add(1.0)
    held = [v for values in snap.tensors.values() for v in values.values()]
    assert sorted(float(tf.reshape(v, [-1])[0]) for v in held if v.dtype == tf.float32) == \
        [1.0, 1.0]  # the step's values, both
    assert float(large[0]) == 2.0 and float(small) == 2.0
    assert take(checkpoint, "unused").tensors and len(buffers) == 1  # none given: none used


def test_the_checkpoint_holds_its_step_while_the_training_writes_the_large_variable(
        slurm_config, tmp_path, monkeypatch) -> None:
    """Two saves in the background of a 4 MiB variable, each written while the training
    goes on: each checkpoint holds its own step's values, from the same kept buffer."""
    import tensorflow as tf

    started: list = []
    slow_writes(monkeypatch, 0.5, started)
    step = tf.Variable(0, dtype=tf.int64, trainable=False)
    weight = tf.Variable(tf.fill([MIB], 1.0))
    checkpoint = tf.train.Checkpoint(step=step, weight=weight)
    handler = slurm_config(checkpoint_every=4).handler(None, checkpoint, str(tmp_path))
    for _ in range(10):  # saves at steps 4 and 8
        handler.run(lambda: weight.assign_add(tf.ones_like(weight)))
        step.assign_add(1)
    handler._saver.settle()
    assert len(started) == 2 and ckpts(tmp_path) == ["ckpt-1", "ckpt-2"]
    for name, at in (("ckpt-1", 4), ("ckpt-2", 8)):
        reader = tf.train.load_checkpoint(str(tmp_path / "chief" / name))
        saved = reader.get_tensor("weight/.ATTRIBUTES/VARIABLE_VALUE")
        assert (saved.min(), saved.max()) == (1.0 + at, 1.0 + at), name
    assert float(weight[0]) == 11.0
    assert len(handler._saver.manager._buffers) == 1


@pytest.mark.parametrize("copy, kept", [(True, 1), (False, 0)])
def test_a_worker_that_writes_nothing_keeps_no_buffer(tmp_path, copy: bool, kept: int) -> None:
    import tensorflow as tf

    from mpi_resolver.tensorflow.checkpoints import KeepingManager

    checkpoint = tf.train.Checkpoint(weight=tf.Variable(tf.fill([MIB], 1.0)))
    manager = KeepingManager(checkpoint, str(tmp_path), 2, chief=copy, agree=lambda p: p)
    snap = manager.snapshot(copy=copy)
    assert snap.prefix.endswith("ckpt-1") and len(manager._buffers or []) == kept
