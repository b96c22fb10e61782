"""A node's local directory of a long job's checkpoints (the node-local tier), as files: each
rank's part of a step as one file, whole or not there (written under a temporary name, then
renamed; no fsync: the tier is for the failures of processes, a lost node's parts come from
its partner's copies), the parts found, the older steps removed, and each node's marker, by
which a directory that two nodes see is told apart from a node's own (framework-free: the
parts' bytes are the edge's).

The layout: ``<directory>/<step>/part-<rank>``, ``<directory>/node-<name>``, and a process's
scratch directories while it packs or unpacks a part (``<directory>/scratch-<pid>-<n>``: its
edge's files, on the node's own disk or memory), with the part an edge packs as a file beside
its scratch (``<scratch>.part``, renamed into place: no copy); what a killed process left of
these is removed at the next ``open``. A partner's copy is received straight into its file
(``incoming``: its space taken first, so that a full directory is an error, not a fault),
renamed into place once all its bytes are in.
"""

from __future__ import annotations

import contextlib
import itertools
import mmap
import os
import re
import shutil
from typing import Dict, List, NamedTuple, Union

from mpi_resolver.core.errors import ConfigurationError

__all__ = ["LocalTier", "Blob", "Packed", "Part", "PACKED", "remove_file"]

#: A part's bytes, as the edges make them (a mapping of its file: no copy).
Blob = Union[bytes, bytearray, mmap.mmap]
#: The name an edge gives the part it packs as a file, after its scratch directory's.
PACKED = ".part"


class Packed(NamedTuple):
    """A part its edge wrote whole as the file ``path`` (``<scratch>.part``) of the tier."""

    path: str


#: What an edge's pack returns: the part's bytes, or its file.
Part = Union[Blob, Packed]

_PART = re.compile(r"part-(\d+)")
_MARKER = "node-"
_SCRATCH = "scratch-"
_COUNT = itertools.count()


