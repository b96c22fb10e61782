"""Fixtures for the tests that compare with the installed TensorFlow."""

from __future__ import annotations

import signal

import pytest

from mpi_resolver.core import logs as _logs


@pytest.fixture(scope="session")
def ours():
    """mpi_resolver's MPIClusterResolver class."""
    from mpi_resolver import MPIClusterResolver

    return MPIClusterResolver


@pytest.fixture
def slurm_config(monkeypatch):
    """SlurmTerminationConfig's class; every config made in the test has its handlers put back
    afterwards, last made first (SIGTERM must end this test process again, and a handler left
    at SIG_IGN would be named by an earlier test's watcher, still asked by TensorFlow's
    thread)."""
    from mpi_resolver import SlurmTerminationConfig
    from mpi_resolver.tensorflow import termination_config as tf_config

    made = []
    ended = []
    monkeypatch.setattr(tf_config, "end_with", lambda code, seconds: ended.append((code, seconds)))
    original = SlurmTerminationConfig.__init__

    def init(self, *args, **kwargs):
        original(self, *args, **kwargs)
        made.append(self)

    monkeypatch.setattr(SlurmTerminationConfig, "__init__", init)
    for name in ("SLURM_JOB_ID", "SLURM_RESTART_COUNT", "SLURM_PROCID"):
        monkeypatch.delenv(name, raising=False)
    _logs._logged.clear()
    before = {n: signal.getsignal(n) for n in (signal.SIGUSR1, signal.SIGUSR2, signal.SIGTERM)}
    SlurmTerminationConfig.ended = ended  # what _exit made the process end with, in order
    yield SlurmTerminationConfig
    del SlurmTerminationConfig.ended
    for config in reversed(made):  # the last made replaced the others': put back in turn
        config.watcher.uninstall()
    assert {n: signal.getsignal(n) for n in before} == before, "a test left a handler changed"
    _logs._logged.clear()
    # PreemptionCheckpointHandler lists this process's devices when it is built: a resolver
    # made after it in this process would find TensorFlow's devices listed already (an error
    # by design, tests/tf/test_early_cuda.py). A fresh context for the tests that follow.
    from tensorflow.python.eager import context

    context._reset_context()
