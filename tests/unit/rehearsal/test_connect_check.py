"""_connect_check: --connect's run on loopback for real (ports the system picks), ranks as
threads of one ThreadWorld for the MPI barriers and gather, and without MPI."""

from __future__ import annotations

import json
import socket
import threading
import time

import pytest

from mpi_resolver.rehearsal import connect_check as _connect_check
from mpi_resolver.rehearsal.connect_check import (CANNOT_LISTEN, ConnectReport, connect_check,
                                         node_ranks, run_connect)
from mpi_resolver.rehearsal.connect_probe import REFUSED, Failure
from mpi_resolver.placement.layout import build_layout_runs
from tests.unit.jobs import ThreadWorld, each_rank
from tests.unit.rehearsal.test_connect_probe import free_port

pytestmark = pytest.mark.unit


def loopback_layout(n: int):
    """Returns a layout of ``n`` ranks on 'localhost', each with a port the system picked."""
    ports = []
    while len(ports) < n:
        port = free_port()
        if port not in ports:
            ports.append(port)
    return build_layout_runs([("localhost", n)], jobs={"worker": n}, port_base=min(ports),
                             ports=ports)


@pytest.mark.parametrize("runs, expected", [
    pytest.param([("a", 2), ("b", 1)], [[0, 1], [2]], id="two nodes in rank order"),
    pytest.param([("a", 1), ("b", 1), ("a", 1)], [[0, 2], [1]],
                 id="a node met twice (cyclic): its ranks together"),
    pytest.param([("a", 1)], [[0]], id="one rank"),
])
def test_node_ranks(runs, expected):
    layout = build_layout_runs(runs, jobs={"worker": sum(n for _, n in runs)}, port_base=9000)
    assert node_ranks(layout) == expected


def test_every_rank_reaches_the_others_over_mpi():
    layout = loopback_layout(3)
    world = ThreadWorld(3)
    reports = each_rank(3, lambda r: connect_check(layout, r, "localhost", 2.0,
                                                   world.transport(r)))
    for report in reports:
        assert isinstance(report, ConnectReport), report
        assert (report.failures, report.connections, report.ranks, report.gathered) == (
            [], 3, 3, True)
        assert report.text().startswith("CONNECT OK: the job's 3 connection(s) among 3 rank(s)")


def test_a_port_held_elsewhere_is_reported_by_every_rank_once_gathered():
    """Rank 1's port is bound by another socket that does not listen: rank 1 cannot listen,
    and rank 0's dial to it is refused; both failures reach every rank."""
    layout = loopback_layout(2)
    holder = socket.socket()
    holder.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 0)
    holder.bind(("", layout.port_of(1)))
    world = ThreadWorld(2)
    try:
        reports = each_rank(2, lambda r: connect_check(layout, r, "localhost", 2.0,
                                                       world.transport(r)))
    finally:
        holder.close()
    for report in reports:
        kinds = sorted((f.from_rank, f.to_rank, f.kind) for f in report.failures)
        assert kinds == [(0, 1, REFUSED), (1, 1, CANNOT_LISTEN)], report
        text = report.text()
        assert text.startswith("CONNECT FAILED: 2 of the job's 2 connection(s)")
        assert f"localhost:{layout.port_of(1)}" in text and "--port-base" in text
    found = reports[0].as_json()
    assert found["ok"] is False and found["gathered"] is True and len(found["failures"]) == 2
    assert json.dumps(found)  # plain JSON


def test_without_mpi_a_peer_that_listens_late_is_tried_again():
    """No barrier without MPI: rank 0 is refused at first, then rank 1 listens 0.5 s later."""
    layout = loopback_layout(2)
    late = threading.Timer(0.5, lambda: held.append(_connect_check.listen(
        layout.addresses[1])))
    held: list = []
    late.start()
    try:
        report = connect_check(layout, 0, "localhost", 1.5, None)
    finally:
        late.cancel()
        for listener in held:
            listener.close()
    assert (report.failures, report.connections, report.gathered) == ([], 1, False)
    assert report.text().startswith("CONNECT OK: this rank's 1 connection(s)")


def test_without_mpi_a_peer_that_never_listens_is_refused_after_the_timeout():
    layout = loopback_layout(2)
    start = time.monotonic()
    report = connect_check(layout, 0, "localhost", 0.6, None)
    took = time.monotonic() - start
    assert [(f.to_rank, f.kind) for f in report.failures] == [(1, REFUSED)]
    assert took >= 1.2  # listened until twice the timeout, for peers that dial late


def test_run_connect_without_mpi_checks_this_rank_alone():
    layout = loopback_layout(1)
    report = run_connect(layout, 0, 0.3)
    assert (report.failures, report.connections, report.ranks, report.gathered) == (
        [], 1, 1, False)  # a rank alone dials its own address


def test_a_report_with_no_failures_says_ok_in_json():
    report = ConnectReport([], 4, 4, "every pair of nodes", 0.12345, True)
    assert report.as_json() == {"ok": True, "connections": 4, "ranks": 4,
                                "pattern": "every pair of nodes", "seconds": 0.123,
                                "gathered": True, "failures": []}
    failure = Failure(0, "node1", 3, "node2:8889", "timed out", "timed out", "check the firewall")
    failed = ConnectReport([failure], 4, 4, "every pair of nodes", 3.0, True)
    assert failed.as_json()["failures"] == [[0, "node1", 3, "node2:8889", "timed out",
                                            "timed out", "check the firewall"]]
    assert "TensorFlow's gRPC would wait for these for ever" in failed.text()
