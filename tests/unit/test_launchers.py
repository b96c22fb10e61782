"""Launcher detection and Slurm's step variables, from plain dicts that stand in for os.environ."""

from __future__ import annotations

import re

import pytest

from mpi_resolver._errors import FormatError, MismatchError, ResolutionError
from mpi_resolver._launchers import detect_launch, srun_advice
from mpi_resolver._mpi_library import MpiLibrary
from mpi_resolver._slurm_step import SlurmStep, batch_step_view, slurm_describes_ranks
from mpi_resolver._values import require_whole as parse_int
from mpi_resolver._options import make_options
from mpi_resolver._plan import plan
from mpi_resolver._resolution import resolve
from tests.unit.jobs import run_world

pytestmark = pytest.mark.unit

# What a task of `srun -N2 -n4` sees on node n1 (ranks 0,1,2 there), rank 2 of 4.
SLURM_TASK = {
    "SLURM_JOB_ID": "42",
    "SLURM_STEP_ID": "0",
    "SLURM_PROCID": "2",
    "SLURM_LOCALID": "2",
    "SLURM_STEP_NUM_TASKS": "4",
    "SLURM_STEP_NODELIST": "n[1-2]",
    "SLURM_STEP_TASKS_PER_NODE": "3,1",
    "SLURMD_NODENAME": "n1",
    "SLURM_GTIDS": "0,1,2",
}
# What every rank inherits under `mpirun` started inside `salloc`: the launcher daemon's step.
SALLOC_DAEMON = {
    "SLURM_JOB_ID": "42",
    "SLURM_PROCID": "0",
    "SLURM_STEP_NUM_TASKS": "2",
    "SLURM_STEP_NODELIST": "n[1-2]",
    "SLURM_STEP_TASKS_PER_NODE": "1(x2)",
}
OPEN_MPI = {"OMPI_COMM_WORLD_RANK": "3", "OMPI_COMM_WORLD_SIZE": "4",
            "OMPI_COMM_WORLD_LOCAL_RANK": "1", "OMPI_COMM_WORLD_LOCAL_SIZE": "2"}
HYDRA = {"PMI_RANK": "2", "PMI_SIZE": "4", "MPI_LOCALRANKID": "0"}
SRUN_PMIX = {**SLURM_TASK, "PMIX_RANK": "2", "PMIX_NAMESPACE": "slurm.pmix.42.0"}
SRUN_PMI2 = {**SLURM_TASK, "PMI_RANK": "2", "PMI_SIZE": "4", "PMI_FD": "5"}
SRUN_NONE = dict(SLURM_TASK)
MVAPICH = {"MV2_COMM_WORLD_RANK": "5", "MV2_COMM_WORLD_SIZE": "8",
           "MV2_COMM_WORLD_LOCAL_RANK": "1"}


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

@pytest.mark.parametrize("env, expected", [
    pytest.param(SRUN_PMIX, True, id="a task of srun --mpi=pmix: Slurm describes the ranks"),
    pytest.param(SRUN_PMI2, True, id="a task of srun --mpi=pmi2: Slurm describes the ranks"),
    pytest.param(SRUN_NONE, True, id="a task of a plain srun step: Slurm describes the ranks"),
    pytest.param({**SALLOC_DAEMON, **OPEN_MPI}, False,
                 id="Open MPI's mpirun inside an allocation: Slurm describes the daemons"),
    pytest.param({**SALLOC_DAEMON, **HYDRA}, False,
                 id="Hydra inside an allocation: Slurm describes the daemons"),
    pytest.param({**SALLOC_DAEMON, **MVAPICH}, False,
                 id="MVAPICH's mpirun_rsh inside an allocation: Slurm describes the daemons"),
    pytest.param(OPEN_MPI, False, id="Open MPI outside Slurm: no step at all"),
    pytest.param(HYDRA, False, id="Hydra outside Slurm: no step at all"),
    pytest.param({}, False, id="a plain process outside Slurm"),
    pytest.param({"SLURM_JOB_ID": "42", "SLURM_NODELIST": "n1"}, False,
                 id="a batch script (job variables but no SLURM_PROCID)"),
])
def test_slurm_describes_ranks(env, expected):
    assert slurm_describes_ranks(env, detect_launch(env)) is expected


