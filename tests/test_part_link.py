"""exchange.part_link on real MPI ranks (mpirun -n 3, no Slurm): parts around a ring, small
and past the eager limit, a transfer with nothing to send, one of empty parts, a part sent
from a file's read-only mapping into the buffer the receiver gives, a rank that comes late is
named (its receive and the send to it given up on, no wait past the deadline), and the
transfer after it is not confused by what was left."""

from __future__ import annotations

import json
import sys

import pytest

from tests.test_mpirun import mpirun

pytestmark = pytest.mark.mpirun


def test_parts_around_a_ring_and_a_late_rank_named() -> None:
    proc = mpirun(3, [sys.executable, "tests/mpi/part_link_run.py"], timeout=120)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    lines = [json.loads(x) for x in proc.stdout.splitlines() if x.startswith("{")]
    got = {(x["rank"], x["transfer"]): (x["received"], x["late"]) for x in lines}
    mb8 = 8 * 1024 * 1024
    assert got[(0, "ring")] == ({"2": [9, "part of 2"]}, [])
    assert got[(1, "ring")] == ({"0": [9, "part of 0"]}, [])
    assert got[(1, "big")] == ({"0": [mb8, "000000000000"]}, [])
    assert got[(0, "none")] == ({}, [])
    assert got[(0, "empty")] == ({"2": [0, ""]}, [])
    assert got[(2, "empty")] == ({"1": [0, ""]}, [])
    assert got[(1, "mapped")] == ({"0": [mb8, "M0M0M0M0M0M0"]}, [])
    mapped = {x["rank"]: (x["asked"], x["types"]) for x in lines if x["transfer"] == "mapped"}
    assert mapped[2] == ([[1, mb8]], ["mmap"])  # each part into the buffer ``into`` gave
    # rank 2 came 4 s late: rank 0 did not get its part, rank 1's send was not taken
    assert got[(0, "late")] == ({}, [2]) and got[(1, "late")] == ({"0": [mb8, "LLLLLLLLLLLL"]},
                                                                  [2])
    assert got[(0, "after")] == ({"2": [7, "after 2"]}, [])
    assert got[(2, "after")][0] == {"1": [7, "after 1"]}
