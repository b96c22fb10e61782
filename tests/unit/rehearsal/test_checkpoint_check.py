"""check --checkpoint-dir: the pure parts as tables (the files' names and texts, errno kinds,
mount types, sizes, which files each node reads, the verdict and its report, each limit on
both sides), the file work for real on this machine's directories (missing, a file, read-only
and full file systems in a mount namespace of their own, another user without permission, a
file that appears late, a read that never returns), and the whole run with ranks as threads
of one ThreadWorld. The nodes' own /dev/shm (node-local for real) is in
tests/cluster/test_checkpoint_dir.py."""

from __future__ import annotations

import errno
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest

from mpi_resolver.rehearsal import checkpoint_probe as probe
from mpi_resolver.rehearsal.checkpoint_check import (ABSENT, ERROR, LAGGING, MISSING, NO_ACCESS,
                                            NO_SPACE, NODE_LOCAL, NOT_DIR, NOT_SHARED, OK,
                                            OTHER_PATH, READ_ONLY, SEEN, STUCK, UNREADABLE,
                                            WRONG, Read, Written, judge, kind_of,
                                            read_targets)
from mpi_resolver.rehearsal.checkpoint_report import Space
from mpi_resolver.rehearsal.checkpoint_files import (checkpoint_dir, content_problem, error_detail,
                                            file_name, file_text, hosts_text, job_step,
                                            mount_type, size_text, space_text)
from mpi_resolver.cli.args import parse_args
from mpi_resolver.core.errors import FormatError
from tests.harness.mutants import copy_mutmut, imports_mutmut
from tests.unit.jobs import ThreadWorld, each_rank

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[3]
GIB = 1 << 30
P = "/shared/ckpt"


def ok(rank: int, host: str, path: str = P, free: int = 52 * GIB, total: int = 252 * GIB,
       fstype: str = "nfs4") -> Written:
    """A rank that wrote its file in ``path``."""
    return Written(rank, host, path, OK, None, f".f{rank}", f"n{rank}", free, total, fstype)


def bad(rank: int, host: str, state: str, detail: str = "it failed") -> Written:
    return Written(rank, host, P, state, detail, None, f"n{rank}")


def seen(reader: int, writer: int, state: str = SEEN, waited: float = 0.1) -> Read:
    return Read(reader, writer, state, None if state in (SEEN, ABSENT) else "why", waited)


def report(written, reads=(), removals=None, gathered=True):
    return judge(written, list(reads), removals or [None] * len(written), gathered=gathered,
                 seconds=1.5)


# ------------------------------------------------------------------------ the argument
@pytest.mark.parametrize("text", ["", " ", "\t "])
def test_an_empty_checkpoint_dir_is_refused_naming_the_option(text, capsys):
    with pytest.raises(FormatError, match="an empty path"):
        checkpoint_dir(text)
    with pytest.raises(SystemExit) as done:
        parse_args(["check", "--checkpoint-dir", text])
    assert done.value.code == 2
    err = capsys.readouterr().err
    assert f"argument --checkpoint-dir: an empty path ({text!r}): give the directory" in err
    assert "$HOME/ckpt" in err


