"""_slurm_step: Slurm's step variables read and checked, from plain dicts that stand in for
os.environ."""

from __future__ import annotations

import re

import pytest

from mpi_resolver.core.errors import FormatError, MismatchError, ResolutionError
from mpi_resolver.launch.launchers import detect_launch, placement_fix, srun_advice
from mpi_resolver.options import make_options
from mpi_resolver.launch.slurm_step import (SlurmStep, batch_step_view, read_slurm,
                                      slurm_describes_ranks, slurm_truth, step_of, why_not_tf)
from tests.unit.envs import (
    HYDRA,
    MVAPICH,
    OPEN_MPI,
    SALLOC_DAEMON,
    SLURM_TASK,
    SRUN_NONE,
    SRUN_PMI2,
    SRUN_PMIX,
)

pytestmark = pytest.mark.unit


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
    step = step_of(env)
    assert (step is not None) is present
    if step is not None:
        assert step.env is env


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


@pytest.mark.parametrize("env", [
    pytest.param(SLURM_TASK, id="a task of srun"),
    pytest.param(SALLOC_DAEMON, id="mpirun's daemons inside salloc (a step of their own)"),
    pytest.param({"SLURM_JOB_ID": "7", "SLURM_NTASKS": "4"}, id="salloc's shell: no PROCID"),
])
def test_batch_step_view_leaves_other_processes_alone(env):
    assert batch_step_view(env) == (env, None)


def _rank_on_n2():
    """What rank 3 of the same step sees on n2."""
    return {**SLURM_TASK, "SLURM_PROCID": "3", "SLURM_LOCALID": "0", "SLURMD_NODENAME": "n2",
            "SLURM_GTIDS": "3"}


def test_digest_is_the_crc32_of_the_job_wide_variables():
    """Every rank computes it alone: fixed (CRC-32 of the variables joined by NUL, UTF-8 with
    replacement), so that ranks of one step agree whatever their Python."""
    assert SlurmStep(SLURM_TASK).digest() == "6f0287d4"
    assert SlurmStep({}).digest() == "c622f71d"
    assert SlurmStep({"SLURM_JOB_ID": "\udcff"}).digest() == "44ee14db"  # undecodable bytes


@pytest.mark.parametrize("value, distribution", [
    pytest.param(None, "block", id="unset: block"),
    pytest.param("", "block", id="empty: block"),
    pytest.param("Cyclic", "cyclic", id="any case"),
    pytest.param("cyclic:block", "cyclic", id="node level of node:socket"),
    pytest.param("cyclic:cyclic:block", "cyclic", id="node level of three levels"),
    pytest.param("plane=4", "plane", id="plane size dropped"),
    pytest.param("plane=4=2", "plane", id="anything after the first '='"),
    pytest.param(":block", "block", id="no node level: block"),
])
def test_distribution_is_the_node_level(value, distribution):
    env = {} if value is None else {"SLURM_DISTRIBUTION": value}
    assert SlurmStep(env).distribution() == distribution


@pytest.mark.parametrize("missing", ["SLURM_STEP_ID", "SLURM_STEP_NUM_TASKS",
                                     "SLURM_STEP_NODELIST"])
def test_any_step_variable_marks_a_task_of_a_step_not_the_batch_step(missing):
    env = {"SLURM_JOB_ID": "7", "SLURM_PROCID": "0", "SLURM_NTASKS": "4",
           "SLURMD_NODENAME": "n1", missing: "1"}
    assert batch_step_view(env) == (env, None)


def test_errors_of_the_step_variables_say_how_to_start_a_step():
    with pytest.raises(ResolutionError) as caught:
        SlurmStep({}).num_tasks()
    assert str(caught.value).startswith("SLURM_STEP_NUM_TASKS is not set. Is this process a "
                                        "task of a Slurm step (started by srun)?")
    with pytest.raises(FormatError, match="^SLURM_GTIDS='0,x' is not a list of whole numbers"):
        SlurmStep({"SLURM_GTIDS": "0,x"}).gtids()


# --------------------------------------------------------------------------------------------
# Reading the step: read_slurm, slurm_truth, why_not_tf
# --------------------------------------------------------------------------------------------

