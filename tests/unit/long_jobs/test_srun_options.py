"""srun's own options on a step's command line: the step's node count, its own exclusions,
the spare nodes, and the line with nodes left out."""

from __future__ import annotations

from typing import List, Optional, Sequence, Tuple

import pytest

from mpi_resolver.long_jobs.srun_options import job_nodes, read_srun

pytestmark = pytest.mark.unit

PROGRAM = ["python", "train.py"]


@pytest.mark.parametrize("argv", [[], ["mpirun", "-N", "2"], ["python", "srun"],
                                  ["srun-wrapper", "-N2"], ["/usr/bin/srunx"]])
def test_not_srun(argv: List[str]) -> None:
    assert read_srun(argv) is None


@pytest.mark.parametrize("options, nodes, excluded, names", [
    ([], None, (), False),
    (["-N2"], 2, (), False),
    (["-N", "2"], 2, (), False),
    (["--nodes=2"], 2, (), False),
    (["--nodes", "2"], 2, (), False),
    (["-N1-3"], 3, (), False),
    (["-N", "2-"], None, (), False),
    (["-Nx"], None, (), False),
    (["-N2", "-N3"], 3, (), False),  # the last one counts, as srun reads it
    (["-lN2"], 2, (), False),  # a cluster of short options
    (["-l", "-K", "-N2"], 2, (), False),  # -K takes no separate value
    (["-K1", "-N2"], 2, (), False),
    (["--mpi", "pmix", "-N2"], 2, (), False),  # a long option's value is not the program
    (["--label", "-N2"], 2, (), False),
    (["--kill-on-bad-exit=1", "--nodes=4"], 4, (), False),
    (["-n", "4", "-c", "2"], None, (), False),
    (["-x", "node3"], None, ("node3",), False),
    (["--exclude="], None, (), False),
    (["-x", "node3,,node4,"], None, ("node3", "node4"), False),
    (["-xnode3,node4", "-N2"], 2, ("node3", "node4"), False),
    (["--exclude=node3"], None, ("node3",), False),
    (["--exclude", "node3", "-x", "node4"], None, ("node3", "node4"), False),
    (["-w", "node1,node2"], None, (), True),
    (["--nodelist=node1"], None, (), True),
    (["-F", "nodes.txt"], None, (), True),
    (["--relative=1"], None, (), True),
    (["-r", "1"], None, (), True),
])
def test_read_srun(options: List[str], nodes: Optional[int], excluded: Tuple[str, ...],
                   names: bool) -> None:
    line = read_srun(["srun", *options, *PROGRAM, "-N", "9", "-x", "a", "--nodes=7", "-w"])
    assert line is not None
    assert (line.nodes, line.excluded, line.names_nodes) == (nodes, excluded, names)


@pytest.mark.parametrize("argv, options, program_at", [
    (["srun"], [], 1),
    (["srun", *PROGRAM], [], 1),
    (["srun", "-N2"], [("nodes", "2")], 2),
    (["srun", "-N"], [("nodes", None)], 2),  # a value missing at the end
    (["srun", "-N", "2"], [("nodes", "2")], 3),  # a value last
    (["srun", "--nodes", "2"], [("nodes", "2")], 3),
    (["srun", "--nodes"], [("nodes", None)], 2),
    (["srun", "-N", "2", *PROGRAM], [("nodes", "2")], 3),
    (["srun", "--nodes", "2", *PROGRAM], [("nodes", "2")], 3),
    (["srun", "--nodes=2", *PROGRAM], [("nodes", "2")], 2),
    (["srun", "--label", *PROGRAM], [("label", None)], 2),
    (["srun", "--label=", *PROGRAM], [("label", "")], 2),
    (["srun", "-l", "-N2", *PROGRAM], [("l", None), ("nodes", "2")], 3),
    (["srun", "-lu", "-n", "4", *PROGRAM], [("l", None), ("u", None), ("n", "4")], 4),
    (["srun", "-ln4", *PROGRAM], [("l", None), ("n", "4")], 2),
    (["srun", "-K", "-N2", *PROGRAM], [("K", None), ("nodes", "2")], 3),
    (["srun", "-K1", *PROGRAM], [("K", "1")], 2),
    (["srun", "-lK1", "-x", "n3", *PROGRAM], [("l", None), ("K", "1"), ("exclude", "n3")], 4),
    (["srun", "-N2", "--", *PROGRAM], [("nodes", "2")], 2),  # '--' ends srun's options
    (["srun", "-N2", "-", *PROGRAM], [("nodes", "2")], 2),
    (["srun", "--", "-N2"], [], 1),
    (["srun", "-", "-N2"], [], 1),
])
def test_srun_s_own_options_end_at_the_program(argv: List[str], options: List[Tuple],
                                               program_at: int) -> None:
    line = read_srun(argv)
    assert line is not None
    assert (list(line.options), line.program_at) == (options, program_at)