def test_a_relative_checkpoint_dir_becomes_absolute_and_tilde_is_home(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", "/home/u")
    assert checkpoint_dir(" x") == " x"
    assert parse_args(["check", "--checkpoint-dir", "ck"]).checkpoint_dir == \
        str(tmp_path / "ck")
    assert parse_args(["check", "--checkpoint-dir", "~/ck"]).checkpoint_dir == "/home/u/ck"
    assert parse_args(["check"]).checkpoint_dir is None
    with pytest.raises(SystemExit):
        parse_args(["show", "--checkpoint-dir", "ck"])  # check's option only


# ------------------------------------------------------------------ names, texts, errno
@pytest.mark.parametrize("env, expected", [
    pytest.param({"SLURM_JOB_ID": "42", "SLURM_STEP_ID": "3"}, "42.3", id="job and step"),
    pytest.param({}, "none.none", id="no Slurm (mpirun)"),
    pytest.param({"SLURM_JOB_ID": "", "SLURM_STEP_ID": "batch"}, "none.batch",
                 id="empty: none"),
    pytest.param({"SLURM_JOB_ID": "7/../x y", "SLURM_STEP_ID": "0"}, "7____x_y.0",
                 id="only letters, digits and _ in a file name"),
    pytest.param({"SLURM_JOB_ID": "7AZaz_", "SLURM_STEP_ID": "Batch"}, "7AZaz_.Batch",
                 id="letters of both cases kept"),
    pytest.param({"SLURM_JOB_ID": "1" * 20, "SLURM_STEP_ID": "2" * 21}, "1" * 20 + "." + "2" * 20,
                 id="20 characters kept, the 21st cut"),
])
def test_job_step(env, expected):
    assert job_step(env) == expected


def test_file_name_and_text():
    assert file_name("42.0", 3, "ab12") == ".mpi-resolver-check-42.0-3-ab12"
    text = file_text(3, "node2", "ab12")
    assert text == "mpi-resolver check --checkpoint-dir: rank 3 on node2, nonce ab12\n"
    assert content_problem(text, 3, "node2", "ab12") is None
    for other in (file_text(2, "node2", "ab12"), file_text(3, "node1", "ab12"),
                  file_text(3, "node2", "ab13"), text.strip()):
        assert content_problem(other, 3, "node2", "ab12") == \
            f"it reads {other!r}, written as {text!r}"


@pytest.mark.parametrize("length, shown", [(80, 80), (81, 80)])
def test_a_wrong_content_is_quoted_up_to_80_characters(length, shown):
    assert content_problem("x" * length, 0, "h", "n") == \
        f"it reads {'x' * shown!r}, written as {file_text(0, 'h', 'n')!r}"


@pytest.mark.parametrize("code, kind", [
    (errno.ENOENT, MISSING), (errno.ENOTDIR, NOT_DIR), (errno.EACCES, NO_ACCESS),
    (errno.EPERM, NO_ACCESS), (errno.EROFS, READ_ONLY), (errno.ENOSPC, NO_SPACE),
    (errno.EDQUOT, NO_SPACE), (errno.EIO, ERROR), (0, ERROR)])
def test_kind_of_each_errno(code, kind):
    assert kind_of(code) == kind


def test_error_detail_names_the_errno():
    assert error_detail("creating a file in it", errno.EROFS, "Read-only file system") == \
        "creating a file in it: Read-only file system (EROFS)"
    assert error_detail("x", 99999, "odd") == "x: odd (99999)"


# ------------------------------------------------------------------------- mount types
MOUNTINFO = """\
bad line without the separator, first
22 1 252:1 / / rw,relatime shared:1 - ext4 /dev/vda rw
45 22 0:55 / /dataX rw - xfs /dev/vdc rw
30 22 0:26 / /dev/shm rw,nosuid shared:2 - tmpfs tmpfs rw
40 22 0:50 / /scratch rw shared:9 - lustre 10.0.0.1@o2ib:/fs rw
41 40 0:51 / /scratch/my\\040dir rw shared:10 - nfs4 srv:/x rw
42 22 0:52 / /tmpx rw - xfs /dev/vdb rw
43 30 0:53 / /dev/shm rw - ramfs none rw
bad line without the separator
1 2 3 4 - short
44 22 0:54 / /empty rw -
"""


@pytest.mark.parametrize("path, kind", [
    pytest.param("/home/u/ckpt", "ext4", id="under / only"),
    pytest.param("/scratch/u/ckpt", "lustre", id="the longest mount point above it"),
    pytest.param("/scratch", "lustre", id="the mount point itself"),
    pytest.param("/scratch/my dir/ck", "nfs4", id="an escaped blank in the mount point"),
    pytest.param("/scratch/my dirx", "lustre", id="a longer name is not under the point"),
    pytest.param("/tmp/x", "ext4", id="/tmpx is no parent of /tmp"),
    pytest.param("/data/x", "ext4", id="/dataX is no parent of /data"),
    pytest.param("/dev/shm/x", "ramfs", id="a later mount at the same point hides the first"),
    pytest.param("/empty/x", "ext4", id="a line without a type is skipped"),
])
def test_mount_type(path, kind):
    assert mount_type(MOUNTINFO, path) == kind


def test_mount_type_where_no_line_says():
    assert mount_type("", "/x") is None
    assert mount_type("1 2 / /data - xfs /dev/x rw\n", "/data") is None  # 4 fields before -
    assert mount_type("1 2 3 / /data - xfs /dev/x rw\n", "/data") == "xfs"  # 5: read
    assert mount_type("1 2 3 / /data rw - xfs /dev/x rw\n", "/x") is None  # not under it


# ------------------------------------------------------------------------ sizes, hosts
@pytest.mark.parametrize("size, text", [
    (0, "0 B"), (999, "999 B"), (1000, "0.98 KiB"), (1024, "1.00 KiB"),
    (int(9.99 * GIB), "9.99 GiB"), (int(9.999 * GIB), "10.0 GiB"),
    (int(99.9 * GIB), "99.9 GiB"), (int(99.99 * GIB), "100 GiB"),
    (int(52.1 * GIB), "52.1 GiB"), (252 * GIB, "252 GiB"),
    (int(999.4 * GIB), "999 GiB"), (int(999.6 * GIB), "0.98 TiB"),
    (1 << 60, "1.00 EiB"), (2000 << 60, "2000 EiB"),
    # the limits themselves, exactly (9.995 and 99.95 are doubles that PiB hold exactly)
    (int(999.5 * GIB), "0.98 TiB"), (int(9.995 * (1 << 50)), "10.0 PiB"),
    (int(99.95 * (1 << 50)), "100 PiB"),
])
def test_size_text_three_digits_each_limit_both_sides(size, text):
    assert size_text(size) == text


def test_space_and_hosts_text():
    assert space_text(int(52.1 * GIB), 252 * GIB) == "52.1 GiB of 252 GiB"
    assert hosts_text([]) == ""
    assert hosts_text(["n1", "n2", "n3", "n4"]) == "n1, n2, n3, n4"
    assert hosts_text(["n1", "n2", "n3", "n4", "n5"]) == "n1, n2, n3, n4 +1 more"


# ------------------------------------------------------------------- who reads what
TWO_BY_TWO = [ok(0, "a"), ok(1, "a"), ok(2, "b"), ok(3, "b")]


@pytest.mark.parametrize("written, rank, targets", [
    pytest.param(TWO_BY_TWO, 0, [2], id="the first rank of a node reads the other's first"),
    pytest.param(TWO_BY_TWO, 2, [0], id="both ways"),
    pytest.param(TWO_BY_TWO, 1, [], id="other ranks read nothing"),
    pytest.param(TWO_BY_TWO, 3, [], id="other ranks read nothing (node b)"),
    pytest.param([ok(0, "a")], 0, [], id="one node: nobody to read"),
    pytest.param([bad(0, "a", MISSING), ok(1, "b")], 1, [], id="a node that wrote nothing "
                 "is not read"),
    pytest.param([bad(0, "a", MISSING), ok(1, "b")], 0, [], id="nor reads"),
    pytest.param([ok(0, "a"), ok(1, "b", path="/other")], 0, [], id="another path: not read"),
    pytest.param([ok(0, "a"), ok(1, "b", path="/other")], 1, [], id="another path: no reader"),
    pytest.param([ok(0, "a"), ok(1, "b"), ok(2, "a"), ok(3, "c")], 3, [0, 1],
                 id="cyclic placement: a node's first rank, in node order"),
])
def test_read_targets(written, rank, targets):
    assert [w.rank for w in read_targets(rank, written)] == targets


@pytest.mark.parametrize("nodes, count", [(64, 63), (65, 7)])
def test_read_targets_every_node_up_to_64_then_powers_of_two(nodes, count):
    written = [ok(r, f"n{r}") for r in range(nodes)]
    assert len(read_targets(0, written)) == count


# ---------------------------------------------------------------- the verdict: passes
def test_two_nodes_that_see_each_other_pass():
    found = report(TWO_BY_TWO, [seen(0, 2), seen(2, 0)])
    assert found.ok and found.nodes == ["a", "b"]
    assert found.text() == ("CHECKPOINT DIR OK: /shared/ckpt seen and written by all 2 nodes; "
                            "free space: 52.0 GiB of 252 GiB (a, b alike)")
    assert found.as_json() == {
        "ok": True, "path": P, "nodes": ["a", "b"], "gathered": True, "seconds": 1.5,
        "problems": [], "space": [{"free": 52 * GIB, "total": 252 * GIB, "hosts": ["a", "b"]}],
        "fstypes": {"a": "nfs4", "b": "nfs4"}, "notes": []}
    assert json.dumps(found.as_json())


def test_seconds_in_json_to_the_millisecond():
    assert judge([ok(0, "a")], [], [None], gathered=True, seconds=1.23456).as_json()[
        "seconds"] == 1.235


@pytest.mark.parametrize("nodes, last", [
    pytest.param(100, "free space: unknown", id="100 rows: all shown"),
    pytest.param(101, "... and 1 more rows", id="101: the first 100 and a line"),
])
def test_the_table_shows_100_rows(nodes, last):
    written = [bad(r, f"n{r}", ERROR, f"error {r}") for r in range(nodes)]
    lines = report(written).text().splitlines()
    assert lines[101] == "n99    error    error 99  check that file system on that node " \
                         "(`df /shared/ckpt`, `ls -ld /shared/ckpt`)"
    assert lines[102] == last and len(lines) == 103 + (nodes > 100)
    assert lines[-1] == "free space: unknown"


ALL_SEE = [seen(r, w) for r in range(4) for w in range(4) if r != w]
NONE_SEES = [seen(r, w, ABSENT) for r in range(4) for w in range(4) if r != w]
UNKNOWN_D = Written(3, "d", P, OK, None, ".f3", "n3", None, None, "nfs4")


@pytest.mark.parametrize("reads, space", [
    pytest.param(ALL_SEE, "52.0 GiB of 252 GiB (a, b, c, d alike)",
                 id="nodes that see each other's files: one file system, the first node's "
                    "figure (a write between two reads moved the others'), d's unknown too"),
    pytest.param(NONE_SEES, "52.0 GiB of 252 GiB (a); 52.1 GiB of 252 GiB (b); 1.00 GiB of "
                 "2.00 GiB (c)", id="node-local: each node's own figure, d's unknown left out"),
    pytest.param([seen(0, 1), seen(1, 0), seen(2, 3), seen(3, 2)],
                 "52.0 GiB of 252 GiB (a, b alike); 1.00 GiB of 2.00 GiB (c, d alike)",
                 id="two file systems: one figure each"),
])
def test_free_space_one_figure_per_file_system(reads, space):
    written = [ok(0, "a"), ok(1, "b", free=52 * GIB + 60 * (1 << 20)),
               ok(2, "c", free=GIB, total=2 * GIB), UNKNOWN_D]
    assert report(written, reads).text().splitlines()[-1].endswith(f"free space: {space}")


def test_a_node_that_could_not_write_keeps_its_own_figure():
    written = [ok(0, "a"), ok(1, "b"), Written(2, "c", P, NO_ACCESS, "denied", None, "n2",
                                               GIB, 2 * GIB, "nfs4")]
    reads = [seen(0, 1), seen(1, 0)]
    assert report(written, reads).space == [Space(52 * GIB, 252 * GIB, ["a", "b"]),
                                            Space(GIB, 2 * GIB, ["c"])]


def test_a_node_s_space_comes_from_its_first_rank_that_knows_it():
    written = [Written(0, "a", P, OK, None, ".f0", "n0", None, 5, "x"),
               Written(1, "a", P, OK, None, ".f1", "n1", 5, None, "x"), ok(2, "a", free=GIB)]
    assert report(written).space[0].free == GIB


def test_one_node_passes_with_a_note_and_a_local_file_system_is_named():
    found = report([ok(0, "a", fstype="tmpfs"), ok(1, "a", fstype="tmpfs")])
    assert found.ok
    assert found.text().splitlines() == [
        "CHECKPOINT DIR OK: /shared/ckpt written and read back on a, the job's one node; "
        "free space: 52.0 GiB of 252 GiB (a)",
        "note: the job has one node: whether other nodes (a requeued run may get others) see "
        "this directory is not checked",
        "note: it is on tmpfs on a, a file system of that node alone: other nodes would not "
        "see it"]
    assert len(report([ok(0, "a", fstype="nfs4")]).notes) == 1  # a shared type: no such note


def test_without_mpi_each_rank_says_it_checked_its_own_node():
    found = report([ok(0, "a", fstype="lustre")], gathered=False)
    assert found.ok and not found.gathered
    assert found.text().splitlines()[0] == (
        "CHECKPOINT DIR OK on this rank's node: /shared/ckpt written and read back on a; "
        "free space: 52.0 GiB of 252 GiB (a)")
    assert found.notes == ["without MPI (--source slurm) the ranks cannot compare what they "
                           "see: whether the other nodes see this directory is not checked "
                           "(run it under MPI, srun --mpi=pmix, for that)"]
    assert "ext4 on a" in report([ok(0, "a", fstype="ext4")], gathered=False).notes[1]
    failed = report([bad(0, "a", MISSING)], gathered=False)
    assert failed.text().startswith("CHECKPOINT DIR FAILED on this rank's node: /shared/ckpt: "
                                    "1 of 1 node cannot use it")


# ---------------------------------------------------------------- the verdict: failures
def test_node_local_each_node_its_own():
    written = [ok(0, "node1", fstype="tmpfs"), ok(1, "node2", fstype="tmpfs")]
    found = report(written, [seen(0, 1, ABSENT, 3.04), seen(1, 0, ABSENT, 2.5)])
    assert not found.ok
    [row] = found.problems
    assert (row.hosts, row.kind) == (["node1", "node2"], NODE_LOCAL)
    assert row.seen == ("each node has its own: no node sees the files written on the others "
                        "(waited 3.0 s; tmpfs)")
    assert "$HOME or the site's scratch" in row.fix
    lines = found.text().splitlines()
    assert lines[0] == ("CHECKPOINT DIR FAILED: /shared/ckpt: 2 of 2 nodes cannot use it as "
                        "the job's shared checkpoint directory:")
    assert lines[1].split() == ["nodes", "problem", "seen", "likely", "fix"]
    assert lines[2].startswith("node1, node2  node-local  each node has its own")
    assert lines[3] == "free space: 52.0 GiB of 252 GiB (node1, node2 alike)"
    assert found.as_json()["problems"] == [{"hosts": ["node1", "node2"], "problem": NODE_LOCAL,
                                            "seen": row.seen, "fix": row.fix}]


def test_node_local_names_every_type_and_unknown_ones():
    written = [ok(0, "a", fstype="ext4"), ok(1, "b", fstype="tmpfs"),
               Written(2, "c", P, OK, None, ".f2", "n2", 1, 2, None)]
    reads = [seen(r, w, ABSENT) for r in range(3) for w in range(3) if r != w]
    assert report(written, reads).problems[0].seen.endswith("(waited 0.1 s; ?, ext4, tmpfs)")


def test_a_node_without_the_shared_mount_is_not_shared():
    written = [ok(0, "a"), ok(1, "b"), ok(2, "c", fstype="ext4")]
    reads = [seen(0, 1), seen(1, 0), seen(0, 2, ABSENT, 2.0), seen(1, 2, ABSENT),
             seen(2, 0, ABSENT), seen(2, 1, ABSENT)]
    [row] = report(written, reads).problems
    assert (row.hosts, row.kind) == (["c"], NOT_SHARED)
    assert row.seen == ("not the directory of a, b: no files seen either way (waited 2.0 s; "
                        "ext4 there, nfs4 on a)")
    assert "findmnt -T /shared/ckpt" in row.fix


def groups_of(sizes):
    """Returns (written, reads) of nodes in groups of ``sizes`` that see within the group
    only; one rank a node, named a, b, c, ..."""
    group = [g for g, size in enumerate(sizes) for _ in range(size)]
    n = len(group)
    written = [ok(r, "abcdefgh"[r]) for r in range(n)]
    reads = [seen(r, w, SEEN if group[r] == group[w] else ABSENT)
             for r in range(n) for w in range(n) if r != w]
    return written, reads


@pytest.mark.parametrize("sizes, outside, shared", [
    pytest.param([2, 2], ["c", "d"], "a, b", id="a tie: the first group is the shared one"),
    pytest.param([2, 3], ["a", "b"], "c, d, e", id="the largest group, not the first"),
    pytest.param([1, 2], ["a"], "b, c", id="one node alone"),
])
def test_the_largest_group_is_the_shared_one(sizes, outside, shared):
    written, reads = groups_of(sizes)
    [row] = report(written, reads).problems
    assert row.hosts == outside and row.seen.startswith(f"not the directory of {shared}:")


def test_a_reader_that_does_not_see_a_file_the_others_see_lags():
    written = [ok(0, "a"), ok(1, "b"), ok(2, "c")]
    reads = [seen(r, w) for r in range(3) for w in range(3) if r != w and (r, w) != (0, 1)]
    [row] = report(written, reads + [seen(0, 1, ABSENT, 4.0)]).problems
    assert (row.hosts, row.kind) == (["a"], LAGGING)
    assert row.seen == "did not see the file of b within 4.0 s, though the others' were seen"
    assert "raise --timeout" in row.fix


def test_wrong_content_still_shares_the_directory_and_is_named():
    written = [ok(0, "a"), ok(1, "b")]
    found = report(written, [seen(0, 1, WRONG), seen(1, 0, ABSENT)])
    assert [(p.hosts, p.kind) for p in found.problems] == [(["b"], LAGGING), (["a"], WRONG)]
    assert found.problems[1].seen == "the file of b: why"


@pytest.mark.parametrize("state, fix", [
    (UNREADABLE, "permissions differ between the nodes"),
    (STUCK, "does not answer on that node"),
])
def test_a_read_that_fails_names_the_reader(state, fix):
    found = report([ok(0, "a"), ok(1, "b")], [seen(0, 1, state), seen(1, 0)])
    [row] = found.problems
    assert (row.hosts, row.kind, row.seen) == (["a"], state, "the file of b: why")
    assert fix in row.fix


@pytest.mark.parametrize("state, fix", [
    (MISSING, "`mkdir -p /shared/ckpt`, once, from any node"),
    (NOT_DIR, "point --checkpoint-dir at a directory"),
    (NO_ACCESS, "`ls -ld /shared/ckpt`"),
    (READ_ONLY, "read-only on that node"),
    (NO_SPACE, "is full"),
    (STUCK, "check `df /shared/ckpt` there"),
    (ERROR, "check that file system on that node"),
    (WRONG, "other data than was written"),
])
def test_each_local_problem_names_its_node_and_fix(state, fix):
    found = report([ok(0, "a"), ok(1, "a"), ok(2, "b"), bad(3, "b", state)],
                   [seen(0, 2), seen(2, 0)])
    [row] = found.problems
    assert (row.hosts, row.kind, row.seen) == (["b"], state, "it failed")
    assert fix in row.fix
    assert found.text().splitlines()[0].endswith(": 1 of 2 nodes cannot use it as the job's "
                                                 "shared checkpoint directory:")


def test_nodes_that_fail_alike_share_a_row_others_do_not():
    found = report([bad(0, "a", MISSING), bad(1, "b", MISSING), bad(2, "c", MISSING, "other"),
                    bad(3, "a", MISSING)])
    assert [(p.hosts, p.seen) for p in found.problems] == [(["a", "b"], "it failed"),
                                                           (["c"], "other")]
    assert found.text().endswith("free space: unknown")


def test_another_path_on_a_node():
    found = report([ok(0, "a"), ok(1, "b", path="/tmp/ck")])
    [row] = found.problems
    assert (row.hosts, row.kind) == (["b"], OTHER_PATH)
    assert row.seen == "the path is /tmp/ck there, /shared/ckpt on a"
    assert "absolute path" in row.fix


def test_a_reader_on_a_failed_node_is_left_out_of_the_groups():
    """b's first rank wrote and read a's file, but another rank of b failed: b is reported for
    that alone, and its read does not count in the groups."""
    found = report([ok(0, "a"), ok(1, "b"), bad(2, "b", NO_SPACE), ok(3, "c")],
                   [seen(1, 0, ABSENT), seen(0, 1), seen(0, 3), seen(3, 0)])
    assert [(p.hosts, p.kind) for p in found.problems] == [(["b"], NO_SPACE)]


@pytest.mark.parametrize("left, tail", [
    (1, "rank 0 on a: .f0: Permission denied"),
    (3, "rank 2 on a: .f2: Permission denied"),
    (4, "rank 2 on a: .f2: Permission denied; and 1 more"),
])
def test_files_that_could_not_be_removed_are_noted(left, tail):
    written = [ok(r, "a") for r in range(4)]
    removals = [f".f{r}: Permission denied" if r < left else None for r in range(4)]
    found = report(written, removals=removals)
    assert found.ok and found.notes[-1].endswith(tail)
    assert found.notes[-1].startswith("files left behind in the directory (could not be "
                                      "removed): rank 0 on a: ")


# ----------------------------------------------------------- the file work, for real
def test_write_own_in_a_directory_then_the_reads(tmp_path):
    w = probe.write_own(str(tmp_path), 3, "h", "1.0", "ab")
    assert (w.state, w.detail, w.name) == (OK, None, ".mpi-resolver-check-1.0-3-ab")
    assert (tmp_path / w.name).read_text() == file_text(3, "h", "ab")
    assert w.total >= w.free > 0 and w.fstype  # this machine's file system, by its type
    found: dict = {}
    probe.poll(str(tmp_path), 0, [w], time.monotonic() + 1, found)
    assert found[3].state == SEEN and found[3].waited < 1


def test_write_own_where_the_directory_is_missing_or_a_file(tmp_path):
    missing = probe.write_own(str(tmp_path / "no"), 0, "h", "j", "n")
    assert (missing.state, missing.name, missing.free) == (MISSING, None, None)
    assert missing.detail == "looking it up: No such file or directory (ENOENT)"
    (tmp_path / "f").write_text("")
    assert probe.write_own(str(tmp_path / "f"), 0, "h", "j", "n").state == NOT_DIR
    under = probe.write_own(str(tmp_path / "f" / "d"), 0, "h", "j", "n")
    assert (under.state, under.detail) == (NOT_DIR, "looking it up: Not a directory (ENOTDIR)")


def test_write_own_names_a_file_that_already_exists(tmp_path):
    (tmp_path / file_name("j", 0, "n")).write_text("x")
    w = probe.write_own(str(tmp_path), 0, "h", "j", "n")
    assert (w.state, w.name) == (ERROR, None)
    assert w.detail == "creating a file in it: File exists (EEXIST)"


def test_write_own_that_reads_back_other_data(tmp_path, monkeypatch):
    monkeypatch.setattr(probe, "_read", lambda path: "garbled")
    w = probe.write_own(str(tmp_path), 0, "h", "j", "n")
    assert (w.state, w.name) == (WRONG, ".mpi-resolver-check-j-0-n")
    assert w.detail.startswith("it reads 'garbled'")


def _in_own_mount(directory: Path, setup: str, code: str) -> str:
    """Returns the output of Python ``code`` (given ``directory`` as its argument) run after
    the shell ``setup`` (mounts, $D the directory) in a mount namespace of its own (root:
    these tests run as root, as the cluster's do)."""
    script = (f"D={shlex.quote(str(directory))}\n{setup}\n"
              f"exec {shlex.quote(sys.executable)} -c {shlex.quote(code)} \"$D\"")
    proc = subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-ec",
                           script], capture_output=True, text=True, timeout=60, cwd=ROOT,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


