"""tensorflow/checkpoints.scratch_manager: a worker other than the chief takes part in every
collective save into its own memory (TensorFlow's ram:// file system), never into the shared
checkpoint directory (each worker's copy there was N times one checkpoint's traffic and
quota); the copy goes after each save."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

pytestmark = pytest.mark.tf


@pytest.fixture
def fresh_context():
    """A fresh TensorFlow context after the test: a variable lists this process's devices, and
    a resolver made after it in this process would find them listed (tests/tf/conftest.py's
    slurm_config does the same)."""
    yield
    from tensorflow.python.eager import context

    context._reset_context()


@pytest.mark.parametrize("task", [1, 3])
def test_a_worker_s_save_is_in_its_memory(tmp_path: Path, monkeypatch, task: int,
                                          fresh_context) -> None:
    import tensorflow as tf

    from mpi_resolver.tensorflow.checkpoints import scratch_manager

    monkeypatch.chdir(tmp_path)
    manager = scratch_manager(tf.train.Checkpoint(v=tf.Variable([1.0, 2.0])), task)
    assert manager.directory == f"ram://mpi_resolver/workertemp_{task}/chief"
    prefix = manager.save()
    assert prefix.startswith(f"ram://mpi_resolver/workertemp_{task}/chief/ckpt-")
    assert tf.io.gfile.exists(prefix + ".index")
    fresh = tf.Variable([0.0, 0.0])
    tf.train.Checkpoint(v=fresh).restore(prefix).assert_consumed()
    assert fresh.numpy().tolist() == [1.0, 2.0]
    assert os.listdir(tmp_path) == []  # nothing on disk
