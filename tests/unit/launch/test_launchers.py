"""Launcher detection and Slurm's step variables, from plain dicts that stand in for os.environ."""

from __future__ import annotations

import pytest

from mpi_resolver.core.errors import MismatchError, ResolutionError
from mpi_resolver.launch.launchers import (BY_NAME, check_pairing, detect_launch, is_mpirun,
                                           srun_advice)
from mpi_resolver.launch.mpi_library import MpiLibrary
from tests.unit.envs import (
    MPICH_TEXT,
    OMPI4,
    HYDRA,
    MVAPICH,
    OPEN_MPI,
    SALLOC_DAEMON,
    SLURM_TASK,
    SRUN_NONE,
    SRUN_PMI2,
    SRUN_PMIX,
)
from tests.unit.jobs import run_world

pytestmark = pytest.mark.unit


# --------------------------------------------------------------------------------------------
# detect_launch
# --------------------------------------------------------------------------------------------

def seen(launch):
    """(launcher name, rank, local rank) of a Launch."""
    return launch.name, launch.rank, launch.local_rank


@pytest.mark.parametrize("env, expected", [
    pytest.param(OPEN_MPI, ("openmpi", 3, 1),
                 id="Open MPI's mpirun is recognised by OMPI_COMM_WORLD_*"),
    pytest.param({**OPEN_MPI, "PMIX_RANK": "3"}, ("openmpi", 3, 1),
                 id="Open MPI 5's mpirun also sets PMIX_RANK and is still openmpi"),
    pytest.param({**SALLOC_DAEMON, **OPEN_MPI}, ("openmpi", 3, 1),
                 id="Open MPI inside an allocation reads OMPI's rank, not SLURM_PROCID"),
    pytest.param(HYDRA, ("hydra", 2, 0),
                 id="Hydra (MPICH, Intel MPI) is recognised by PMI_RANK and MPI_LOCALRANKID"),
    pytest.param({**SALLOC_DAEMON, **HYDRA}, ("hydra", 2, 0),
                 id="Hydra inside an allocation is still hydra"),
    pytest.param(SRUN_PMIX, ("pmix", 2, 2),
                 id="srun --mpi=pmix gives PMIX_RANK and SLURM_LOCALID"),
    pytest.param(SRUN_PMI2, ("pmi2", 2, 2),
                 id="srun --mpi=pmi2 gives PMI_RANK, PMI_SIZE and SLURM_LOCALID"),
    pytest.param(SRUN_NONE, (None, None, None),
                 id="srun --mpi=none gives no launcher"),
    pytest.param({}, (None, None, None), id="an empty environment is no launcher"),
    pytest.param(MVAPICH, ("mvapich", 5, 1), id="MVAPICH's mpirun_rsh"),
    pytest.param({"PMI_ID": "3", "PMI_SIZE": "4", "MPI_LOCALRANKID": "1"},
                 ("hydra", 3, 1), id="older Hydra's PMI_ID with MPI_LOCALRANKID"),
    pytest.param({**SLURM_TASK, "PMI_ID": "2"}, ("pmi2", 2, 2),
                 id="PMI_ID under srun: PMI wired by Slurm"),
    pytest.param({"OMPI_COMM_WORLD_RANK": "x", "OMPI_COMM_WORLD_SIZE": "",
                  "OMPI_COMM_WORLD_LOCAL_RANK": "-1"},
                 ("openmpi", None, None),
                 id="unreadable numbers become None instead of failing detection"),
    pytest.param({"PMIX_RANK": " 5 "}, ("pmix", 5, None),
                 id="spaces around a number are ignored"),
])
def test_detect_launch(env, expected):
    assert seen(detect_launch(env)) == expected


@pytest.mark.parametrize("env, wired", [
    pytest.param(OPEN_MPI, True, id="Open MPI is wired"),
    pytest.param(HYDRA, True, id="Hydra is wired"),
    pytest.param(SRUN_PMIX, True, id="srun pmix is wired"),
    pytest.param(SRUN_PMI2, True, id="srun pmi2 is wired"),
    pytest.param(SRUN_NONE, False, id="srun none is not wired"),
    pytest.param({}, False, id="a plain process is not wired"),
])
def test_wired_says_whether_mpi_can_connect(env, wired):
    assert detect_launch(env).wired is wired


@pytest.mark.parametrize("env, expected", [
    pytest.param({"OMPI_COMM_WORLD_RANK": "²", "OMPI_COMM_WORLD_LOCAL_RANK": "1"},
                 ("openmpi", None, 1), id="a superscript two as Open MPI's rank"),
    pytest.param({"PMIX_RANK": "0", "SLURM_LOCALID": "²"}, ("pmix", 0, None),
                 id="a superscript two as SLURM_LOCALID"),
])
def test_detect_launch_treats_non_decimal_digits_as_unreadable(env, expected):
    assert seen(detect_launch(env)) == expected


# --------------------------------------------------------------------------------------------
# slurm_describes_ranks
# --------------------------------------------------------------------------------------------


# --------------------------------------------------------------------------------------------
# SlurmStep accessors
# --------------------------------------------------------------------------------------------


# --------------------------------------------------------------------------------------------
# SlurmStep.digest
# --------------------------------------------------------------------------------------------


# --------------------------------------------------------------------------------------------
# The batch step of an sbatch job (the script itself, measured: no SLURM_STEP_* variables)
# --------------------------------------------------------------------------------------------


