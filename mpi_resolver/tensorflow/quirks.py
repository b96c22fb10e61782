"""TensorFlow's quirks that SlurmTerminationConfig works around, each in one place: the
probe of Google's metadata server when a PreemptionCheckpointHandler is built, and the
deprecation warning its own save causes (the TensorFlow edge; importing this module imports
TensorFlow). Its teardown after the save, which may outlast Slurm's KillWait, is cut short
for every framework alike: process_end."""

from __future__ import annotations

import contextlib
import logging
from typing import Iterator

import tensorflow as tf
from tensorflow.python.distribute.failure_handling import failure_handling_util

__all__ = ["no_gce_probe", "quiet_total_run_calls"]


@contextlib.contextmanager
def no_gce_probe() -> Iterator[None]:
    """Within: TensorFlow does not ask Google's metadata server whether this is Google Cloud
    (PreemptionCheckpointHandler does when it is built: up to 5 s, through any proxy set)."""
    probe = failure_handling_util.on_gcp
    failure_handling_util.on_gcp = lambda: False
    try:
        yield
    finally:
        failure_handling_util.on_gcp = probe


class _DropTotalRunCalls(logging.Filter):
    """Drops TensorFlow's deprecation warning for total_run_calls, which its own save reads
    (the step is in the checkpoint's own variable)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "total_run_calls" not in record.getMessage()


def quiet_total_run_calls() -> None:
    """Adds the filter of total_run_calls' warning to TensorFlow's logger, once."""
    log = tf.get_logger()
    if not any(isinstance(f, _DropTotalRunCalls) for f in log.filters):
        log.addFilter(_DropTotalRunCalls())