WRITE = ("from mpi_resolver.rehearsal.checkpoint_probe import write_own\n"
         "import json, os, sys; d = sys.argv[1]\n"
         "w = write_own(d, 0, 'h', 'j', 'n'); print(json.dumps(w.as_json()))\n"
         "print(json.dumps(sorted(os.listdir(d))))")


def written_in(out: str):
    """Returns (the Written, the directory's files after) that WRITE printed."""
    first, files = out.splitlines()
    return Written.from_json(json.loads(first)), json.loads(files)


def test_a_read_only_file_system_is_read_only(tmp_path):
    out = _in_own_mount(tmp_path, 'mount --bind "$D" "$D"; mount -o remount,bind,ro "$D"',
                        WRITE)
    w, files = written_in(out)
    assert files == []
    assert (w.state, w.detail) == (READ_ONLY, "creating a file in it: Read-only file system "
                                               "(EROFS)")
    assert w.free is not None and w.path == str(tmp_path)


def test_a_full_file_system_has_no_space(tmp_path):
    out = _in_own_mount(tmp_path, 'mount -t tmpfs -o size=4k t "$D"; '
                        'head -c 4096 /dev/zero > "$D/fill" || true', WRITE)
    w, files = written_in(out)
    assert (w.state, w.fstype, w.name, w.free) == (NO_SPACE, "tmpfs", None, 0)
    assert w.detail == "creating a file in it: No space left on device (ENOSPC)"
    assert files == ["fill"]  # the file it began is removed