# --------------------------------------------------------------------------------------------
# SlurmStep accessors
# --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("accessor, expected", [
    pytest.param("procid", 2, id="procid reads SLURM_PROCID"),
    pytest.param("num_tasks", 4, id="num_tasks reads SLURM_STEP_NUM_TASKS"),
    pytest.param("hostlist", ["n1", "n2"], id="hostlist expands SLURM_STEP_NODELIST"),
    pytest.param("tasks_per_node", [3, 1], id="tasks_per_node expands SLURM_STEP_TASKS_PER_NODE"),
    pytest.param("nodename", "n1", id="nodename reads SLURMD_NODENAME"),
    pytest.param("distribution", "block", id="distribution is block when unset"),
    pytest.param("gtids", (0, 1, 2), id="gtids reads SLURM_GTIDS"),
])
def test_slurm_step_accessors_read_a_task_environment(accessor, expected):
    assert getattr(SlurmStep(SLURM_TASK), accessor)() == expected


@pytest.mark.parametrize("env, present", [
    pytest.param(SLURM_TASK, True, id="a step task is present"),
    pytest.param({"SLURM_PROCID": ""}, True, id="SLURM_PROCID set but empty is still present"),
    pytest.param({"SLURM_JOB_ID": "1"}, False, id="job variables alone are not a step"),
    pytest.param({}, False, id="an empty environment is not a step"),
])
def test_slurm_step_present(env, present):
    assert SlurmStep.present(env) is present


@pytest.mark.parametrize("value, expected", [
    pytest.param("block", "block", id="block stays block"),
    pytest.param("cyclic", "cyclic", id="cyclic stays cyclic"),
    pytest.param("cyclic:block", "cyclic", id="cyclic:block is cyclic across nodes"),
    pytest.param("block:cyclic", "block", id="block:cyclic is block across nodes"),
    pytest.param("plane=4", "plane", id="plane=4 is plane"),
    pytest.param("arbitrary", "arbitrary", id="arbitrary stays arbitrary"),
    pytest.param("Cyclic", "cyclic", id="upper case is folded"),
    pytest.param("", "block", id="an empty value is block"),
    pytest.param(None, "block", id="unset is block"),
])
def test_slurm_step_distribution_is_the_node_level_part(value, expected):
    env = dict(SLURM_TASK)
    env.pop("SLURM_DISTRIBUTION", None)
    if value is not None:
        env["SLURM_DISTRIBUTION"] = value
    assert SlurmStep(env).distribution() == expected


@pytest.mark.parametrize("value, expected", [
    pytest.param(None, None, id="gtids unset is None"),
    pytest.param("", None, id="gtids empty is None"),
    pytest.param("0,2,3", (0, 2, 3), id="gtids of a cyclic step on its first node"),
    pytest.param("7", (7,), id="gtids of one rank"),
])
def test_slurm_step_gtids(value, expected):
    env = {k: v for k, v in SLURM_TASK.items() if k != "SLURM_GTIDS"}
    if value is not None:
        env["SLURM_GTIDS"] = value
    assert SlurmStep(env).gtids() == expected


@pytest.mark.parametrize("value", [
    pytest.param(None, id="nodename unset is None"),
    pytest.param("", id="nodename empty is None"),
])
def test_slurm_step_nodename_missing(value):
    env = {k: v for k, v in SLURM_TASK.items() if k != "SLURMD_NODENAME"}
    if value is not None:
        env["SLURMD_NODENAME"] = value
    assert SlurmStep(env).nodename() is None


_MISSING = object()