def step_with(**more):
    return SlurmStep({"SLURM_PROCID": "1", "SLURM_STEP_NUM_TASKS": "4",
                      "SLURM_STEP_NODELIST": "n[1-2]", "SLURM_STEP_TASKS_PER_NODE": "3,1",
                      **more})


def test_read_slurm_checks_the_task_count_unless_jobs_or_tasks_per_node_say():
    bad = step_with(SLURM_STEP_NUM_TASKS="5")
    with pytest.raises(FormatError, match="SLURM_STEP_NUM_TASKS=5 but SLURM_STEP_TASKS_PER_NODE"):
        read_slurm(make_options(), bad)
    assert read_slurm(make_options(jobs={"worker": 4}), bad).counts == [3, 1]
    assert read_slurm(make_options(tasks_per_node=2), bad).counts == [2, 2]


def test_read_slurm_a_declared_layout_is_tensorflow_s():
    view = read_slurm(make_options(tasks_per_node={"n2": 1, "n1": 3}), step_with())
    assert view.declared is True and view.runs == view.tf_assumed == [("n1", 3), ("n2", 1)]
    plain = read_slurm(make_options(), step_with(SLURM_DISTRIBUTION="cyclic"))
    assert plain.declared is False and plain.runs == [("n1", 1), ("n2", 1), ("n1", 2)]


def test_a_declared_layout_must_name_the_step_s_nodes():
    with pytest.raises(ResolutionError) as caught:
        read_slurm(make_options(tasks_per_node={"n1": 3, "n9": 1}), step_with())
    assert str(caught.value).startswith("tasks_per_node names n9, which are not in "
                                        "SLURM_STEP_NODELIST='n[1-2]'")


@pytest.mark.parametrize("launcher, fix", [
    pytest.param("pmi2", "Launch with `srun --mpi=pmi2`", id="MPICH's srun"),
    pytest.param("pmix", "Launch with `srun --mpi=pmix`", id="Open MPI's srun"),
])
def test_slurm_truth_names_the_launch_that_fits(launcher, fix):
    view = read_slurm(make_options(), step_with(SLURM_DISTRIBUTION="plane=2"))
    with pytest.raises(MismatchError) as caught:
        slurm_truth(view, step_with(SLURM_DISTRIBUTION="plane=2"), launcher)
    assert fix in str(caught.value)
    view = read_slurm(make_options(), step_with(SLURMD_NODENAME="n2"))
    with pytest.raises(MismatchError) as caught:
        slurm_truth(view, step_with(SLURMD_NODENAME="n2"), launcher)
    assert "SLURMD_NODENAME=n2" in str(caught.value) and fix in str(caught.value)


@pytest.mark.parametrize("nodes, shown", [
    pytest.param("n[10,9]", "n[10,9]", id="short: as it is"),
    pytest.param("x" * 80, "x" * 80, id="80 characters: as they are"),
    pytest.param("x" * 81, "x" * 77 + "...", id="81: cut to 77 and '...'"),
])
def test_why_not_tf_names_the_first_rank_tensorflow_misplaces(nodes, shown):
    step = SlurmStep({"SLURM_STEP_NODELIST": nodes, "SLURM_DISTRIBUTION": "cyclic"})
    note = why_not_tf([("a", 1), ("b", 1), ("a", 1)], [("a", 2), ("b", 1)], step)
    assert note == ("the ClusterSpec differs from TensorFlow's SlurmClusterResolver: it would "
                    "put rank 1 on a, but rank 1 runs on b (SLURM_DISTRIBUTION=cyclic, node "
                    f"order {shown}); using where ranks run.")
    assert why_not_tf([("a", 2)], [("a", 2)], step) is None
    assert "SLURM_DISTRIBUTION=block, node order ?" in why_not_tf(
        [("b", 1), ("a", 1)], [("a", 1), ("b", 1)], SlurmStep({}))


