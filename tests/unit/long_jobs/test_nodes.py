"""long_jobs.nodes: which nodes a job leaves out (failed twice, or drained by the site), at
most its spare ones; which it excludes from the requeued job; --spare-nodes' checks."""

from __future__ import annotations

from typing import Dict, List, Optional

import pytest

from mpi_resolver.core.errors import FormatError
from mpi_resolver.long_jobs.nodes import (excludable, kept_in, lemons, left_out,
                                          parse_spare_nodes, unusable)

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("blamed, out", [
    ([], []),
    (["node2"], []),  # once: kept
    (["node2", "node2"], ["node2"]),  # twice: a lemon
    (["node2", "node1", "node2"], ["node2"]),
    (["node2", "node2", "node2"], ["node2"]),  # one entry
    (["node1", "node2", "node2", "node1"], ["node2", "node1"]),  # the first to get there first
])
def test_lemons(blamed: List[str], out: List[str]) -> None:
    assert lemons(blamed) == out


@pytest.mark.parametrize("blamed, drained, spare, out", [
    (["node2", "node2"], [], 1, ["node2"]),
    (["node2", "node2"], [], 0, []),  # no spare node: nothing can be left out
    (["node2", "node2"], [], -1, []),
    ([], ["node3"], 1, ["node3"]),  # drained by the site: at once
    (["node2", "node2"], ["node3"], 1, ["node3"]),  # drained first
    (["node2", "node2"], ["node3"], 2, ["node3", "node2"]),
    (["node2", "node2"], ["node2"], 2, ["node2"]),  # once
    (["node1", "node2", "node2", "node1"], [], 5, ["node2", "node1"]),
])
def test_left_out(blamed: List[str], drained: List[str], spare: int, out: List[str]) -> None:
    assert left_out(blamed, drained, spare) == out


TWICE = ["node2", "node2", "node3", "node3"]


@pytest.mark.parametrize("blamed, drained, spare, allocation, out, kept", [
    (TWICE, [], 2, None, ["node2", "node3"], []),  # the allocation not known: every one
    (TWICE, [], 2, ["node1", "node2", "node3"], ["node2", "node3"], []),
    (TWICE, [], 1, ["node1", "node2", "node3"], ["node2"], ["node3"]),  # one spare: the first
    (TWICE, [], 0, ["node1", "node2", "node3"], [], ["node2", "node3"]),
    (TWICE, [], -1, ["node1", "node2", "node3"], [], ["node2", "node3"]),
    (TWICE, [], 1, ["node1", "node3", "node4"], ["node3"], []),  # node2: not this allocation's
    (TWICE, [], 1, [], [], []),
    (TWICE, ["node4"], 1, ["node2", "node4"], ["node4"], ["node2"]),  # drained first
    (["node2"], [], 1, ["node1", "node2"], [], []),  # once: kept, not named
])
def test_left_out_and_kept_in_of_an_allocation(blamed: List[str], drained: List[str],
                                               spare: int, allocation: Optional[List[str]],
                                               out: List[str], kept: List[str]) -> None:
    assert left_out(blamed, drained, spare, allocation) == out
    assert kept_in(blamed, drained, spare, allocation) == kept


@pytest.mark.parametrize("states, out", [
    ({"n1": "IDLE", "n2": "ALLOCATED", "n3": "MIXED"}, []),
    ({"n1": "IDLE+DRAIN", "n2": "ALLOCATED+DRAIN", "n3": "MIXED+DRAINING"}, ["n1", "n2", "n3"]),
    ({"n1": "DOWN*", "n2": "DOWN+NOT_RESPONDING", "n3": "IDLE+NOT_RESPONDING"}, ["n1", "n2", "n3"]),
    ({"n1": "ALLOCATED+FAIL", "n2": "IDLE+REBOOT_REQUESTED", "n3": "drained"}, ["n1", "n2", "n3"]),
    ({"n1": "ALLOCATED+COMPLETING", "n2": "IDLE+RESERVED", "n3": "ALLOCATED+MAINT"}, []),
    ({"n1": "", "n2": "UNDRAIN"}, []),  # a flag, not a word inside one
    ({"n1": "IDLE*", "n2": "ALLOCATED*", "n3": "MIXED", "n4": "*IDLE"}, ["n1", "n2"]),
])
def test_unusable(states: Dict[str, str], out: List[str]) -> None:
    assert unusable(states) == out


@pytest.mark.parametrize("nodes, usable, job_nodes, out", [
    (["node2"], None, 2, []),  # the partition's size not known: nothing excluded
    (["node2"], 2, 2, []),  # no node to spare: a job excluded from one would never start
    (["node2"], 3, 2, ["node2"]),
    (["node2", "node3"], 3, 2, ["node2"]),
    (["node2", "node3"], 4, 2, ["node2", "node3"]),
    (["node2"], 1, 2, []),
])
def test_excludable(nodes: List[str], usable: Optional[int], job_nodes: int,
                    out: List[str]) -> None:
    assert excludable(nodes, usable, job_nodes) == out


@pytest.mark.parametrize("text, nodes, spare", [
    ("0", 2, 0), ("0", None, 0), ("1", 2, 1), ("2", 3, 2), (" 1 ", 3, 1),
])
def test_spare_nodes_accepted(text: str, nodes: Optional[int], spare: int) -> None:
    assert parse_spare_nodes(text, nodes) == spare


@pytest.mark.parametrize("text, nodes", [
    ("2", 2), ("3", 2), ("1", 1), ("1", None), ("-1", 3), ("one", 3), ("1.5", 3), ("", 3),
])
def test_spare_nodes_refused_naming_the_variable(text: str, nodes: Optional[int]) -> None:
    with pytest.raises(FormatError) as e:
        parse_spare_nodes(text, nodes)
    message = str(e.value)
    assert message.startswith(f"--spare-nodes {text!r} (the templates' SPARE_NODES): expected "
                              "a whole number of nodes, 0 or more and smaller than the job's "
                              f"nodes (SLURM_JOB_NUM_NODES: {nodes or 'unknown'})")
