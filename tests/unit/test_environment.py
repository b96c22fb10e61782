"""_environment: every variable mpi_resolver reads, and the snapshot of them."""

from __future__ import annotations

import re

import pytest

pytestmark = pytest.mark.unit


def test_every_variable_the_package_reads_is_in_VARIABLES():
    """The resolver snapshots only launchers.VARIABLES: a variable read elsewhere would be
    seen by the command line but not by the resolver."""
    import pathlib

    from mpi_resolver._environment import VARIABLES

    source = "".join(p.read_text() for p in
                     pathlib.Path(__file__).resolve().parents[2].joinpath("mpi_resolver")
                     .glob("*.py"))
    names = set(re.findall(r'"((?:SLURMD?|OMPI|PMIX?|MPIR?|I_MPI|CUDA)_[A-Z_]+)"', source))
    names.discard("SLURM_VARS")  # the name of a table, not a variable
    assert names and names <= set(VARIABLES), sorted(names - set(VARIABLES))
