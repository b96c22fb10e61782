"""long_jobs.exits: the long job's exit statuses, and which mean "it would fail the same way:
do not restart, do not requeue", each side of every limit."""

from __future__ import annotations

import pytest

from mpi_resolver.core.errors import EX_CONFIG
from mpi_resolver.long_jobs import exits

pytestmark = pytest.mark.unit


def test_the_statuses_are_the_documented_ones() -> None:
    assert (exits.REQUEUE, exits.SAVE_FAILED, exits.TERMINATED, exits.HUNG, exits.CONFIG,
            exits.USAGE, exits.STOPPED) == (75, 74, 143, 124, 78, 2, 79)
    assert exits.CONFIG == EX_CONFIG  # one definition: the core's


@pytest.mark.parametrize("status, again", [
    (0, False), (1, False), (2, True), (3, False),
    (63, False), (64, True), (65, True), (73, True),
    (74, False),  # a failed save: supervise judges it by the progress made
    (75, False),  # run again
    (76, True), (77, True), (78, True),
    (79, True),  # supervise's own: no progress
    (80, False), (124, False), (137, False), (143, False),
])
def test_fails_again(status: int, again: bool) -> None:
    assert exits.fails_again(status) is again


@pytest.mark.parametrize("status, number", [
    (128, 0), (129, 1), (137, 9), (138, 10), (143, 15), (192, 64), (193, 0), (0, 0), (9, 0),
])
def test_killed_by(status: int, number: int) -> None:
    assert exits.killed_by(status) == number


def test_signal_status() -> None:
    assert exits.signal_status(9) == 137 and exits.signal_status(15) == exits.TERMINATED