@pytest.mark.parametrize("variable, value, accessor, error", [
    pytest.param("SLURM_PROCID", _MISSING, "procid", ResolutionError,
                 id="procid without SLURM_PROCID"),
    pytest.param("SLURM_PROCID", "", "procid", FormatError, id="procid with SLURM_PROCID empty"),
    pytest.param("SLURM_PROCID", "abc", "procid", FormatError,
                 id="procid with SLURM_PROCID='abc'"),
    pytest.param("SLURM_PROCID", "-1", "procid", FormatError,
                 id="procid with SLURM_PROCID negative"),
    pytest.param("SLURM_PROCID", "1.0", "procid", FormatError,
                 id="procid with SLURM_PROCID a fraction"),
    pytest.param("SLURM_PROCID", "３", "procid", FormatError,
                 id="procid with SLURM_PROCID a full-width digit"),
    pytest.param("SLURM_STEP_NUM_TASKS", _MISSING, "num_tasks", ResolutionError,
                 id="num_tasks without SLURM_STEP_NUM_TASKS"),
    pytest.param("SLURM_STEP_NUM_TASKS", "0", "num_tasks", FormatError,
                 id="num_tasks with SLURM_STEP_NUM_TASKS='0'"),
    pytest.param("SLURM_STEP_NUM_TASKS", "four", "num_tasks", FormatError,
                 id="num_tasks with SLURM_STEP_NUM_TASKS not a number"),
    pytest.param("SLURM_STEP_NODELIST", _MISSING, "hostlist", ResolutionError,
                 id="hostlist without SLURM_STEP_NODELIST"),
    pytest.param("SLURM_STEP_NODELIST", "", "hostlist", FormatError,
                 id="hostlist with SLURM_STEP_NODELIST empty"),
    pytest.param("SLURM_STEP_NODELIST", "n[3-1]", "hostlist", FormatError,
                 id="hostlist with SLURM_STEP_NODELIST reversed"),
    pytest.param("SLURM_STEP_NODELIST", "n[1-2", "hostlist", FormatError,
                 id="hostlist with SLURM_STEP_NODELIST unbalanced"),
    pytest.param("SLURM_STEP_TASKS_PER_NODE", _MISSING, "tasks_per_node", ResolutionError,
                 id="tasks_per_node without SLURM_STEP_TASKS_PER_NODE"),
    pytest.param("SLURM_STEP_TASKS_PER_NODE", "", "tasks_per_node", FormatError,
                 id="tasks_per_node with SLURM_STEP_TASKS_PER_NODE empty"),
    pytest.param("SLURM_STEP_TASKS_PER_NODE", "0,1", "tasks_per_node", FormatError,
                 id="tasks_per_node with a node of 0 tasks"),
    pytest.param("SLURM_STEP_TASKS_PER_NODE", "0(x2)", "tasks_per_node", FormatError,
                 id="tasks_per_node with repeated nodes of 0 tasks"),
    pytest.param("SLURM_STEP_TASKS_PER_NODE", "3(x0)", "tasks_per_node", FormatError,
                 id="tasks_per_node with a repeat of 0"),
    pytest.param("SLURM_GTIDS", "0,a", "gtids", FormatError, id="gtids with a letter"),
    pytest.param("SLURM_GTIDS", "0,,1", "gtids", FormatError, id="gtids with an empty element"),
    pytest.param("SLURM_GTIDS", "0,-1", "gtids", FormatError, id="gtids with a negative rank"),
])
def test_slurm_step_errors_name_the_variable(variable, value, accessor, error):
    env = dict(SLURM_TASK)
    if value is _MISSING:
        del env[variable]
    else:
        env[variable] = value
    with pytest.raises(ResolutionError, match=re.escape(variable)) as excinfo:
        getattr(SlurmStep(env), accessor)()
    assert excinfo.type is error


def test_a_missing_step_variable_says_how_to_start_a_step():
    with pytest.raises(ResolutionError, match="srun") as excinfo:
        SlurmStep({}).procid()
    assert "SLURM_PROCID is not set" in str(excinfo.value)


def test_a_malformed_nodelist_error_keeps_the_cause():
    with pytest.raises(FormatError) as excinfo:
        SlurmStep({"SLURM_STEP_NODELIST": "n[3-1]"}).hostlist()
    assert isinstance(excinfo.value.__cause__, FormatError)


