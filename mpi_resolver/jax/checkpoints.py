"""A long JAX job's checkpoints on disk: named NumPy arrays (the training state, flattened by
.state) in ``DIR/ckpt-<step>.npz``, each written whole or not at all (a part file, fsync, a
rename), the last ``keep`` kept, and the newest that reads whole found again (a torn one
skipped with a warning, as long_jobs.resume says). The file edge; NumPy only (no JAX).
"""

from __future__ import annotations

import os
import re
import time
from typing import Any, Dict, List, Mapping, Optional, Tuple

import numpy as np

from mpi_resolver.core.errors import ResolutionError
from mpi_resolver.long_jobs.durable import sync_directory
from mpi_resolver.long_jobs.resume import restore_newest

__all__ = ["StepCheckpoints", "checkpoint_name", "step_of", "to_remove", "STEP_KEY"]

#: The entry of every checkpoint file that holds its step.
STEP_KEY = "__step__"
_NAME = re.compile(r"ckpt-(\d+)\.npz")
#: A save's part file (a process killed while writing leaves it behind).
_PART = re.compile(r"ckpt-\d+\.npz\.\d+\.part")


def checkpoint_name(step: int) -> str:
    """Returns the file name of the checkpoint at ``step`` ('ckpt-00000500.npz')."""
    return f"ckpt-{int(step):08d}.npz"


def step_of(name: str) -> Optional[int]:
    """Returns the step a checkpoint file's name says, None for any other file."""
    found = _NAME.fullmatch(name)
    return int(found.group(1)) if found else None


def to_remove(steps: List[int], keep: int) -> List[int]:
    """Returns the steps whose checkpoints go once ``steps`` are on disk: all but the newest
    ``keep``."""
    return sorted(steps)[:max(len(steps) - keep, 0)]


class StepCheckpoints:
    """The checkpoints in ``directory`` (one every process sees): ``save`` (process 0),
    ``restore_newest`` (every process), ``remove`` (when training completed)."""

    def __init__(self, directory: str, keep: int) -> None:
        self.directory, self.keep = directory, keep

    def steps(self) -> List[int]:
        """Returns the steps of the checkpoints on disk, oldest first (none where the
        directory is not there yet).

        Raises:
          ResolutionError: the directory cannot be read (not a directory, no permission).
        """
        try:
            names = os.listdir(self.directory)
        except FileNotFoundError:
            return []
        except OSError as e:
            raise ResolutionError(
                f"checkpoint directory {self.directory} cannot be read ({e.strerror}): give a "
                "directory every node can read and write") from e
        return sorted(s for s in map(step_of, names) if s is not None)

    def path(self, step: int) -> str:
        return os.path.join(self.directory, checkpoint_name(step))

    def save(self, step: int, arrays: Mapping[str, np.ndarray]) -> float:
        """Writes ``arrays`` as the checkpoint at ``step`` whole or not at all, then removes
        those older than the last ``keep``; returns the seconds it took."""
        start = time.monotonic()
        os.makedirs(self.directory, exist_ok=True)
        final = self.path(step)
        part = f"{final}.{os.getpid()}.part"
        with open(part, "wb") as f:
            entries: Dict[str, Any] = {STEP_KEY: np.int64(step), **arrays}
            np.savez(f, **entries)
            f.flush()
            os.fsync(f.fileno())
        os.replace(part, final)
        sync_directory(self.directory)
        for name in os.listdir(self.directory):  # parts left by a writer killed earlier
            if _PART.fullmatch(name):
                _remove(os.path.join(self.directory, name))
        for old in to_remove(self.steps(), self.keep):
            _remove(self.path(old))
        return time.monotonic() - start

    def load(self, step: int) -> Dict[str, np.ndarray]:
        """Returns every array of the checkpoint at ``step``, each read whole.

        Raises:
          OSError, ValueError, zipfile.BadZipFile, ResolutionError: the file is torn, not a
            checkpoint, or says another step.
        """
        with np.load(self.path(step), allow_pickle=False) as saved:
            arrays = {name: saved[name] for name in saved.files}
        said = arrays.pop(STEP_KEY, None)
        if said is None or int(said) != step:
            raise ResolutionError(f"{checkpoint_name(step)} says step {said}, not {step}")
        return arrays

    def restore_newest(self) -> Tuple[Optional[int], Optional[Dict[str, np.ndarray]], List[str]]:
        """Returns (the newest step whose checkpoint reads whole, its arrays; None, None where
        none does; the warnings for the torn ones skipped)."""
        found: Dict[str, Dict[str, np.ndarray]] = {}
        steps = {self.path(s): s for s in self.steps()}

        def read(path: str) -> None:
            found[path] = self.load(steps[path])

        chosen, warnings = restore_newest(list(steps), read, self.directory)
        if chosen is None:
            return None, None, warnings
        return steps[chosen], found[chosen], warnings

    def remove(self) -> None:
        """Removes every checkpoint (training completed); the manifest stays, saying so, and
        so does the ledger."""
        for step in self.steps():
            _remove(self.path(step))


def _remove(path: str) -> None:
    try:
        os.remove(path)
    except FileNotFoundError:
        pass
