"""Fixtures for the tests that compare with the installed TensorFlow."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def ours():
    """mpi_resolver's MPIClusterResolver class."""
    from mpi_resolver import MPIClusterResolver

    return MPIClusterResolver