def test_a_huge_procid_is_a_format_error():
    with pytest.raises(FormatError, match="SLURM_PROCID"):
        SlurmStep({"SLURM_PROCID": "1" * 5000}).procid()


@pytest.mark.parametrize("value, minimum, expected", [
    pytest.param("0", 0, 0, id="zero is a whole number"),
    pytest.param(" 12 ", 0, 12, id="spaces around the number are ignored"),
    pytest.param("007", 1, 7, id="leading zeros are decimal"),
])
def test_parse_int_accepts(value, minimum, expected):
    assert parse_int(value, name="X_VAR", minimum=minimum) == expected


# --------------------------------------------------------------------------------------------
# SlurmStep.digest
# --------------------------------------------------------------------------------------------

def _rank_on_n2():
    """What rank 3 of the same step sees on n2."""
    return {**SLURM_TASK, "SLURM_PROCID": "3", "SLURM_LOCALID": "0", "SLURMD_NODENAME": "n2",
            "SLURM_GTIDS": "3"}


def test_digest_is_eight_hex_digits():
    assert re.fullmatch(r"[0-9a-f]{8}", SlurmStep(SLURM_TASK).digest())


def test_digest_is_equal_on_every_rank_of_one_step():
    assert SlurmStep(SLURM_TASK).digest() == SlurmStep(_rank_on_n2()).digest()


def test_digest_ignores_unrelated_variables():
    assert SlurmStep(SLURM_TASK).digest() == SlurmStep({**SLURM_TASK, "HOME": "/x"}).digest()


@pytest.mark.parametrize("variable, value", [
    pytest.param("SLURM_STEP_NODELIST", "n[1,3]", id="another node list gives another digest"),
    pytest.param("SLURM_STEP_TASKS_PER_NODE", "2(x2)",
                 id="other tasks per node give another digest"),
    pytest.param("SLURM_STEP_NUM_TASKS", "5", id="another task count gives another digest"),
    pytest.param("SLURM_JOB_ID", "43", id="another job gives another digest"),
    pytest.param("SLURM_STEP_ID", "1", id="another step gives another digest"),
    pytest.param("SLURM_DISTRIBUTION", "cyclic", id="another distribution gives another digest"),
])
def test_digest_differs_when_a_job_wide_variable_differs(variable, value):
    assert SlurmStep(SLURM_TASK).digest() != SlurmStep({**SLURM_TASK, variable: value}).digest()


def test_every_variable_the_package_reads_is_in_VARIABLES():
    """The resolver snapshots only launchers.VARIABLES: a variable read elsewhere would be
    seen by the command line but not by the resolver."""
    import pathlib
    import re

    from mpi_resolver._environment import VARIABLES

    source = "".join(p.read_text() for p in
                     pathlib.Path(__file__).resolve().parents[2].joinpath("mpi_resolver")
                     .glob("*.py"))
    names = set(re.findall(r'"((?:SLURMD?|OMPI|PMIX?|MPIR?|I_MPI|CUDA)_[A-Z_]+)"', source))
    names.discard("SLURM_VARS")  # the name of a table, not a variable
    assert names and names <= set(VARIABLES), sorted(names - set(VARIABLES))


# --------------------------------------------------------------------------------------------
# The batch step of an sbatch job (the script itself, measured: no SLURM_STEP_* variables)
# --------------------------------------------------------------------------------------------

BATCH = {"SLURM_JOB_ID": "7", "SLURM_PROCID": "0", "SLURM_LOCALID": "0", "SLURM_NTASKS": "4",
         "SLURM_NODELIST": "node[1-2]", "SLURM_TASKS_PER_NODE": "2(x2)",
         "SLURMD_NODENAME": "node1", "SLURM_GTIDS": "0"}


@pytest.mark.parametrize("env", [
    pytest.param(BATCH, id="sbatch -N2 --ntasks-per-node=2, python without srun"),
    pytest.param(dict(BATCH, SLURMD_NODENAME=""), id="no node name either"),
])
def test_batch_step_of_several_tasks_is_a_clear_error(env):
    for source in ("auto", "slurm"):
        with pytest.raises(ResolutionError) as excinfo:
            plan(make_options(source=source), env)
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
    the_plan = plan(opts, env)
    res = resolve(opts, the_plan=the_plan)
    assert res.cluster() == {"worker": ["node1:8888"]} and res.task == ("worker", 0)
    assert res.notes == ["the batch step of Slurm job 7 (python without srun): resolved as "
                         "one task on node1; start more with srun."]