class LocalTier:
    """The local directory ``directory`` as node ``node`` sees it; ``name``: the variable or
    argument that gave it, for the errors."""

    def __init__(self, directory: str, node: str, name: str) -> None:
        self.directory, self.node, self.name = directory, node, name

    def open(self) -> None:
        """Makes the directory (its parent must be there), leaves this node's marker, and
        removes the scratch directories a killed process left.

        Raises:
          ConfigurationError: the parent is not there, or the directory cannot be written,
            naming the path and ``name``.
        """
        parent = os.path.dirname(self.directory.rstrip("/")) or "/"
        if not os.path.isdir(parent):
            raise ConfigurationError(
                f"{self.name}: the node-local directory {self.directory} cannot be made on "
                f"{self.node}: {parent} is not there. Give a directory every node has "
                "(/dev/shm, $TMPDIR, a local disk's mount point).")
        try:
            os.makedirs(self.directory, exist_ok=True)
            with open(os.path.join(self.directory, _MARKER + self.node), "w"):
                pass
            for name in os.listdir(self.directory):  # no process of the job packs yet
                path = os.path.join(self.directory, name)
                if name.startswith(_SCRATCH) and name.endswith(PACKED):
                    remove_file(path)
                elif name.startswith(_SCRATCH):
                    shutil.rmtree(path, ignore_errors=True)
        except OSError as e:
            raise ConfigurationError(
                f"{self.name}: the node-local directory {self.directory} cannot be written "
                f"on {self.node} ({e.strerror or e}). Give a directory this job may "
                "write.") from e

    def markers(self) -> List[str]:
        """Returns the names of the nodes whose marker is in the directory, sorted."""
        return sorted(n[len(_MARKER):] for n in os.listdir(self.directory)
                      if n.startswith(_MARKER))

    def free(self) -> int:
        """Returns the bytes free in the directory's file system."""
        return shutil.disk_usage(self.directory).free

    def scratch(self) -> str:
        """Returns a directory in this one that no other pack or unpack uses (not made: its
        user makes it, and removes it)."""
        return os.path.join(self.directory, f"{_SCRATCH}{os.getpid()}-{next(_COUNT)}")

    def path(self, step: int, rank: int) -> str:
        """Returns the file of ``rank``'s part of ``step``."""
        return os.path.join(self.directory, str(step), f"part-{rank}")

    def write(self, step: int, rank: int, blob: Blob) -> None:
        """Writes ``rank``'s part of ``step``: whole once this returns, not there before.

        Raises:
          OSError: the directory is full or cannot be written (nothing left half-written).
        """
        temporary = self._temporary(step, rank)
        try:
            with open(temporary, "wb") as f:
                f.write(blob)
            os.replace(temporary, self.path(step, rank))
        except OSError:
            remove_file(temporary)
            raise

    def place(self, step: int, rank: int, path: str) -> None:
        """Makes the file ``path`` (a Packed part, written whole) ``rank``'s part of ``step``:
        renamed, no copy.

        Raises:
          OSError: it cannot be renamed there (``path`` removed).
        """
        try:
            os.makedirs(os.path.dirname(self.path(step, rank)), exist_ok=True)
            os.replace(path, self.path(step, rank))
        except OSError:
            remove_file(path)
            raise

    def mapped(self, step: int, rank: int, *, populate: bool) -> Blob:
        """Returns ``rank``'s part of ``step`` mapped, read only (the file's own pages, no
        copy; b"" for an empty one), its pages mapped at once where ``populate`` (to be
        sent: 0.13-0.27 s a GiB here), else as they are read (its size alone: nothing).

        Raises:
          OSError: it is not there (any more) or cannot be read.
        """
        with open(self.path(step, rank), "rb") as f:
            size = os.fstat(f.fileno()).st_size
            if not size:
                return b""
            return mmap.mmap(f.fileno(), size, prot=mmap.PROT_READ,
                             flags=mmap.MAP_SHARED | (_POPULATE if populate else 0))

    def incoming(self, step: int, rank: int, size: int) -> mmap.mmap:
        """Returns a mapping of ``size`` bytes (at least 1) to be written with ``rank``'s part
        of ``step``: a file whose space is taken now, not a part until ``accept``.

        Raises:
          OSError: the directory has no room for it, or cannot be written (nothing left).
        """
        temporary = self._temporary(step, rank)
        fd = os.open(temporary, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            os.posix_fallocate(fd, 0, size)
            return mmap.mmap(fd, size, flags=mmap.MAP_SHARED | _POPULATE)
        except OSError:
            remove_file(temporary)
            raise
        finally:
            os.close(fd)

    def accept(self, step: int, rank: int) -> None:
        """Makes the file ``incoming`` gave, every byte now in it, ``rank``'s part of ``step``.

        Raises:
          OSError: it cannot be renamed (removed).
        """
        self.place(step, rank, self._temporary(step, rank))

    def discard(self, step: int, rank: int) -> None:
        """Removes the file ``incoming`` gave, where its bytes did not all come."""
        remove_file(self._temporary(step, rank))

    def _temporary(self, step: int, rank: int) -> str:
        """Returns the name under which ``rank``'s part of ``step`` is written (its step's
        directory made)."""
        path = self.path(step, rank)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        return f"{path}.{os.getpid()}.tmp"

    def read(self, step: int, rank: int) -> bytes:
        """Returns ``rank``'s part of ``step``.

        Raises:
          OSError: it is not there (any more) or cannot be read.
        """
        with open(self.path(step, rank), "rb") as f:
            return f.read()

    def found(self) -> Dict[int, List[int]]:
        """Returns the whole parts in the directory: each rank's steps, ascending."""
        out: Dict[int, List[int]] = {}
        for step in self._steps():
            for name in os.listdir(os.path.join(self.directory, str(step))):
                part = _PART.fullmatch(name)
                if part:
                    out.setdefault(int(part.group(1)), []).append(step)
        return out

    def keep_newest(self, count: int) -> None:
        """Removes every step but the ``count`` newest in the directory."""
        for step in self._steps()[:-count]:
            shutil.rmtree(os.path.join(self.directory, str(step)), ignore_errors=True)

    def remove(self) -> None:
        """Removes the directory, every part and marker in it (the job's training completed:
        its final step is in the checkpoint directory); one that is gone already stays so."""
        shutil.rmtree(self.directory, ignore_errors=True)

    def _steps(self) -> List[int]:
        return sorted(int(n) for n in os.listdir(self.directory) if n.isdigit()
                      and os.path.isdir(os.path.join(self.directory, n)))


#: Maps a file's pages at once, where Linux can (no fault for each page as it is read).
_POPULATE = getattr(mmap, "MAP_POPULATE", 0)


def remove_file(path: str) -> None:
    """Removes the file ``path`` where it is there and can be (a part left unfinished, by
    this module or an edge that packs one)."""
    with contextlib.suppress(OSError):
        os.remove(path)
