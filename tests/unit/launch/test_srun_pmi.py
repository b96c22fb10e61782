"""srun_pmi: the faults of MPICH's and Intel MPI's own PMI-1 clients under srun --mpi=pmi2,
told before MPI_Init. The version texts are the real ones of PyPI's mpich 5.0.2 and impi-rt
2021.18.1 (MPI_Get_library_version); the cluster tests run both for real."""

from __future__ import annotations

import pytest

from mpi_resolver.core.errors import ResolutionError
from mpi_resolver.launch.launchers import detect_launch
from mpi_resolver.launch.mpi_library import MpiLibrary
from mpi_resolver.options import make_options
from mpi_resolver.resolve.plan import make_plan
from mpi_resolver.launch.srun_pmi import (
    check_intel_placement,
    even_blocks,
    intel_groups_cross_nodes,
    mpich_default_netmod,
    pmi1_warnings,
)

MPICH = MpiLibrary(
    "MPICH Version:      5.0.2\nMPICH Release date: Fri Sep 25 20:45:26 UTC 2026\n"
    "MPICH ABI:          18:2:6\nMPICH Device:       ch4:ucx ofi\n"
    "MPICH configure:    --with-device=ch4:ucx,ofi --with-pm=hydra:gforker\n"
    "MPICH CC:           cc\n")
MPICH_OFI_FIRST = MpiLibrary(MPICH.version.replace("ch4:ucx ofi", "ch4:ofi ucx"))
MPICH_SLURM_PMI = MpiLibrary(MPICH.version.replace("--with-pm=hydra:gforker",
                                                   "--with-pm=no --with-pmi=slurm"))
INTEL = MpiLibrary("Intel(R) MPI Library 2021.18.1 for Linux* OS\n")
OPEN_MPI = MpiLibrary("Open MPI v4.1.4, package: Debian OpenMPI, ident: 4.1.4")


def step(tasks_per_node: str, nodes: str = "node[1-2]", distribution: str = "",
         **more: str) -> dict:
    """A task of srun --mpi=pmi2 (rank 0) with the given step shape."""
    counts = tasks_per_node
    env = {"SLURM_JOB_ID": "7", "SLURM_STEP_ID": "0", "SLURM_PROCID": "0",
           "SLURM_LOCALID": "0", "SLURM_STEP_NODELIST": nodes,
           "SLURM_STEP_TASKS_PER_NODE": counts, "SLURMD_NODENAME": "node1",
           "PMI_RANK": "0", "PMI_SIZE": "4", "PMI_FD": "5", **more}
    if distribution:
        env["SLURM_DISTRIBUTION"] = distribution
    return env


@pytest.mark.parametrize("tasks, nodes, blocks", [
    pytest.param(4, 2, [2, 2], id="even"),
    pytest.param(5, 2, [3, 2], id="the first node one more"),
    pytest.param(4, 3, [2, 1, 1], id="4 on 3: 2,1,1 (measured: Intel MPI runs there)"),
    pytest.param(7, 3, [3, 2, 2], id="7 on 3"),
    pytest.param(1, 2, [1, 0], id="fewer tasks than nodes"),
    pytest.param(3, 0, [], id="no nodes"),
    pytest.param(4, 1, [4], id="one node takes them all"),
])
def test_even_blocks(tasks, nodes, blocks):
    assert even_blocks(tasks, nodes) == blocks


@pytest.mark.parametrize("runs, nodes, crosses", [
    # measured with Intel MPI 2021.18 under srun --mpi=pmi2 on two and three emulated nodes
    pytest.param([("a", 3), ("b", 1)], 2, True, id="-N2 -n4 (3,1): fails"),
    pytest.param([("a", 4), ("b", 1)], 2, True, id="-N2 -n5 (4,1): fails"),
    pytest.param([("a", 5), ("b", 1)], 2, True, id="-N2 -n6 (5,1): fails"),
    pytest.param([("a", 3), ("b", 1), ("c", 1)], 3, True, id="-N3 -n5 (3,1,1): fails"),
    pytest.param([("a", 2), ("b", 2)], 2, False, id="2,2: runs"),
    pytest.param([("a", 3), ("b", 3)], 2, False, id="3,3: runs"),
    pytest.param([("a", 2), ("b", 1)], 2, False, id="-N2 -n3 (2,1): runs"),
    pytest.param([("a", 2), ("b", 1), ("c", 1)], 3, False, id="-N3 -n4 (2,1,1): runs"),
    pytest.param([("a", 1), ("b", 1), ("a", 1), ("b", 1)], 2, True,
                 id="cyclic 2+2: fails"),
    pytest.param([("a", 1), ("b", 1)], 2, False, id="one task a node"),
    pytest.param([("a", 4)], 1, False, id="one node"),
    pytest.param([("a", 3), ("b", 2), ("c", 2)], 3, False, id="7 on 3 (3,2,2): runs"),
])
def test_intel_groups_cross_nodes(runs, nodes, crosses):
    assert intel_groups_cross_nodes(runs, nodes) is crosses


