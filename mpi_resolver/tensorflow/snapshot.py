"""A TensorFlow checkpoint in two parts, for saves written in the background: ``take`` reads
the state's tensors at once, in the training's thread (the snapshot: a variable read shares
its buffer, and TensorFlow copies it only when the training next writes the variable; a
value that needs every worker, a variable synchronized on read, is read here by every worker
alike); ``write`` puts them in the checkpoint's files later, from any thread, as
tf.train.Checkpoint.write does (the TensorFlow edge; importing this module imports
TensorFlow).

TensorFlow's own asynchronous checkpoint (CheckpointOptions(enable_async=True)) does not fit:
PreemptionCheckpointHandler saves synchronously whatever the options say, and with Keras 3
on TensorFlow 2.21 every asynchronous save after the first fails ("tf.function only supports
singleton tf.Variables created on the first call", in its copy of the state to the CPU).
This uses TensorFlow's own serialization (the private ``_gather_serialized_tensors`` and
``MultiDeviceSaver``, alike in 2.15 and 2.21) so that the files are the ones ``save`` writes.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Optional

import tensorflow as tf
from tensorflow.python.checkpoint import functional_saver
from tensorflow.python.training.saving import saveable_object
from tensorflow.python.util import object_identity

__all__ = ["Snapshot", "unsupported", "take", "write"]


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


def _read(value: Any) -> Any:
    """Returns ``value`` read: a tensor for a SaveSpec (a callable TensorFlow reads at the
    write), the same for a tensor; each of a slice dict's values alike."""
    if isinstance(value, saveable_object.SaveSpec):
        return value.tensor
    if isinstance(value, dict):
        return {key: _read(v) for key, v in value.items()}
    return value


def take(checkpoint: Any, prefix: str) -> Snapshot:
    """Returns ``checkpoint``'s state now, to be written at ``prefix``."""
    serialized, _, _, _ = checkpoint._saver._gather_serialized_tensors(None)
    tensors = object_identity.ObjectIdentityDictionary()
    for trackable, values in serialized.items():
        tensors[trackable] = {key: _read(value) for key, value in values.items()}
    return Snapshot(prefix, tensors)


def write(snapshot: Snapshot) -> str:
    """Writes ``snapshot``'s files (TensorFlow's: a temporary part, then merged under the
    prefix) and returns its prefix."""
    tf.io.gfile.makedirs(os.path.dirname(snapshot.prefix) or ".")
    functional_saver.MultiDeviceSaver(snapshot.tensors).save(snapshot.prefix)
    return snapshot.prefix