@pytest.mark.parametrize("options, job_nodes, spare", [
    (["-N2"], 3, 1),
    (["-N2"], 2, 0),  # the step needs every node
    (["-N2"], 1, 0),
    (["-N2"], 4, 2),
    (["-N2"], None, 0),  # SLURM_JOB_NUM_NODES unknown
    ([], 3, 0),  # no -N: the step takes every node of the job
    (["-N2", "-x", "node9"], 4, 1),  # its own exclusions count against the spares
    (["-N2", "-x", "node8,node9"], 4, 0),
    (["-N2", "-x", "node7,node8,node9"], 4, 0),
    (["-N2", "--exclude=./bad-nodes"], 4, 0),  # a file of nodes: unknown
    (["-N2", "-w", "node1,node2"], 4, 0),  # named nodes: none may be left out
])
def test_spare(options: List[str], job_nodes: Optional[int], spare: int) -> None:
    line = read_srun(["srun", *options, *PROGRAM])
    assert line is not None and line.spare(job_nodes) == spare


@pytest.mark.parametrize("argv, nodes, out", [
    (["srun", "-N2", *PROGRAM], [], ["srun", "-N2", *PROGRAM]),
    (["srun", "-N2", *PROGRAM], ["node2"], ["srun", "-N2", "--exclude=node2", *PROGRAM]),
    (["/usr/bin/srun", "-N2", *PROGRAM], ["n2", "n3"],
     ["/usr/bin/srun", "-N2", "--exclude=n2,n3", *PROGRAM]),
    (["srun", "-x", "node9", "-N2", *PROGRAM], ["node2"],
     ["srun", "-x", "node9", "-N2", "--exclude=node9,node2", *PROGRAM]),
    (["srun", "-lxnode9", "--exclude", "node8", *PROGRAM], ["node2"],
     ["srun", "-lxnode9", "--exclude", "node8", "--exclude=node9,node8,node2", *PROGRAM]),
    (["srun", "--exclude=node2", "-N2", *PROGRAM], ["node2"],
     ["srun", "--exclude=node2", "-N2", "--exclude=node2", *PROGRAM]),
    (["srun", "-N2", "--", *PROGRAM], ["node2"],
     ["srun", "-N2", "--exclude=node2", "--", *PROGRAM]),
    (["srun", "-N2", "python", "train.py", "-x", "node9"], ["node2"],
     ["srun", "-N2", "--exclude=node2", "python", "train.py", "-x", "node9"]),
    (["srun", "-N"], ["node2"], ["srun", "-N", "--exclude=node2"]),
    (["srun", "-x"], ["node2"], ["srun", "-x", "--exclude=node2"]),  # -x without a value
])
def test_leaving_out(argv: List[str], nodes: Sequence[str], out: List[str]) -> None:
    line = read_srun(argv)
    assert line is not None and line.leaving_out(nodes) == out


@pytest.mark.parametrize("env, nodes", [
    ({"SLURM_JOB_NUM_NODES": "3"}, 3), ({"SLURM_JOB_NUM_NODES": " 1 "}, 1),
    ({"SLURM_JOB_NUM_NODES": "0"}, 0), ({"SLURM_JOB_NUM_NODES": "two"}, None),
    ({"SLURM_JOB_NUM_NODES": "-1"}, None), ({}, None), ({"SLURM_NNODES": "3"}, None),
])
def test_job_nodes(env, nodes) -> None:
    assert job_nodes(env) == nodes


@pytest.mark.parametrize("env, nodelist", [
    ({"SLURM_JOB_NODELIST": "node[1-3]"}, "node[1-3]"), ({"SLURM_JOB_NODELIST": " "}, None),
    ({}, None),
])
def test_job_nodelist(env, nodelist) -> None:
    from mpi_resolver.long_jobs.srun_options import job_nodelist

    assert job_nodelist(env) == nodelist


@pytest.mark.parametrize("argv, count, out", [
    (["srun", "--mpi=pmix", "python", "t.py"], 2, ["srun", "--mpi=pmix", "--nodes=2", "python",
                                                   "t.py"]),
    (["srun", "python"], 1, ["srun", "--nodes=1", "python"]),
])
def test_with_nodes(argv, count, out) -> None:
    from mpi_resolver.long_jobs.srun_options import read_srun

    line = read_srun(argv)
    assert line is not None and line.with_nodes(count) == out


@pytest.mark.parametrize("argv, count, per_node, out", [
    (["srun", "python"], 2, 1, ["srun", "--nodes=2", "--ntasks=2", "python"]),
    (["srun", "python"], 2, 4, ["srun", "--nodes=2", "--ntasks=8", "python"]),
    (["srun", "-n", "3", "python"], 2, 4, ["srun", "-n", "3", "--nodes=2", "python"]),
    (["srun", "--ntasks=3", "python"], 2, 4, ["srun", "--ntasks=3", "--nodes=2", "python"]),
    (["srun", "python"], 2, None, ["srun", "--nodes=2", "python"]),
])
def test_with_nodes_and_their_tasks(argv, count, per_node, out) -> None:
    from mpi_resolver.long_jobs.srun_options import read_srun

    line = read_srun(argv)
    assert line is not None and line.with_nodes(count, per_node) == out


@pytest.mark.parametrize("env, per_node", [
    ({"SLURM_NTASKS_PER_NODE": "4"}, 4), ({"SLURM_NTASKS_PER_NODE": "2(x3)"}, None), ({}, None),
])
def test_tasks_per_node(env, per_node) -> None:
    from mpi_resolver.long_jobs.srun_options import tasks_per_node

    assert tasks_per_node(env) == per_node