@pytest.mark.parametrize("library, netmod", [
    pytest.param(MPICH, "ucx", id="PyPI's wheel: ucx first"),
    pytest.param(MPICH_OFI_FIRST, "ofi", id="ofi first"),
    pytest.param(MpiLibrary("MPICH Version: 4.1\nMPICH Device: ch3:nemesis\n"), None,
                 id="ch3: no netmod"),
    pytest.param(MpiLibrary("MPICH Version: 4.1\n"), None, id="no Device line"),
    pytest.param(MpiLibrary("MPICH Version: 4.1\nMPICH Device: ch4:ofi,ucx\n"), "ofi",
                 id="netmods listed with a comma"),
])
def test_mpich_default_netmod(library, netmod):
    assert mpich_default_netmod(library) == netmod


WARNS = "can hang in MPI_Init"


@pytest.mark.parametrize("env, library, warns", [
    pytest.param(step("3,1"), MPICH, True, id="MPICH ucx, 2 nodes: warned"),
    pytest.param(step("2(x3)", "n[1-3]"), MPICH, True, id="3 nodes: warned"),
    pytest.param(step("4", "node1"), MPICH, False, id="one node: no card goes through PMI"),
    pytest.param(step("3,1", MPIR_CVAR_CH4_NETMOD="ofi"), MPICH, False, id="netmod ofi"),
    pytest.param(step("3,1", MPIR_CVAR_CH4_NETMOD="OFI "), MPICH, False,
                 id="netmod ofi, any case"),
    pytest.param(step("3,1"), MPICH_OFI_FIRST, False, id="ofi by default"),
    pytest.param(step("3,1", MPIR_CVAR_CH4_NETMOD="ucx"), MPICH_OFI_FIRST, True,
                 id="ucx asked for"),
    pytest.param(step("3,1", MPIR_CVAR_PMI_VERSION="2"), MPICH, False,
                 id="PMI-2 asked for: no line limit"),
    pytest.param(step("3,1", MPIR_CVAR_PMI_VERSION=" 2\n"), MPICH, False,
                 id="PMI-2 asked for, blanks around"),
    pytest.param(step("3,1", MPIR_CVAR_PMI_VERSION="1"), MPICH, True,
                 id="PMI-1 asked for: warned"),
    pytest.param(step("3,1", MPIR_CVAR_PMI_VERSION=""), MPICH, True,
                 id="PMI version empty: its default, PMI-1"),
    pytest.param(step("3,1"), MPICH_SLURM_PMI, False, id="built with Slurm's PMI"),
    pytest.param(step("3,1"), MpiLibrary(MPICH.version.replace("--with-pm=hydra:gforker",
                                                               "--with-slurm")),
                 False, id="built --with-slurm"),
    pytest.param(step("3,1"), MpiLibrary("MPICH Version:      5.0.2\n"
                                         "MPICH Device:       ch4:ucx ofi\n"),
                 True, id="no configure line: its own PMI"),
    pytest.param(step("3,1"), INTEL, False, id="Intel MPI: not this fault"),
    pytest.param(step("3,1"), None, False, id="library unknown"),
    pytest.param({**step("3,1"), "PMIX_RANK": "0"}, MPICH, False, id="not pmi2"),
    pytest.param(step("x"), MPICH, False, id="malformed counts: no guess"),
])
def test_mpich_pmi1_line_limit_warning(env, library, warns):
    said = pmi1_warnings(detect_launch(env), library, env)
    assert bool(said) is warns
    if warns:
        assert len(said) == 1 and WARNS in said[0] and "MPIR_CVAR_CH4_NETMOD=ofi" in said[0]
        assert "MPICH Version: 5.0.2" in said[0] and "1,024" in said[0]


