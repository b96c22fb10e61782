"""A TensorFlow checkpoint in two parts, for saves written in the background: ``take`` reads the
state's tensors at once, in the training's thread (the snapshot; a value that needs every
worker, a variable synchronized on read, is read here by every worker alike); ``write`` puts
them in the checkpoint's files later, from any thread, as tf.train.Checkpoint.write does (the
TensorFlow edge; importing this module imports TensorFlow).

TensorFlow's own asynchronous checkpoint (CheckpointOptions(enable_async=True)) does not fit:
PreemptionCheckpointHandler saves synchronously whatever the options say, and with Keras 3
on TensorFlow 2.21 every asynchronous save after the first fails ("tf.function only supports
singleton tf.Variables created on the first call", in its copy of the state to the CPU).

The snapshot of a tensor in host memory (1 MiB or more) is a copy into a buffer of
``HostBuffers``, kept from one save to the next: the training then goes on writing its own
buffer. Holding the tensor instead makes TensorFlow copy it at the training's next write of
the variable, into memory allocated afresh each time, whose page faults cost more than the
copy (1 GiB: 0.25 s against 0.10 s on this machine). A tensor on a GPU is held, not copied:
the copy TensorFlow makes at the next write is the device's own, and the write reads it to
the host in the background.

This uses TensorFlow's own serialization (the private ``_gather_serialized_tensors`` and
``MultiDeviceSaver``, alike in 2.15 and 2.21) so that the files are the ones ``save`` writes.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Dict, Optional, Tuple

import numpy as np
import tensorflow as tf
from tensorflow.python.checkpoint import functional_saver
from tensorflow.python.training.saving import saveable_object
from tensorflow.python.util import object_identity

__all__ = ["Snapshot", "HostBuffers", "copied", "unsupported", "take", "write"]

#: The size from which a tensor in host memory is copied into a buffer of HostBuffers.
HOST_COPY_LEAST = 2 ** 20


@dataclass(frozen=True)
class Snapshot:
    """A checkpoint's state read at one step: its files' ``prefix`` and its ``tensors``
    (TensorFlow's serialized tensors, every value read)."""

    prefix: str
    tensors: Any


def unsupported(checkpoint: Any) -> Optional[str]:
    """Returns why ``checkpoint`` (a tf.train.Checkpoint) cannot be saved in the background
    (this TensorFlow lacks the parts, or the state has savers of its own that read it only
    when the files are written), None where it can."""
    saver: Any = getattr(checkpoint, "_saver", None)
    if not hasattr(saver, "_gather_serialized_tensors"):
        return f"TensorFlow {tf.__version__} has no _gather_serialized_tensors"
    try:
        _, _, registered, _ = saver._gather_serialized_tensors(None)
    except Exception as e:  # noqa: BLE001 - a state TensorFlow's serialization refuses
        return f"its state cannot be read ahead ({type(e).__name__}: {e})"
    if registered:
        return "its state has savers of its own (registered savers)"
    return None


class HostBuffers:
    """Host memory for the snapshots' copies, one buffer per saved tensor, made at the first
    save and reused by the next ones (a save waits for the write before it, which reads
    them): a host copy of the state's large tensors, held for as long as the job runs."""

    def __init__(self) -> None:
        self._buffers: Dict[Tuple[int, str], Any] = {}

    def copy(self, key: Tuple[int, str], tensor: Any) -> Any:
        """Returns a copy of ``tensor`` (on the host, see copied) in the buffer of ``key``,
        made anew where ``tensor``'s shape or type is not that buffer's."""
        buffer = self._buffers.get(key)
        if buffer is None or buffer.shape != tensor.shape or buffer.dtype != tensor.dtype:
            with tf.device("CPU"):
                buffer = tf.raw_ops.Empty(shape=tensor.shape, dtype=tensor.dtype)
            self._buffers[key] = buffer
        np.copyto(buffer._numpy(), tensor._numpy())  # each one's memory, no copy of its own
        return buffer

    def __len__(self) -> int:
        return len(self._buffers)


def copied(tensor: Any) -> bool:
    """Returns whether a snapshot copies ``tensor`` (HostBuffers) rather than hold it: a
    tensor of numbers in host memory of HOST_COPY_LEAST bytes or more."""
    dtype = getattr(tensor, "dtype", None)
    if not isinstance(dtype, tf.dtypes.DType) or not hasattr(tensor, "_numpy"):
        return False
    if dtype in (tf.string, tf.resource, tf.variant) or not dtype.is_numpy_compatible:
        return False
    return "device:CPU" in tensor.device and \
        tensor.shape.num_elements() * dtype.size >= HOST_COPY_LEAST


def _read(value: Any, key: Tuple[int, str], buffers: Optional[HostBuffers]) -> Any:
    """Returns ``value`` read: a tensor for a SaveSpec (a callable TensorFlow reads at the
    write), the same for a tensor, copied into ``buffers`` where given and ``copied`` says
    so; each of a slice dict's values alike."""
    if isinstance(value, saveable_object.SaveSpec):
        value = value.tensor
    if isinstance(value, dict):
        return {k: _read(v, (key[0], f"{key[1]}/{k}"), buffers) for k, v in value.items()}
    if buffers is not None and copied(value):
        return buffers.copy(key, value)
    return value


def take(checkpoint: Any, prefix: str, buffers: Optional[HostBuffers] = None) -> Snapshot:
    """Returns ``checkpoint``'s state now, to be written at ``prefix``: its large host
    tensors copied into ``buffers`` where given (the writer's), else every tensor held."""
    serialized, _, _, _ = checkpoint._saver._gather_serialized_tensors(None)
    tensors = object_identity.ObjectIdentityDictionary()
    for trackable, values in serialized.items():
        tensors[trackable] = {key: _read(value, (id(trackable), key), buffers)
                              for key, value in values.items()}
    return Snapshot(prefix, tensors)


def write(snapshot: Snapshot) -> str:
    """Writes ``snapshot``'s files (TensorFlow's: a temporary part, then merged under the
    prefix) and returns its prefix."""
    tf.io.gfile.makedirs(os.path.dirname(snapshot.prefix) or ".")
    functional_saver.MultiDeviceSaver(snapshot.tensors).save(snapshot.prefix)
    return snapshot.prefix
