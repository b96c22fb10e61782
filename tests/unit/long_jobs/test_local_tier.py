"""long_jobs.local_tier, a node's local directory of parts, on real files: made where its
parent is there (refused, naming the path, where it is not or cannot be written), each node's
marker, a part whole or not there (written, placed from the file an edge packed, received
into its file), mapped without a copy, the parts found, the older steps removed, the scratch
directories and packed parts of a process's own and those a killed one left removed."""

from __future__ import annotations

import mmap
import os
from pathlib import Path
from typing import Any, List

import pytest

from mpi_resolver.core.errors import ConfigurationError
from mpi_resolver.long_jobs import local_tier
from mpi_resolver.long_jobs.local_tier import PACKED, LocalTier

pytestmark = pytest.mark.unit

NAME = "MPI_RESOLVER_LOCAL_DIR"


def tier(path: Path, node: str = "node1") -> LocalTier:
    t = LocalTier(str(path), node, NAME)
    t.open()
    return t


def test_open_makes_the_directory_and_leaves_the_node_s_marker(tmp_path: Path) -> None:
    one = tier(tmp_path / "local")
    assert one.markers() == ["node1"] and one.found() == {}
    tier(tmp_path / "local", "node2")  # the same path on another node: both markers seen
    assert one.markers() == ["node1", "node2"]
    assert one.free() > 0


def test_each_scratch_is_its_own_and_open_removes_those_left(tmp_path: Path) -> None:
    """A scratch is this process's, named anew each time, not made; the next open removes
    the scratch directories left (a process killed while packing), and nothing else."""
    t = tier(tmp_path / "local")
    first, second = t.scratch(), t.scratch()
    assert first != second and not os.path.exists(first)
    assert os.path.dirname(first) == str(tmp_path / "local")
    assert os.path.basename(first).startswith(f"scratch-{os.getpid()}-")
    os.makedirs(os.path.join(first, "inside"))
    os.makedirs(tmp_path / "local" / "scratch-1-1")  # another process's, killed
    (tmp_path / "local" / "scratch-1-1" / "ckpt.index").write_text("left")
    t.write(4, 0, b"mine")
    (tmp_path / "local" / "notes").mkdir()
    tier(tmp_path / "local")
    assert sorted(os.listdir(tmp_path / "local")) == ["4", "node-node1", "notes"]
    assert t.found() == {0: [4]}
    (tmp_path / "local" / "scratch-2-2").write_text("not ours: a file")  # cannot be removed
    tier(tmp_path / "local")  # as a scratch: passed over, the open goes on
    assert "scratch-2-2" in os.listdir(tmp_path / "local")


@pytest.mark.parametrize("where, says", [
    ("missing/local", "MPI_RESOLVER_LOCAL_DIR: the node-local directory {p} cannot be made on "
                      "node1: {t}/missing is not there. Give a directory every node has"),
    ("file/local", "MPI_RESOLVER_LOCAL_DIR: the node-local directory {p} cannot be made on "
                   "node1: {t}/file is not there."),
    ("missingX/X", "MPI_RESOLVER_LOCAL_DIR: the node-local directory {p} cannot be made on "
                   "node1: {t}/missingX is not there."),  # the path's last name alone cut
    ("file", "MPI_RESOLVER_LOCAL_DIR: the node-local directory {p} cannot be written on "
             "node1 (File exists). Give a directory this job may write."),
])
def test_open_refusals(tmp_path: Path, where: str, says: str) -> None:
    (tmp_path / "file").write_text("")
    path = tmp_path / where
    with pytest.raises(ConfigurationError) as e:
        LocalTier(str(path), "node1", NAME).open()
    assert says.format(p=path, t=tmp_path) in str(e.value)


def test_parts_whole_found_and_the_older_steps_removed(tmp_path: Path) -> None:
    t = tier(tmp_path / "local")
    for step in (4, 8, 12):
        t.write(step, 0, b"mine %d" % step)
    t.write(8, 1, b"partner's")
    (tmp_path / "local" / "12" / "part-1.77.tmp").write_bytes(b"torn")  # a write cut short
    (tmp_path / "local" / "12" / "other").write_bytes(b"")
    (tmp_path / "local" / "notes").mkdir()
    (tmp_path / "local" / "16").write_text("")  # a file, not a step
    assert t.found() == {0: [4, 8, 12], 1: [8]}
    assert t.read(8, 1) == b"partner's" and t.read(12, 0) == b"mine 12"
    t.keep_newest(2)
    assert t.found() == {0: [8, 12], 1: [8]}
    t.keep_newest(1)
    assert t.found() == {0: [12]}
    with pytest.raises(OSError):
        t.read(8, 0)


def test_a_write_that_fails_leaves_nothing(tmp_path: Path, monkeypatch) -> None:
    t = tier(tmp_path / "local")

    def full(src: str, dst: str) -> None:
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(os, "replace", full)
    with pytest.raises(OSError):
        t.write(4, 0, b"x" * 10)
    assert os.listdir(tmp_path / "local" / "4") == [] and t.found() == {}


def test_a_trailing_slash_and_a_relative_path_are_opened(tmp_path: Path, monkeypatch) -> None:
    LocalTier(f"{tmp_path}/local/", "node1", NAME).open()  # its parent: tmp_path, not itself
    monkeypatch.chdir(tmp_path)
    assert tier(Path("rel")).markers() == ["node1"]  # its parent: the current directory