@pytest.mark.parametrize("env, says", [
    pytest.param(step("3,1"), "blocks (2,2 tasks per node), but Slurm placed them otherwise "
                 "(SLURM_STEP_TASKS_PER_NODE=3,1, distribution block)", id="3,1"),
    pytest.param(step("2(x2)", distribution="cyclic"), "(SLURM_STEP_TASKS_PER_NODE=2,2, "
                 "distribution cyclic)", id="cyclic 2,2"),
    pytest.param(step("5,1"), "blocks (3,3 tasks per node)", id="5,1"),
])
def test_intel_without_slurm_pmi_refused_where_placement_is_uneven(env, says):
    with pytest.raises(ResolutionError) as caught:
        check_intel_placement(detect_launch(env), INTEL, env)
    text = str(caught.value)
    assert says in text, text
    assert "I_MPI_PMI_LIBRARY" in text and "libpmi2.so" in text and "--mpi=pmix" in text
    assert "unable to allocate shared memory" in text


@pytest.mark.parametrize("env, library", [
    pytest.param(step("2(x2)"), INTEL, id="2,2 block: Intel's guess is right"),
    pytest.param(step("2,1"), INTEL, id="2,1: right too"),
    pytest.param(step("3,1", I_MPI_PMI_LIBRARY="/usr/lib/libpmi2.so"), INTEL,
                 id="Slurm's PMI-2 library"),
    pytest.param({**step("3,1"), "PMIX_RANK": "0"}, INTEL, id="srun --mpi=pmix"),
    pytest.param(step("3,1"), MPICH, id="MPICH reads PMI_process_mapping"),
    pytest.param(step("3,1"), None, id="library unknown"),
])
def test_intel_placement_passes(env, library):
    assert check_intel_placement(detect_launch(env), library, env) is None


@pytest.mark.parametrize("env", [
    pytest.param(step("2(x2)", distribution="plane=2"), id="plane=2, 2,2"),
    pytest.param(step("2,1", distribution="arbitrary"), id="arbitrary, 2,1"),
    pytest.param(step("2,1", nodes="node1"), id="counts of 2 nodes, 1 node named"),
])
def test_intel_placement_that_the_variables_do_not_tell_is_a_warning(env):
    said = check_intel_placement(detect_launch(env), INTEL, env)
    assert said == (
        "Intel(R) MPI Library 2021.18.1 for Linux* OS under srun --mpi=pmi2 without "
        "I_MPI_PMI_LIBRARY takes the ranks to be spread evenly in blocks over the nodes, "
        "which this distribution may not do; if MPI_Init fails, run with I_MPI_PMI_LIBRARY "
        "set to Slurm's PMI-2 library (e.g. /usr/lib/x86_64-linux-gnu/libpmi2.so.0 from "
        "Debian's libpmi2-0), or use srun --mpi=pmix.")


@pytest.mark.parametrize("env", [
    pytest.param(step("1,1", distribution="arbitrary"), id="arbitrary, one task a node"),
    pytest.param(step("4", distribution="arbitrary", nodes="node[1-2]"),
                 id="one count for 2 nodes"),
    pytest.param(step("x", distribution="arbitrary"), id="counts unreadable"),
])
def test_intel_placement_that_cannot_cross_nodes_is_not_warned(env):
    assert check_intel_placement(detect_launch(env), INTEL, env) is None


def test_plan_says_the_warnings_before_mpi_starts_and_keeps_them_in_the_notes():
    env = step("3,1")
    plan = make_plan(make_options(), env, library=lambda: MPICH)
    assert len(plan.warnings) == 1 and WARNS in plan.warnings[0]
    assert plan.notes == ()


def test_plan_refuses_intel_on_an_uneven_step_before_mpi_init():
    with pytest.raises(ResolutionError, match="I_MPI_PMI_LIBRARY"):
        make_plan(make_options(), step("3,1"), library=lambda: INTEL)


def test_plan_under_source_slurm_never_starts_mpi_so_says_nothing():
    plan = make_plan(make_options(source="slurm"), step("3,1"), library=lambda: INTEL)
    assert plan.warnings == () and not plan.use_mpi


def test_open_mpi_is_none_of_this():
    env = step("3,1")
    launch = detect_launch(env)
    assert pmi1_warnings(launch, OPEN_MPI, env) == []
    assert check_intel_placement(launch, OPEN_MPI, env) is None
