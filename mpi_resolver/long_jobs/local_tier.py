"""A node's local directory of a long job's checkpoints (the node-local tier), as files: each
rank's part of a step as one file, whole or not there (written under a temporary name, then
renamed; no fsync: the tier is for the failures of processes, a lost node's parts come from
its partner's copies), the parts found, the older steps removed, and each node's marker, by
which a directory that two nodes see is told apart from a node's own (framework-free: the
parts' bytes are the edge's).

The layout: ``<directory>/<step>/part-<rank>``, ``<directory>/node-<name>``, and a process's
scratch directories while it packs or unpacks a part (``<directory>/scratch-<pid>-<n>``: its
edge's files, on the node's own disk or memory; one a killed process left is removed at the
next ``open``).
"""

from __future__ import annotations

import itertools
import os
import re
import shutil
from typing import Dict, List, Union

from mpi_resolver.core.errors import ConfigurationError

__all__ = ["LocalTier", "Blob"]

#: A part's bytes, as the edges make them.
Blob = Union[bytes, bytearray]

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
                if name.startswith(_SCRATCH):
                    shutil.rmtree(os.path.join(self.directory, name), ignore_errors=True)
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
        path = self.path(step, rank)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        temporary = f"{path}.{os.getpid()}.tmp"
        try:
            with open(temporary, "wb") as f:
                f.write(blob)
            os.replace(temporary, path)
        except OSError:
            if os.path.exists(temporary):
                os.remove(temporary)
            raise

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
