"""_plan: which sources a resolution reads, decided before MPI starts."""

from __future__ import annotations

import pytest

from mpi_resolver.core.errors import ResolutionError
from mpi_resolver.launch.mpi_library import MpiLibrary
from mpi_resolver.options import make_options
from mpi_resolver.resolve.plan import make_plan
from mpi_resolver.resolve.resolution import resolve_job
from tests.unit.envs import (BATCH, BLOCK, HYDRA, IMPI, MPICH_TEXT, OMPI4, SALLOC_DAEMON,
                             SRUN_NONE, SRUN_PMI2, SRUN_PMIX)
from tests.unit.jobs import srun_env

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("env", [
    pytest.param(BATCH, id="sbatch -N2 --ntasks-per-node=2, python without srun"),
    pytest.param(dict(BATCH, SLURMD_NODENAME=""), id="no node name either"),
])
def test_batch_step_of_several_tasks_is_a_clear_error(env):
    for source in ("auto", "slurm"):
        with pytest.raises(ResolutionError) as excinfo:
            make_plan(make_options(source=source), env)
        text = str(excinfo.value)
        assert "batch step of Slurm job 7" in text and "SLURM_NTASKS=4" in text
        assert "srun --mpi=pmix python train.py" in text and "--mpi=pmi2" in text


@pytest.mark.parametrize("ntasks", [pytest.param("1", id="SLURM_NTASKS=1"),
                                    pytest.param(None, id="SLURM_NTASKS unset")])
def test_batch_step_of_one_task_resolves_as_one_task_with_a_note(ntasks):
    env = {k: v for k, v in BATCH.items() if k != "SLURM_NTASKS"}
    if ntasks:
        env["SLURM_NTASKS"] = ntasks
    opts = make_options(gpus_per_node=0)
    res = resolve_job(opts, env)
    assert res.cluster() == {"worker": ["node1:8888"]} and res.task == ("worker", 0)
    assert res.notes == ["the batch step of Slurm job 7 (python without srun): resolved as "
                         "one task on node1; start more with srun."]


def test_unwired_slurm_step_advice_names_both_plugins():
    plan = make_plan(make_options(), SRUN_NONE)
    assert any("`srun --mpi=pmix` (Open MPI; `srun --mpi=pmi2` for MPICH" in n
               for n in plan.notes)
    with pytest.raises(ResolutionError, match="--mpi=pmi2` for MPICH"):
        make_plan(make_options(verify=True), SRUN_NONE)


@pytest.mark.parametrize("env, library, says", [
    pytest.param(SRUN_PMIX, MpiLibrary(MPICH_TEXT), "`srun --mpi=pmi2`",
                 id="MPICH under srun --mpi=pmix"),
    pytest.param(SRUN_PMI2, MpiLibrary(OMPI4, frozenset({"ext3x"})), "`srun --mpi=pmix`",
                 id="Debian's Open MPI under srun --mpi=pmi2"),
])
def test_a_plugin_the_mpi_cannot_speak_is_refused_before_mpi_init(env, library, says):
    with pytest.raises(ResolutionError) as excinfo:
        make_plan(make_options(), env, library=lambda: library)
    text = str(excinfo.value)
    assert says in text and library.name in text and "MPI_Init would abort" in text
    assert text.count("`srun --mpi=") == 1, text


@pytest.mark.parametrize("env, library", [
    pytest.param(SRUN_PMIX, MpiLibrary(OMPI4, frozenset({"ext3x"})), id="Open MPI under pmix"),
    pytest.param(SRUN_PMI2, MpiLibrary(MPICH_TEXT), id="MPICH under pmi2"),
    pytest.param(SRUN_PMIX, MpiLibrary(IMPI), id="Intel MPI under pmix"),
    pytest.param(SRUN_PMI2, None, id="no mpi4py: nothing to tell"),
    pytest.param(SRUN_PMI2, MpiLibrary(OMPI4), id="Open MPI 4, components unknown"),
])
def test_fitting_or_unknown_pairings_pass(env, library):
    assert make_plan(make_options(), env, library=lambda: library).verify


def test_source_slurm_never_looks_at_the_mpi_library():
    def library():
        raise AssertionError("source='slurm' must not load mpi4py's library")

    assert not make_plan(make_options(source="slurm"), SRUN_PMIX, library=library).use_mpi


@pytest.mark.parametrize("library, advice", [
    pytest.param(MpiLibrary(MPICH_TEXT), "`srun --mpi=pmi2`", id="MPICH: pmi2 only"),
    pytest.param(MpiLibrary(OMPI4), "`srun --mpi=pmix`", id="Open MPI: pmix only"),
    pytest.param(None, "`srun --mpi=pmix` (Open MPI; `srun --mpi=pmi2` for", id="unknown: both"),
])
def test_unwired_step_advice_follows_the_mpi_library(library, advice):
    with pytest.raises(ResolutionError) as excinfo:
        make_plan(make_options(verify=True), SRUN_NONE, library=lambda: library)
    assert advice in str(excinfo.value)