def test_another_user_cannot_write_there():
    """As root every permission is granted: the write runs as nobody (setpriv), in a
    directory of root's that everyone may look into (pytest's tmp_path is root's alone), with
    a copy of the package that nobody may read (the checkout may sit where only root may
    enter, as in root's home)."""
    directory = tempfile.mkdtemp(prefix="mpir-ckpt-")
    package = tempfile.mkdtemp(prefix="mpir-pkg-")
    os.chmod(directory, 0o755)
    os.chmod(package, 0o755)
    shutil.copytree(ROOT / "mpi_resolver", os.path.join(package, "mpi_resolver"),
                    ignore=shutil.ignore_patterns("__pycache__"))
    # mutmut's copy of the package finds its settings in the working directory's file
    shutil.copy(ROOT / "pyproject.toml", package)
    if imports_mutmut(ROOT / "mpi_resolver"):  # mutmut's copy: nobody cannot enter .venv
        copy_mutmut(package)
    try:
        proc = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                               sys.executable, "-c", WRITE, directory],
                              capture_output=True, text=True, timeout=60, cwd=package,
                              env={**os.environ, "PYTHONPATH": package,
                                   "PYTHONDONTWRITEBYTECODE": "1"})
    finally:
        os.rmdir(directory)
        shutil.rmtree(package)
    assert proc.returncode == 0, proc.stderr
    w, files = written_in(proc.stdout)
    assert files == []
    assert (w.state, w.detail) == (NO_ACCESS, "creating a file in it: Permission denied "
                                              "(EACCES)")


