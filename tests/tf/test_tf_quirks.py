"""long_jobs.tf_quirks with the installed TensorFlow: no probe of Google's metadata server
while a handler is built, and total_run_calls' deprecation warning dropped."""

from __future__ import annotations

import logging

import pytest

pytestmark = pytest.mark.tf


def test_no_gce_probe_within_and_the_probe_back_after():
    from tensorflow.python.distribute.failure_handling import failure_handling_util

    from mpi_resolver.tensorflow.quirks import no_gce_probe

    probe = failure_handling_util.on_gcp
    with no_gce_probe():  # here Google's server does not answer anyway: the probe replaced
        assert failure_handling_util.on_gcp is not probe
        assert failure_handling_util.on_gcp() is False
    assert failure_handling_util.on_gcp is probe


@pytest.mark.parametrize("message, kept", [
    ("From x.py: PreemptionCheckpointHandler.total_run_calls (from tensorflow) is deprecated",
     False),
    ("Checkpoint saved", True),
])
def test_quiet_total_run_calls_drops_only_that_warning_with_one_filter(message, kept):
    import tensorflow as tf

    from mpi_resolver.tensorflow.quirks import quiet_total_run_calls

    log = tf.get_logger()
    quiet_total_run_calls()
    quiet_total_run_calls()  # each handler asks again: still one filter
    record = logging.LogRecord("tensorflow", logging.WARNING, __file__, 1, message, None, None)
    assert [type(f).__name__ for f in log.filters].count("_DropTotalRunCalls") == 1
    assert bool(log.filter(record)) is kept