def test_a_step_that_cannot_be_removed_is_passed_over(tmp_path: Path) -> None:
    """Two ranks of a node keep the same directory: a step the other removed, or cannot be
    removed (here a link), is passed over, not raised into the training."""
    t = tier(tmp_path / "local")
    t.write(4, 0, b"x")
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "local" / "2").symlink_to(tmp_path / "elsewhere")  # rmtree refuses a link
    t.keep_newest(1)
    assert t.found() == {0: [4]}


def test_remove_takes_the_directory_whole_and_a_gone_one_stays_gone(tmp_path: Path) -> None:
    t = tier(tmp_path / "local")
    t.write(10, 0, b"part")
    t.remove()
    assert not (tmp_path / "local").exists()
    t.remove()  # gone already
    assert not (tmp_path / "local").exists()


def test_a_packed_part_is_placed_by_its_name_and_mapped_without_a_copy(tmp_path: Path) -> None:
    t = tier(tmp_path / "local")
    packed = t.scratch() + PACKED
    Path(packed).write_bytes(b"packed part")
    t.place(6, 1, packed)
    assert not os.path.exists(packed) and t.found() == {1: [6]}
    view = t.mapped(6, 1, populate=True)
    assert isinstance(view, mmap.mmap) and view[:] == b"packed part"
    with pytest.raises(TypeError):
        view[0] = 1  # read only
    t.write(6, 2, b"")
    assert t.mapped(6, 2, populate=True) == b""  # an empty part: nothing to map
    with pytest.raises(OSError):
        t.mapped(6, 3, populate=False)


@pytest.mark.parametrize("populate, at_once", [(True, local_tier._POPULATE), (False, 0)])
def test_a_part_s_pages_are_mapped_at_once_only_where_asked(tmp_path: Path, monkeypatch,
                                                            populate: bool,
                                                            at_once: int) -> None:
    flags: List[int] = []
    real = mmap.mmap

    def spy(*args: Any, **kwargs: Any) -> mmap.mmap:
        flags.append(kwargs["flags"])
        return real(*args, **kwargs)
    t = tier(tmp_path / "local")
    t.write(6, 1, b"packed part")
    monkeypatch.setattr(local_tier.mmap, "mmap", spy)
    assert t.mapped(6, 1, populate=populate)[:] == b"packed part"
    assert local_tier._POPULATE and flags == [mmap.MAP_SHARED | at_once], flags


def test_a_part_that_cannot_be_placed_is_removed(tmp_path: Path) -> None:
    t = tier(tmp_path / "local")
    packed = t.scratch() + PACKED
    Path(packed).write_bytes(b"x")
    (tmp_path / "local" / "6").write_text("a file where the step's directory goes")
    with pytest.raises(OSError):
        t.place(6, 0, packed)
    assert not os.path.exists(packed)


def test_a_part_is_written_under_a_temporary_name_of_its_own(tmp_path: Path,
                                                            monkeypatch) -> None:
    """Named by its step, rank and process: two parts a process writes, its own and a copy,
    never share one."""
    opened: List[str] = []

    def spy(path: str, *args: Any) -> Any:
        opened.append(os.path.relpath(path, tmp_path / "local"))
        return open(path, *args)
    t = tier(tmp_path / "local")
    monkeypatch.setattr(local_tier, "open", spy, raising=False)
    t.write(8, 3, b"part")
    assert opened == [f"8/part-3.{os.getpid()}.tmp"] and t.read(8, 3) == b"part"


def test_a_copy_received_into_its_file_is_a_part_once_accepted(tmp_path: Path) -> None:
    t = tier(tmp_path / "local")
    into = t.incoming(8, 3, 5)
    assert len(into) == 5 and t.found() == {}  # its space taken, not a part yet
    assert os.stat(tmp_path / "local" / "8" / f"part-3.{os.getpid()}.tmp").st_mode & 0o777 \
        == 0o600  # the job's user's alone
    into[:] = b"copy!"
    t.accept(8, 3)
    assert t.found() == {3: [8]} and t.read(8, 3) == b"copy!"
    t.incoming(8, 4, 2)
    t.discard(8, 4)  # its bytes did not come
    t.discard(8, 5)  # none given: nothing to remove
    assert sorted(os.listdir(tmp_path / "local" / "8")) == ["part-3"]


def test_a_copy_without_room_is_an_os_error_that_leaves_nothing(tmp_path: Path,
                                                                monkeypatch) -> None:
    t = tier(tmp_path / "local")

    def full(fd: int, offset: int, size: int) -> None:
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(os, "posix_fallocate", full)
    with pytest.raises(OSError, match="No space left"):
        t.incoming(8, 3, 5)
    assert os.listdir(tmp_path / "local" / "8") == []


def test_open_removes_the_packed_parts_a_killed_process_left(tmp_path: Path) -> None:
    t = tier(tmp_path / "local")
    Path(t.scratch() + PACKED).write_bytes(b"left")
    (tmp_path / "local" / "other.part").write_bytes(b"not a scratch's")
    tier(tmp_path / "local")
    assert sorted(os.listdir(tmp_path / "local")) == ["node-node1", "other.part"]