class _Clock:
    """The probe's clock: sleeping moves it on, and the file ``late`` comes once 0.4 s have
    passed (a thread's timer raced the probe's own start on a loaded machine)."""

    def __init__(self, folder: Path) -> None:
        self.now, self.folder, self.sleeps = 100.0, folder, []

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds
        if self.now >= 100.4 and not (self.folder / "late").exists():
            (self.folder / "late").write_text(file_text(5, "h", "n"))


def test_poll_sees_a_file_that_comes_late_and_gives_up_on_one_that_never_does(tmp_path,
                                                                               monkeypatch):
    late = Written(5, "h", str(tmp_path), OK, name="late", nonce="n")
    never = Written(6, "h", str(tmp_path), OK, name="never", nonce="n")
    clock = _Clock(tmp_path)
    monkeypatch.setattr(probe, "time", clock)
    found: dict = {}
    probe.poll(str(tmp_path), 0, [late, never], 101.2, found)
    # looks at 0, 0.05, 0.15, 0.35 and 0.75 s (doubling), then once more at the deadline
    assert clock.sleeps == pytest.approx([0.05, 0.1, 0.2, 0.4, 0.45])
    assert (found[5].state, found[5].waited) == (SEEN, 0.75)
    assert (found[6].state, found[6].waited) == (ABSENT, 1.2)