def test_slurm_step_without_mpi_wiring_skips_the_check_with_a_warning():
    env = srun_env(0, ["node1", "node2"], [3, 1], BLOCK, mpi="none")
    opts = make_options(gpus_per_node=0)
    plan = make_plan(opts, env)
    assert not plan.use_mpi and not plan.verify
    assert any("--mpi=pmix" in n for n in plan.notes)
    with pytest.raises(ResolutionError, match="--mpi=pmix"):
        make_plan(make_options(verify=True), env)
    with pytest.raises(ResolutionError, match="no MPI wiring|without MPI wiring"):
        make_plan(make_options(source="mpi"), env)


# --------------------------------------------------------------------------------------------
# The rules one by one
# --------------------------------------------------------------------------------------------

def test_verify_true_without_a_step_or_without_mpi_says_which():
    with pytest.raises(ResolutionError) as no_step:
        make_plan(make_options(verify=True), {})
    assert str(no_step.value) == (
        "verify=True: there is no Slurm step to check against MPI (SLURM_PROCID is not set). "
        "Run under `srun --mpi=pmix` (Open MPI; `srun --mpi=pmi2` for MPICH, Intel MPI, "
        "MVAPICH), or use verify='auto'.")
    with pytest.raises(ResolutionError) as slurm:
        make_plan(make_options(verify=True, source="slurm"), SRUN_PMIX)
    assert "verify=True needs MPI, but source='slurm' never starts MPI." in str(slurm.value)
    with pytest.raises(ResolutionError) as unwired:
        make_plan(make_options(verify=True), SRUN_NONE)
    assert "verify=True needs MPI, but this Slurm task has no MPI wiring (srun --mpi=none?)." \
        in str(unwired.value)


@pytest.mark.parametrize("env, verify, source, uses, notes", [
    pytest.param(SRUN_PMIX, False, "auto", "slurm", 0, id="verify=False: Slurm alone"),
    pytest.param(SRUN_PMIX, "auto", "auto", "slurm+check", 0, id="auto: checked"),
    pytest.param(SRUN_PMIX, "auto", "slurm", "slurm", 0, id="source='slurm': no check, no note"),
    pytest.param(SRUN_NONE, "auto", "auto", "slurm", 1, id="no wiring: a note"),
    pytest.param(SRUN_NONE, "auto", "slurm", "slurm", 0, id="no wiring, source='slurm': no note"),
    pytest.param({}, "auto", "auto", "mpi", 0, id="no Slurm: MPI"),
])
def test_what_the_plan_uses(env, verify, source, uses, notes):
    plan = make_plan(make_options(verify=verify, source=source), env)
    assert plan.uses == uses and len(plan.notes) == notes


def test_the_library_is_read_only_before_mpi_starts_in_a_slurm_task():
    asked = []

    def library():
        asked.append(1)
        return MpiLibrary(MPICH_TEXT)

    make_plan(make_options(), SRUN_PMI2, library=library)
    assert len(asked) == 1
    for started in (dict(mpi_running=True), dict(have_comm=True)):
        make_plan(make_options(), SRUN_PMI2, library=library, **started)
    assert len(asked) == 1  # MPI was started already: nothing to warn before it
    make_plan(make_options(), {**SALLOC_DAEMON, **HYDRA}, library=library)  # mpiexec: no plugin
    make_plan(make_options(), {}, library=library)     # not a Slurm task
    assert len(asked) == 1
    make_plan(make_options(), SRUN_NONE, library=library)  # the advice names its plugin
    assert len(asked) == 2


def test_warnings_come_only_where_mpi_starts():
    assert make_plan(make_options(), step_of_two_nodes(), library=lambda: MpiLibrary(MPICH_TEXT)
                     ).warnings != ()
    assert make_plan(make_options(verify=False), step_of_two_nodes(),
                     library=lambda: MpiLibrary(MPICH_TEXT)).warnings == ()


def test_intel_on_a_step_the_variables_cannot_place_is_a_warning_before_mpi():
    env = {**step_of_two_nodes(), "SLURM_DISTRIBUTION": "plane=2"}
    warnings = make_plan(make_options(), env, library=lambda: MpiLibrary(IMPI)).warnings
    assert len(warnings) == 1 and "I_MPI_PMI_LIBRARY" in warnings[0]


def step_of_two_nodes():
    return {**SRUN_PMI2, "SLURM_STEP_TASKS_PER_NODE": "2(x2)"}
