"""_environment: every variable mpi_resolver reads, and the snapshot of them."""

from __future__ import annotations

import re

import pytest

pytestmark = pytest.mark.unit


def test_every_variable_the_package_reads_is_in_VARIABLES():
    """The resolver snapshots only launchers.VARIABLES: a variable read elsewhere would be
    seen by the command line but not by the resolver."""
    import pathlib

    from mpi_resolver.resolve.environment import VARIABLES

    package = pathlib.Path(__file__).resolve().parents[3].joinpath("mpi_resolver")
    # Every module but the long jobs' (long_jobs/ and its edges read the job's id and restart
    # count for the requeue, never for a resolution).
    source = "".join(p.read_text() for p in package.rglob("*.py")
                     if not {"long_jobs", "tensorflow"} & set(p.relative_to(package).parts))
    names = set(re.findall(r'"((?:SLURMD?|OMPI|PMIX?|MPIR?|I_MPI|CUDA)_[A-Z_]+)"', source))
    names.discard("SLURM_VARS")  # the name of a table, not a variable
    assert names and names <= set(VARIABLES), sorted(names - set(VARIABLES))


def test_snapshot_holds_the_variables_read_and_nothing_else():
    from mpi_resolver.resolve.environment import VARIABLES, snapshot

    environ = {"SLURM_PROCID": "3", "PMIX_RANK": "3", "CUDA_VISIBLE_DEVICES": "",
               "HOME": "/root", "SLURM_CONF": "/etc/slurm/slurm.conf", "I_MPI_PMI_LIBRARY": "x"}
    assert snapshot(environ) == {"SLURM_PROCID": "3", "PMIX_RANK": "3",
                                 "CUDA_VISIBLE_DEVICES": "", "I_MPI_PMI_LIBRARY": "x"}
    assert len(VARIABLES) == len(set(VARIABLES))  # each once
    assert "SLURM_LOCALID" in VARIABLES and "MPI_LOCALRANKID" in VARIABLES  # from the launchers


def test_snapshot_reads_this_process_s_environment_by_default(monkeypatch):
    from mpi_resolver.resolve.environment import snapshot

    monkeypatch.setenv("SLURM_PROCID", "5")
    monkeypatch.delenv("PMIX_RANK", raising=False)
    assert snapshot()["SLURM_PROCID"] == "5" and "PMIX_RANK" not in snapshot()