def test_poll_looks_once_however_late(tmp_path):
    (tmp_path / "x").write_text("other")
    found: dict = {}
    w = Written(1, "h", str(tmp_path), OK, name="x", nonce="n")
    probe.poll(str(tmp_path), 0, [w], time.monotonic() - 5, found)
    assert found[1].state == WRONG and found[1].detail.startswith("it reads 'other'")


def test_poll_stops_at_a_file_it_cannot_read(tmp_path):
    (tmp_path / "x").mkdir()  # a directory where the file should be: EISDIR
    found: dict = {}
    start = time.monotonic()
    probe.poll(str(tmp_path), 0, [Written(1, "h", str(tmp_path), OK, name="x")],
               start + 5, found)
    assert time.monotonic() - start < 1
    assert (found[1].state, found[1].detail) == (
        UNREADABLE, "reading it: Is a directory (EISDIR)")


def test_a_read_that_never_returns_is_stuck(tmp_path):
    """A FIFO where the file should be: opening it waits for a writer for ever, as a read on
    a hung network mount does; the reader gives up at the deadline and _GRACE."""
    os.mkfifo(tmp_path / "x")
    written = [ok(0, "a", path=str(tmp_path)), Written(1, "b", str(tmp_path), OK, name="x",
                                                        nonce="n")]
    start = time.monotonic()
    [read] = probe._read_others(str(tmp_path), 0, written, start + 0.3)
    took = time.monotonic() - start
    assert read.state == STUCK and read.detail == f"no answer within {read.waited:.1f} s"
    assert 1.2 <= took < 2.5  # 0.3 s and the second of grace
    with open(tmp_path / "x", "w"):  # lets the stuck thread go
        pass


