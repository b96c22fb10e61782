"""The package's earlier format of a long JAX job's checkpoints, read so that a job started
before Orbax resumes from them once (its next saves are Orbax's: .orbax_checkpoints): named
NumPy arrays (the training state flattened, as .state reads them back) in
``DIR/ckpt-<step>.npz``, each written whole or not at all by the earlier release. The file
edge; NumPy only (no JAX).
"""

from __future__ import annotations

import os
import re
from typing import Dict, List, Optional

import numpy as np

from mpi_resolver.core.errors import ResolutionError

__all__ = ["NpzCheckpoints", "checkpoint_name", "step_of", "STEP_KEY"]

#: The entry of every checkpoint file that holds its step.
STEP_KEY = "__step__"
_NAME = re.compile(r"ckpt-(\d+)\.npz")


def checkpoint_name(step: int) -> str:
    """Returns the file name of the checkpoint at ``step`` ('ckpt-00000500.npz')."""
    return f"ckpt-{int(step):08d}.npz"


def step_of(name: str) -> Optional[int]:
    """Returns the step a checkpoint file's name says, None for any other file."""
    found = _NAME.fullmatch(name)
    return int(found.group(1)) if found else None


class NpzCheckpoints:
    """The earlier format's checkpoints in ``directory``: their ``steps``, each one's
    arrays (``load``), and ``remove`` (when training completed)."""

    def __init__(self, directory: str) -> None:
        self.directory = directory

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