@pytest.mark.parametrize("env", [
    pytest.param(SLURM_TASK, id="a task of srun"),
    pytest.param(SALLOC_DAEMON, id="mpirun's daemons inside salloc (a step of their own)"),
    pytest.param({"SLURM_JOB_ID": "7", "SLURM_NTASKS": "4"}, id="salloc's shell: no PROCID"),
])
def test_batch_step_view_leaves_other_processes_alone(env):
    assert batch_step_view(env) == (env, None)


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


def test_unwired_slurm_step_advice_names_both_plugins():
    the_plan = plan(make_options(), SRUN_NONE)
    assert any("`srun --mpi=pmix` (Open MPI; `srun --mpi=pmi2` for MPICH" in n
               for n in the_plan.notes)
    with pytest.raises(ResolutionError, match="--mpi=pmi2` for MPICH"):
        plan(make_options(verify=True), SRUN_NONE)


# --------------------------------------------------------------------------------------------
# Which srun --mpi plugin the MPI mpi4py loads can speak (read before MPI_Init)
# --------------------------------------------------------------------------------------------

#: What PyPI's mpich 5.0.2 and impi-rt 2021.18.1 answer to MPI_Get_library_version.
MPICH_TEXT = ("MPICH Version:      5.0.2\nMPICH Release date: Fri Sep 25 20:45:26 UTC 2026\n"
              "MPICH ABI:          18:2:6\nMPICH Device:       ch4:ucx ofi\n"
              "MPICH configure:    --with-device=ch4:ucx,ofi --with-pm=hydra:gforker\n"
              "MPICH CC:           cc\n")
OMPI4 = "Open MPI v4.1.4, package: Debian OpenMPI, ident: 4.1.4, repo rev: v4.1.4, May 26, 2022"
OMPI5 = "Open MPI v5.0.8, package: Open MPI, ident: 5.0.8, repo rev: v5.0.8, May 30, 2025"
IMPI = "Intel(R) MPI Library 2021.18.1 for Linux* OS\n"


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


@pytest.mark.parametrize("env, library, says", [
    pytest.param(SRUN_PMIX, MpiLibrary(MPICH_TEXT), "`srun --mpi=pmi2`",
                 id="MPICH under srun --mpi=pmix"),
    pytest.param(SRUN_PMI2, MpiLibrary(OMPI4, frozenset({"ext3x"})), "`srun --mpi=pmix`",
                 id="Debian's Open MPI under srun --mpi=pmi2"),
])
def test_a_plugin_the_mpi_cannot_speak_is_refused_before_mpi_init(env, library, says):
    with pytest.raises(ResolutionError) as excinfo:
        plan(make_options(), env, library=lambda: library)
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
    assert plan(make_options(), env, library=lambda: library).verify


def test_source_slurm_never_looks_at_the_mpi_library():
    def library():
        raise AssertionError("source='slurm' must not load mpi4py's library")

    assert not plan(make_options(source="slurm"), SRUN_PMIX, library=library).use_mpi


@pytest.mark.parametrize("library, advice", [
    pytest.param(MpiLibrary(MPICH_TEXT), "`srun --mpi=pmi2`", id="MPICH: pmi2 only"),
    pytest.param(MpiLibrary(OMPI4), "`srun --mpi=pmix`", id="Open MPI: pmix only"),
    pytest.param(None, "`srun --mpi=pmix` (Open MPI; `srun --mpi=pmi2` for", id="unknown: both"),
])
def test_unwired_step_advice_follows_the_mpi_library(library, advice):
    with pytest.raises(ResolutionError) as excinfo:
        plan(make_options(verify=True), SRUN_NONE, library=lambda: library)
    assert advice in str(excinfo.value)