def test_bounded_returns_raises_or_gives_up():
    assert probe.bounded(lambda: 7, time.monotonic() + 1) == 7
    with pytest.raises(OSError):
        probe.bounded(lambda: os.stat("/no/such/path"), time.monotonic() + 1)
    release = threading.Event()
    start = time.monotonic()
    assert probe.bounded(release.wait, start + 0.2) is probe.NOT_DONE
    assert time.monotonic() - start < 1
    release.set()


def test_remove(tmp_path, monkeypatch):
    (tmp_path / "f").write_text("")
    w = Written(0, "h", str(tmp_path), OK, name="f")
    assert probe._remove(w, 5) is None and not (tmp_path / "f").exists()
    assert probe._remove(w, 5) is None  # already gone: nothing to say
    assert probe._remove(Written(0, "h", str(tmp_path), MISSING), 5) is None  # none written

    def refuse(path):
        raise PermissionError(errno.EPERM, "Operation not permitted")

    monkeypatch.setattr(probe.os, "unlink", refuse)
    assert probe._remove(w, 5) == "f: Operation not permitted"
    release = threading.Event()
    monkeypatch.setattr(probe.os, "unlink", lambda path: release.wait())
    monkeypatch.setattr(probe, "_REMOVE", 0.2)
    assert probe._remove(w, 5) == "f: no answer within 0.2 s"
    assert probe._remove(w, 0.1) == "f: no answer within 0.1 s"  # the timeout, when shorter
    release.set()


# -------------------------------------------------------------------- the whole run
def test_without_mpi_a_rank_writes_reads_back_and_removes(tmp_path):
    found = probe.checkpoint_check(str(tmp_path), ["a", "b"], 1, "9.0", 5, None)
    assert found.ok and not found.gathered and found.nodes == ["b"]
    assert list(tmp_path.iterdir()) == []
    missing = probe.checkpoint_check(str(tmp_path / "x"), ["a"], 0, "9.0", 5, None)
    assert [p.kind for p in missing.problems] == [MISSING]


def test_a_write_that_never_returns_is_stuck_within_the_timeout(tmp_path, monkeypatch):
    release = threading.Event()
    monkeypatch.setattr(probe, "write_own", lambda *a: release.wait())
    start = time.monotonic()
    found = probe.checkpoint_check(str(tmp_path), ["a"], 0, "9.0", 0.3, None)
    assert time.monotonic() - start < 1.5
    [row] = found.problems
    assert (row.kind, row.seen) == (STUCK, "no answer within 0.3 s")
    release.set()


def run_threads(path: str, hosts, timeout: float = 5.0):
    world = ThreadWorld(len(hosts))
    return each_rank(len(hosts), lambda r: probe.checkpoint_check(
        path, hosts, r, "42.0", timeout, world.transport(r)))


def test_ranks_over_mpi_see_a_shared_directory(tmp_path):
    reports = run_threads(str(tmp_path), ["a", "a", "b", "b"])
    for found in reports:
        assert found.ok and found.gathered and found.nodes == ["a", "b"], found
        assert found.text().startswith(f"CHECKPOINT DIR OK: {tmp_path} seen and written by "
                                       "all 2 nodes; free space: ")
    assert list(tmp_path.iterdir()) == []  # every rank removed its own file


def test_ranks_over_mpi_report_a_missing_directory_once_for_each_node(tmp_path):
    reports = run_threads(str(tmp_path / "no"), ["a", "b", "b"])
    found = reports[0]
    assert [(p.hosts, p.kind) for p in found.problems] == [(["a", "b"], MISSING)]
    assert found.text().startswith(f"CHECKPOINT DIR FAILED: {tmp_path}/no: 2 of 2 nodes")
    assert [r.as_json() for r in reports[1:]] == [
        {**found.as_json(), "seconds": r.as_json()["seconds"]} for r in reports[1:]]


