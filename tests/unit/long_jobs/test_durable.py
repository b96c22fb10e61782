"""long_jobs.durable: fsync of files and directories, for real, with the calls counted; a
missing file, or a directory that cannot be opened, passed over."""

from __future__ import annotations

import os

import pytest

from mpi_resolver.long_jobs import durable

pytestmark = pytest.mark.unit


@pytest.fixture
def synced(monkeypatch):
    """The file descriptors fsync was called on, by their paths."""
    seen = []
    real = os.fsync

    def fsync(fd: int) -> None:
        seen.append(os.readlink(f"/proc/self/fd/{fd}"))
        real(fd)

    monkeypatch.setattr(durable.os, "fsync", fsync)
    return seen


def test_files_and_directories_are_synced(tmp_path, synced) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    a.write_text("1")
    b.write_text("2")
    durable.sync_files([str(a), str(tmp_path / "gone"), str(b)])
    durable.sync_directory(str(tmp_path))
    assert synced == [str(a), str(b), str(tmp_path)]


def test_what_cannot_be_opened_is_passed_over(tmp_path, synced) -> None:
    durable.sync_file(str(tmp_path / "gone"))
    durable.sync_directory(str(tmp_path / "no" / "such"))
    assert synced == []


def test_a_directory_whose_file_system_refuses_fsync_stands(tmp_path, monkeypatch) -> None:
    def refuse(fd: int) -> None:
        raise OSError(22, "Invalid argument")

    monkeypatch.setattr(durable.os, "fsync", refuse)
    durable.sync_directory(str(tmp_path))  # no error
    (tmp_path / "f").write_text("x")
    with pytest.raises(OSError):
        durable.sync_file(str(tmp_path / "f"))  # a file's data must reach the disk