# --------------------------------------------------------------------------------------------
# Advice that fits the MPI in use: PMIx for Open MPI, PMI-2 for MPICH, Intel MPI, MVAPICH
# --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("launcher, advice", [
    pytest.param("pmix", "`srun --mpi=pmix`", id="srun --mpi=pmix"),
    pytest.param("openmpi", "`srun --mpi=pmix`", id="Open MPI's mpirun"),
    pytest.param("pmi2", "`srun --mpi=pmi2`", id="srun --mpi=pmi2 (MPICH, Intel MPI)"),
    pytest.param("hydra", "`srun --mpi=pmi2`", id="MPICH's or Intel MPI's mpiexec"),
    pytest.param("mvapich", "`srun --mpi=pmi2`", id="MVAPICH's mpirun_rsh"),
    pytest.param(None, "`srun --mpi=pmix` (Open MPI; `srun --mpi=pmi2` for MPICH, Intel MPI, "
                       "MVAPICH)", id="unknown: both"),
])
def test_srun_advice(launcher, advice):
    assert srun_advice(launcher) == advice


@pytest.mark.parametrize("env_of, says, never", [
    pytest.param(lambda r: {**SLURM_TASK, "SLURM_PROCID": str(3 - r), "PMI_RANK": str(r),
                            "PMI_SIZE": "4"},
                 "`srun --mpi=pmi2`", "--mpi=pmix", id="MPICH under srun --mpi=pmi2, renumbered"),
    pytest.param(lambda r: {**SALLOC_DAEMON, "PMI_RANK": str(r), "PMI_SIZE": "4",
                            "MPI_LOCALRANKID": str(r % 2)},
                 "`srun --mpi=pmi2` instead of mpirun/mpiexec", "--mpi=pmix",
                 id="MPICH's mpiexec inside salloc"),
    pytest.param(lambda r: {**SLURM_TASK, "SLURM_PROCID": str(3 - r), "PMIX_RANK": str(r)},
                 "`srun --mpi=pmix`", "--mpi=pmi2", id="Open MPI under srun --mpi=pmix"),
])
def test_mismatch_advice_names_the_srun_plugin_of_the_mpi_in_use(env_of, says, never):
    envs = [env_of(r) for r in range(4)]
    results = run_world(envs, ["n1", "n1", "n1", "n2"], verify=True, gpus_per_node=0)
    for result in results:  # every rank raises, with the same advice
        assert isinstance(result, MismatchError), result
        cause = str(result).split("Likely cause:", 1)[1]
        assert says in cause and never not in cause, cause


# --------------------------------------------------------------------------------------------
# Which srun --mpi plugin the MPI mpi4py loads can speak (read before MPI_Init)
# --------------------------------------------------------------------------------------------




# --------------------------------------------------------------------------------------------
# a launcher's own variables; which launchers are mpiruns; plugin and library
# --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name, env, expected", [
    pytest.param("hydra", {"PMI_ID": "4", "MPI_LOCALRANKID": "1"}, (4, 1),
                 id="older Hydra's PMI_ID"),
    pytest.param("hydra", {"PMI_RANK": "2", "PMI_ID": "4"}, (2, None),
                 id="PMI_RANK before PMI_ID"),
    pytest.param("pmix", {"SLURM_LOCALID": "3"}, (None, 3), id="no rank variable"),
    pytest.param("pmix", {"PMIX_RANK": "x"}, (None, None), id="an unreadable rank"),
])
def test_a_launcher_reads_its_own_variables(name, env, expected):
    launch = BY_NAME[name].read(env)
    assert (launch.rank, launch.local_rank) == expected


@pytest.mark.parametrize("name, mpirun", [
    ("openmpi", True), ("mvapich", True), ("hydra", True), ("pmix", False), ("pmi2", False),
    (None, False), ("", False), ("slurm", False)])
def test_is_mpirun(name, mpirun):
    assert is_mpirun(name) is mpirun


@pytest.mark.parametrize("env, library, says", [
    pytest.param(SRUN_PMIX, MpiLibrary(MPICH_TEXT),
                 "this task was started by srun --mpi=pmix (PMIX_RANK is set), but mpi4py uses "
                 "MPICH Version: 5.0.2, which cannot use PMIx: MPI_Init would abort. Launch with "
                 "`srun --mpi=pmi2`", id="MPICH under pmix"),
    pytest.param(SRUN_PMI2, MpiLibrary(OMPI4, frozenset({"ext3x"})),
                 "this task was started by srun --mpi=pmi2 (PMI_RANK is set), but mpi4py uses "
                 "Open MPI v4.1.4, which cannot use PMI-2: MPI_Init would abort. Launch with "
                 "`srun --mpi=pmix`", id="Open MPI under pmi2"),
])
def test_check_pairing_refuses_a_plugin_the_library_cannot_speak(env, library, says):
    with pytest.raises(ResolutionError) as excinfo:
        check_pairing(detect_launch(env), library)
    assert str(excinfo.value).startswith(says), str(excinfo.value)


@pytest.mark.parametrize("env, library", [
    pytest.param(SRUN_PMIX, MpiLibrary(OMPI4, frozenset({"ext3x"})), id="Open MPI, pmix"),
    pytest.param(SRUN_PMI2, MpiLibrary(MPICH_TEXT), id="MPICH, pmi2"),
    pytest.param(SRUN_PMIX, None, id="library unknown"),
    pytest.param(OPEN_MPI, MpiLibrary(MPICH_TEXT), id="not an srun plugin"),
])
def test_check_pairing_accepts_what_can_work(env, library):
    assert check_pairing(detect_launch(env), library) is None