def test_ranks_over_mpi_name_a_node_whose_file_cannot_be_read(tmp_path, monkeypatch):
    """Node b's files turn into directories as soon as written: a reads b's and cannot."""
    real = probe.write_own

    def write(path, rank, host, job, nonce):
        w = real(path, rank, host, job, nonce)
        if host == "b":
            os.unlink(os.path.join(path, w.name))
            os.mkdir(os.path.join(path, w.name))
        return w

    monkeypatch.setattr(probe, "write_own", write)
    found = run_threads(str(tmp_path), ["a", "b"])[1]
    assert [(p.hosts, p.kind) for p in found.problems] == [(["a"], UNREADABLE)]
    assert any("could not be removed" in n and "rank 1 on b" in n for n in found.notes)


# ------------------------------------------------------------------- the command line
from mpi_resolver.cli import main as cli  # noqa: E402
from mpi_resolver.rehearsal.connect_check import ConnectReport  # noqa: E402
from tests.unit.cli.test_main import STEP, run  # noqa: E402
from tests.unit.rehearsal.test_connect_probe import free_port  # noqa: E402

#: One task on this machine (by the name localhost): --connect dials its own address.
ONE = {**STEP, "SLURM_STEP_NUM_TASKS": "1", "SLURM_STEP_TASKS_PER_NODE": "1",
       "SLURM_GTIDS": "0", "SLURM_STEP_NODELIST": "localhost", "SLURMD_NODENAME": "localhost"}


def check(monkeypatch, capsys, env, *args):
    return run(monkeypatch, capsys, env, "check", "--gpus-per-node", "0", *args)


def test_cli_without_mpi_checks_this_rank_s_node(monkeypatch, capsys, tmp_path):
    status, out = check(monkeypatch, capsys, STEP, "--checkpoint-dir", str(tmp_path))
    assert status == 0, out
    assert f"\nCHECKPOINT DIR OK on this rank's node: {tmp_path} written and read back on " \
        "node1; free space: " in out
    assert "note: without MPI (--source slurm) the ranks cannot compare" in out
    assert list(tmp_path.iterdir()) == []


def test_cli_a_missing_directory_fails_with_the_table(monkeypatch, capsys, tmp_path):
    status, out = check(monkeypatch, capsys, STEP, "--checkpoint-dir", str(tmp_path / "no"))
    assert status == 1
    table = out[out.index("CHECKPOINT DIR FAILED on this rank's node"):].splitlines()
    assert table[2].split()[:3] == ["node1", "missing", "looking"]
    assert f"mkdir -p {tmp_path}/no" in table[2]


def test_cli_json_carries_the_checkpoint_dir(monkeypatch, capsys, tmp_path):
    status, out = check(monkeypatch, capsys, STEP, "--json", "--checkpoint-dir",
                        str(tmp_path / "no"))
    found = json.loads(out)
    assert status == 1 and found["connect"] is None and found["deep"] is None
    assert found["checkpoint_dir"]["ok"] is False
    assert found["checkpoint_dir"]["problems"][0]["problem"] == MISSING
    assert json.loads(cli._report_check(None, [], None, True, None))["checkpoint_dir"] is None


@pytest.mark.parametrize("directory, printed", [
    pytest.param("no", "rank 1: CHECKPOINT DIR FAILED on this rank's node: ", id="a failure"),
    pytest.param(".", "", id="nothing where it passed"),
])
def test_cli_other_ranks_print_their_own_failure_only(monkeypatch, capsys, tmp_path,
                                                      directory, printed):
    env = {**STEP, "SLURM_PROCID": "1", "SLURM_LOCALID": "1"}
    status, out = check(monkeypatch, capsys, env, "--checkpoint-dir",
                        str(tmp_path / directory))
    assert status == (1 if printed else 0)
    assert out.startswith(printed) and (out == "" or out.count("CHECKPOINT DIR") == 1)


def test_cli_checkpoint_dir_before_connect(monkeypatch, capsys, tmp_path):
    status, out = check(monkeypatch, capsys, ONE, "--checkpoint-dir", str(tmp_path),
                        "--connect", "--timeout", "0.3", "--port-base", str(free_port()))
    assert status == 0, out
    assert out.index("CHECKPOINT DIR OK") < out.index("CONNECT OK")


def test_cli_a_failed_checkpoint_dir_fails_a_good_connect(monkeypatch, capsys, tmp_path):
    status, out = check(monkeypatch, capsys, ONE, "--checkpoint-dir", str(tmp_path / "no"),
                        "--connect", "--timeout", "0.3", "--port-base", str(free_port()))
    assert status == 1 and "CONNECT OK" in out and "CHECKPOINT DIR FAILED" in out


def test_status_of_the_rehearsals(monkeypatch):
    exits: list = []
    monkeypatch.setattr(cli.os, "_exit", exits.append)
    passed = report([ok(0, "a")], gathered=False)
    failed = report([bad(0, "a", MISSING)], gathered=False)
    connected = ConnectReport([], 1, 1, "a ring", 0.1, False)
    assert cli._status(checkpoint=passed, connect=connected) == 0
    assert cli._status(checkpoint=failed, connect=connected) == 1
    assert cli._status(checkpoint=passed, connect=ConnectReport(
        [object()], 1, 1, "a ring", 0.1, False)) == 1  # type: ignore[list-item]
    assert exits == []