@pytest.mark.parametrize("runs, tf_assumed", [
    pytest.param([("a", 2)], [("a", 1)], id="runs longer than TensorFlow's"),
    pytest.param([("a", 1)], [("a", 1), ("b", 1)], id="TensorFlow's longer than runs"),
])
def test_why_not_tf_of_layouts_of_different_ranks_is_a_value_error(runs, tf_assumed):
    """An internal invariant: both layouts hold the step's ranks."""
    with pytest.raises(ValueError, match="zip"):
        why_not_tf(runs, tf_assumed, SlurmStep({}))


# --------------------------------------------------------------------------------------------
# Every error of the step's variables, word for word
# --------------------------------------------------------------------------------------------

_BATCH_ADVICE = srun_advice(None, command="python train.py")


@pytest.mark.parametrize("call, error, message", [
    pytest.param(lambda: read_slurm(make_options(), step_with(SLURM_STEP_NUM_TASKS="5")),
                 FormatError, "SLURM_STEP_NUM_TASKS=5 but SLURM_STEP_TASKS_PER_NODE='3,1' adds "
                 "up to 4; they must agree.", id="task counts that do not add up"),
    pytest.param(lambda: read_slurm(make_options(), step_with(SLURM_PROCID="4")),
                 ResolutionError, "SLURM_PROCID=4 is outside the step's 4 tasks (0..3).",
                 id="a rank past the last task"),
    pytest.param(lambda: read_slurm(make_options(), step_with(SLURM_STEP_NODELIST="n1,n1")),
                 FormatError, "SLURM_STEP_NODELIST='n1,n1' lists n1 twice; a step's node list "
                 "names each node once.", id="a node listed twice"),
    pytest.param(lambda: read_slurm(make_options(), step_with(SLURM_STEP_NODELIST="n[1-3]")),
                 FormatError, "SLURM_STEP_NODELIST='n[1-3]' has 3 nodes but "
                 "SLURM_STEP_TASKS_PER_NODE='3,1' has 2 entries; they must describe the same "
                 "nodes.", id="more nodes than task counts"),
    pytest.param(lambda: read_slurm(make_options(tasks_per_node={"n8": 2, "n1": 1, "n9": 1}),
                                    step_with()),
                 ResolutionError, "tasks_per_node names n8, n9, which are not in "
                 "SLURM_STEP_NODELIST='n[1-2]'; name the step's nodes, or leave tasks_per_node "
                 "unset to read them from Slurm.", id="declared nodes outside the step"),
    pytest.param(lambda: SlurmStep({"SLURM_STEP_TASKS_PER_NODE": "0,1"}).tasks_per_node(),
                 FormatError, "SLURM_STEP_TASKS_PER_NODE='0,1' gives a node 0 tasks; every node "
                 "of a step runs at least one task.", id="a node of no tasks"),
    pytest.param(lambda: SlurmStep({"SLURM_GTIDS": "0,x"}).gtids(),
                 FormatError, "SLURM_GTIDS='0,x' is not a list of whole numbers; expected the "
                 "step's ranks on this node, e.g. 0,2,3.", id="ranks that are not numbers"),
    pytest.param(lambda: slurm_truth(read_slurm(make_options(),
                                                step_with(SLURM_DISTRIBUTION="plane=2")),
                                     step_with(SLURM_DISTRIBUTION="plane=2"), "pmix"),
                 MismatchError, "SLURM_DISTRIBUTION='plane=2': Slurm's step variables do not "
                 "say on which node each rank runs, and TensorFlow's block layout would give "
                 "ranks addresses on hosts where they do not run. " + placement_fix("pmix"),
                 id="a distribution that does not say where ranks run"),
    pytest.param(lambda: batch_step_view({"SLURM_JOB_ID": "7", "SLURM_PROCID": "0"}),
                 ResolutionError, "this is the batch step of Slurm job 7 (SLURM_PROCID is set "
                 "but no SLURM_STEP_* variable): the job script itself, started once, not the "
                 "job's SLURM_NTASKS=? tasks. Start training with srun inside the script: "
                 f"{_BATCH_ADVICE}.", id="a batch step without its node nor its task count"),
])
def test_errors_of_the_step_word_for_word(call, error, message):
    with pytest.raises(ResolutionError) as caught:
        call()
    assert caught.type is error and str(caught.value) == message
