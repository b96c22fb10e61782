"""_mpi_library: which MPI mpi4py loads and which srun --mpi plugin it speaks (read before
MPI_Init)."""

from __future__ import annotations

import pytest

from mpi_resolver.launch.mpi_library import MpiLibrary
from tests.unit.envs import IMPI, MPICH_TEXT, OMPI4, OMPI5

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("library, family, pmix, pmi2", [
    pytest.param(MpiLibrary(MPICH_TEXT), "mpich", False, True, id="MPICH without --with-pmix"),
    pytest.param(MpiLibrary(MPICH_TEXT.replace("--with-pm=", "--with-pmix --with-pm=")),
                 "mpich", True, True, id="MPICH configured --with-pmix"),
    pytest.param(MpiLibrary(OMPI4, frozenset({"ext3x", "flux", "isolated"})), "openmpi", True,
                 False, id="Debian's Open MPI 4: no s2 component"),
    pytest.param(MpiLibrary(OMPI4, frozenset({"ext3x", "s2"})), "openmpi", True, True,
                 id="Open MPI 4 with s2"),
    pytest.param(MpiLibrary(OMPI4), "openmpi", True, None, id="Open MPI 4, components unknown"),
    pytest.param(MpiLibrary(OMPI5, frozenset({"s2"})), "openmpi", True, False,
                 id="Open MPI 5 never speaks PMI-2"),
    pytest.param(MpiLibrary(IMPI), "intel", True, True, id="Intel MPI speaks both"),
    pytest.param(MpiLibrary("MVAPICH2 Version: 2.3.7\n"), "mvapich", None, True, id="MVAPICH"),
    pytest.param(MpiLibrary("Some MPI 1.0"), None, None, None, id="unknown: cannot tell"),
])
def test_mpi_library_family_and_plugins(library, family, pmix, pmi2):
    assert library.family == family
    assert library.speaks("pmix") is pmix and library.speaks("pmi2") is pmi2


def test_open_mpi_text_without_a_version_cannot_tell_pmi2():
    """An Open MPI whose text has no 'Open MPI v<major>': PMI-2 depends on its components."""
    assert MpiLibrary("Open MPI (site build)").speaks("pmi2") is None
    assert MpiLibrary("Open MPI (site build)", frozenset({"s2"})).speaks("pmi2") is True


@pytest.mark.parametrize("version, components, pmi2", [
    pytest.param("Open MPI v4.1.4, package: Debian", frozenset({"s2"}), True, id="4 with s2"),
    pytest.param("Open MPI v4.1.4, package: Debian", frozenset({"ext3x"}), False,
                 id="4 without s2"),
    pytest.param("Open MPI v5.0.8, package: Open MPI", frozenset({"s2"}), False,
                 id="5: no PMI-2 at all"),
    pytest.param("Open MPI v10.0.0, package: Open MPI", frozenset({"s2"}), False,
                 id="10 is later than 5"),
    pytest.param("Open MPI v3.1.6, package: Open MPI", frozenset({"s2"}), True, id="3 with s2"),
    pytest.param("  Open MPI v5.0.8", frozenset({"s2"}), False, id="blanks before the name"),
    pytest.param("Open MPI vX.1, package", frozenset({"s2"}), True, id="unreadable version"),
])
def test_open_mpi_speaks_pmi2_before_version_5_with_its_s2_component(version, components,
                                                                      pmi2):
    assert MpiLibrary(version, components).speaks("pmi2") is pmi2
