"""long_jobs.slurm_nodes: scontrol's node lines read (states, partitions), the requeued
job's ExcNodeList merged and updated, each call through a stand-in scontrol; never raises."""

from __future__ import annotations

import subprocess
from typing import List, Optional, Sequence

import pytest

from mpi_resolver.long_jobs import slurm_nodes as sn
from mpi_resolver.long_jobs.requeue import SCONTROL_TIMEOUT

pytestmark = pytest.mark.unit

NODES = """\
NodeName=node1 Arch=x86_64 CoresPerSocket=1 State=ALLOCATED Partitions=debug,long
NodeName=node2 Arch=x86_64 CoresPerSocket=1 State=IDLE+DRAIN Partitions=debug Reason=bad
NodeName=node3 Arch=x86_64 CoresPerSocket=1 State=IDLE Partitions=debug
NodeName=node4 Arch=x86_64 CoresPerSocket=1 State=DOWN* Partitions=long
NodeName=node5 Arch=x86_64 CoresPerSocket=1 State=IDLE* Partitions=debug,long
NodeName=node6 Arch=x86_64 CoresPerSocket=1
"""


class Scontrol:
    """A stand-in runner: answers by the first word(s) of the call, records every call."""

    def __init__(self, answers, error: Optional[BaseException] = None) -> None:
        self.answers, self.error = answers, error
        self.calls: List[List[str]] = []
        self.timeouts: List[float] = []

    def __call__(self, args: Sequence[str], timeout: float):
        self.calls.append(list(args))
        self.timeouts.append(timeout)
        if self.error is not None:
            raise self.error
        code, out = self.answers.get(args[0], (0, ""))
        return subprocess.CompletedProcess(args, code, out if code == 0 else "",
                                           "" if code == 0 else out)


def test_read_nodes() -> None:
    nodes = sn.read_nodes(NODES + "\nnot a node line\n")
    assert list(nodes) == ["node1", "node2", "node3", "node4", "node5", "node6"]
    assert nodes["node2"]["State"] == "IDLE+DRAIN"


@pytest.mark.parametrize("partition, usable", [("debug", 2), ("long", 1), ("gpu", 0)])
def test_usable_in(partition: str, usable: int) -> None:
    assert sn.usable_in(sn.read_nodes(NODES), partition) == usable


@pytest.mark.parametrize("current, nodes, merged", [
    ("(null)", ["node2"], "node2"), ("", ["node2"], "node2"),
    ("node5", ["node2"], "node5,node2"), ("node2", ["node2", "node3"], "node2,node3"),
    ("node5,node6", ["node6", "node2"], "node5,node6,node2"),
])
def test_merged_exclusions(current: str, nodes: List[str], merged: str) -> None:
    assert sn.merged_exclusions(current, nodes) == merged


def test_node_states_and_drained() -> None:
    run = Scontrol({"show": (0, NODES)})
    states = sn.node_states("node[1-6]", run)
    assert run.calls == [["show", "node", "-o", "node[1-6]"]]
    assert states is not None and states["node6"] == ""  # no State: not taken as unusable
    assert sn.drained(states) == ["node2", "node4", "node5"]
    assert sn.drained(None) == []


@pytest.mark.parametrize("run", [Scontrol({"show": (1, "Invalid node name")}),
                                 Scontrol({}, error=FileNotFoundError()),
                                 Scontrol({}, error=subprocess.TimeoutExpired("scontrol", 1))])
def test_scontrol_that_cannot_say_is_none(run: Scontrol) -> None:
    assert sn.node_states("node1", run) is None
    assert sn.partition_usable("debug", run) is None
    assert sn.job_partition("12", run) is None


def test_partition_usable_and_job_partition() -> None:
    run = Scontrol({"show": (0, NODES)})
    assert sn.partition_usable("debug", run) == 2  # node1, node3 (node6 is in none)
    assert run.calls == [["show", "node", "-o"]]
    run = Scontrol({"show": (0, "JobId=12 JobState=PENDING Partition=debug ExcNodeList=(null)")})
    assert sn.job_partition("12", run) == "debug"
    assert run.calls == [["show", "job", "-o", "12"]]
    assert sn.job_partition("12", Scontrol({"show": (0, "JobId=12 Partition=")})) is None


def test_every_question_waits_its_timeout_and_an_update_longer() -> None:
    run = Scontrol({"show": (0, NODES), "update": (0, "")})
    sn.node_states("node1", run)
    sn.partition_usable("debug", run)
    sn.current_exclusions("12", run)
    sn.job_partition("12", run)
    sn.exclude("12", "node2", run)
    assert run.timeouts == [sn.SHOW_TIMEOUT] * 4 + [SCONTROL_TIMEOUT]
    assert (sn.SHOW_TIMEOUT, SCONTROL_TIMEOUT) == (10.0, 30.0)
    sn.node_states("node1", run, timeout=2.5)
    assert run.timeouts[-1] == 2.5


def test_the_job_s_own_exclusions_are_read_and_kept() -> None:
    run = Scontrol({"show": (0, "JobId=12 JobState=RUNNING ExcNodeList=node5")})
    assert sn.current_exclusions("12", run) == "node5"
    assert run.calls == [["show", "job", "-o", "12"]]
    assert sn.current_exclusions("12", Scontrol({"show": (0, "JobId=12 ExcNodeList=(null)")})) \
        == ""
    assert sn.current_exclusions("12", Scontrol({}, error=OSError("no scontrol"))) == ""


def test_exclude_sets_the_pending_job_s_list() -> None:
    run = Scontrol({"update": (0, "")})
    assert sn.exclude("12", "node5,node2", run) == (
        True, "scontrol update JobId=12 ExcNodeList=node5,node2")
    assert run.calls == [["update", "JobId=12", "ExcNodeList=node5,node2"]]


def test_an_exclusion_that_fails_says_scontrol_s_words() -> None:
    run = Scontrol({"update": (1, "Job is no longer pending execution for job 12")})
    assert sn.exclude("12", "node2", run) == (
        False, "scontrol update JobId=12 ExcNodeList=node2 failed (exit 1: Job is no longer "
               "pending execution for job 12)")
    assert sn.exclude("12", "node2", Scontrol({}, error=OSError("no scontrol")))[0] is False
