"""Files on disk before a save returns (the edge: fsync): a checkpoint's files, the manifest,
and the directory entries that name them, so that a node lost right after a save leaves it
whole, or the one before it. Where a file system does not take fsync (some network file
systems refuse it on a directory), the write stands as it is."""

from __future__ import annotations

import os
from typing import Iterable

__all__ = ["sync_file", "sync_files", "sync_directory"]


def sync_file(path: str) -> None:
    """Puts ``path``'s data on disk; a file that is not there (any more) is passed over."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def sync_files(paths: Iterable[str]) -> None:
    """Puts each of ``paths`` on disk (sync_file)."""
    for path in paths:
        sync_file(path)


def sync_directory(directory: str) -> None:
    """Puts ``directory``'s entries (a rename, a new file's name) on disk, where the file
    system allows it."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
