"""A long JAX job's checkpoints through Orbax's CheckpointManager: one directory per step,
``DIR/<step>`` (Orbax's own layout: Orbax alone reads them back), the last ``keep`` kept,
each committed whole or not at all (Orbax writes into a temporary directory and renames it).
A save is collective (every process calls it; each writes the shards it owns, so a state
sharded across processes is saved and restored), and, in the background where asked, the
step pays only the copy of the state to host memory: the write runs in a thread, one in
flight, the next save waits for it (long_jobs/background). The JAX edge; importing this
module imports JAX and Orbax.
"""

from __future__ import annotations

import os
import shutil
import time
from typing import Any, Callable, List, Optional

import jax
import numpy as np
import orbax.checkpoint as ocp

from mpi_resolver.core.errors import ResolutionError
from mpi_resolver.long_jobs.background import BackgroundWrites, Written

__all__ = ["OrbaxCheckpoints", "orbax_name", "abstract_of", "serialized", "savable",
           "savable_shapes", "placed_back"]


def orbax_name(step: int) -> str:
    """Returns the name of the step's checkpoint directory, as Orbax writes it ('500')."""
    return str(int(step))


def abstract_of(template: Any) -> Any:
    """Returns ``template`` (savable_shapes' form) with every array as its shape, type and
    sharding (what Orbax restores into); Python numbers stay numbers."""
    return jax.tree.map(lambda leaf: leaf if isinstance(leaf, jax.ShapeDtypeStruct)
                        else ocp.utils.to_shape_dtype_struct(leaf), template)


def _host_local(leaf: Any) -> bool:
    """Returns whether ``leaf`` is a JAX array of this process alone in a job of several
    (``jnp.zeros(3)`` on each process: Orbax refuses to save it across hosts)."""
    return isinstance(leaf, jax.Array) and leaf.is_fully_addressable and \
        jax.process_count() > 1


def savable(tree: Any) -> Any:
    """Returns ``tree`` as Orbax saves it across processes: each host-local JAX array as a
    NumPy array (process 0's copy is written: replicated state, as data parallelism keeps
    it); arrays spread over the processes stay JAX's (each process writes its shards)."""
    return jax.tree.map(lambda leaf: np.asarray(leaf) if _host_local(leaf) else leaf, tree)


def savable_shapes(template: Any) -> Any:
    """Returns ``template`` as savable gives it, each host-local JAX array as its shape and
    type alone (the NumPy array savable makes of it, without the copy to host memory)."""
    return jax.tree.map(lambda leaf: jax.ShapeDtypeStruct(leaf.shape, leaf.dtype)
                        if _host_local(leaf) else leaf, template)


def placed_back(template: Any, tree: Any) -> Any:
    """Returns ``tree`` (restored from ``savable(template)``'s form) with each leaf that is a
    host-local JAX array in ``template`` put back on its device."""
    return jax.tree.map(lambda leaf, value: jax.device_put(value, leaf.sharding)
                        if _host_local(leaf) else value, template, tree)


def serialized(template: Any) -> Any:
    """Returns ``template``'s tree as Orbax saves it (its own nodes as dicts and lists), to
    set beside a checkpoint's metadata."""
    return ocp.tree.serialize_tree(savable_shapes(template), keep_empty_nodes=True)


class OrbaxCheckpoints:
    """The Orbax checkpoints in ``directory`` (one every process sees): ``start`` a save,
    ``done``/``wait`` for the write in flight, ``restore`` a step, ``remove`` them all. Every
    process calls ``start``, ``wait`` and ``restore`` at the same step (Orbax's barriers)."""

    def __init__(self, directory: str, keep: int, background: bool,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.directory = os.path.abspath(directory)  # Orbax takes absolute paths alone
        self.keep, self.background, self._clock = keep, background, clock
        self.writes = BackgroundWrites(clock)
        self._manager: Optional[ocp.CheckpointManager] = None

    @property
    def manager(self) -> ocp.CheckpointManager:
        """Returns Orbax's manager of the directory.

        Raises:
          ResolutionError: ``open`` was not called.
        """
        if self._manager is None:
            raise ResolutionError(f"the checkpoints in {self.directory} are not open: every "
                                  "process calls open() before the first save")
        return self._manager

    def open(self) -> None:
        """Makes the directory and Orbax's manager of it (once; every process, LongJob at its
        restore, else the first save does)."""
        if self._manager is None:
            os.makedirs(self.directory, exist_ok=True)
            options = ocp.CheckpointManagerOptions(
                max_to_keep=self.keep, enable_async_checkpointing=self.background,
                create=False)
            self._manager = ocp.CheckpointManager(self.directory, options=options)

    def close(self) -> None:
        """Ends Orbax's manager (its threads), where it was opened; open() makes another."""
        if self._manager is not None:
            self._manager.close()
            self._manager = None

    def steps(self) -> List[int]:
        """Returns the steps of the committed checkpoints on disk, oldest first (none where
        the directory is not there yet): the directories named by a step alone (Orbax
        writes into '<step>.orbax-checkpoint-tmp-...' and renames it when whole).

        Raises:
          OSError: the directory cannot be read.
        """
        if not os.path.isdir(self.directory):
            return []
        return sorted(int(name) for name in os.listdir(self.directory)
                      if name.isdigit() and os.path.isdir(os.path.join(self.directory, name)))

    def path(self, step: int) -> str:
        return os.path.join(self.directory, orbax_name(step))

    def files(self, step: int) -> List[str]:
        """Returns the paths of the files of the checkpoint at ``step``."""
        return [os.path.join(root, name) for root, _, names in os.walk(self.path(step))
                for name in names]

    def start(self, step: int, tree: Any, began: Optional[float] = None) -> float:
        """Saves ``tree`` as the checkpoint at ``step`` (after the write in flight, which the
        caller has collected with ``wait``); returns what the training paid (seconds) since
        ``began`` (the clock's time the caller began the save, its wait for the write in
        flight included; None: now): the whole save, or, in the background, the copy to
        host memory. The write's end is given by ``done`` or ``wait``.

        Raises:
          Exception: Orbax's refusal (the directory cannot be written, the step is there).
        """
        began = self._clock() if began is None else began
        self.open()  # where the script did not restore first
        self.manager.save(step, args=ocp.args.StandardSave(savable(tree)), force=True)
        stall = self._clock() - began
        self.writes.start(step, stall, lambda: self._committed(step))
        return stall

    def done(self) -> Optional[Written]:
        """Returns the write that ended since the last call (once), None while it runs."""
        return self.writes.done()

    def wait(self) -> Optional[Written]:
        """Waits for the write in flight; returns how it ended (None: none in flight)."""
        return self.writes.wait()

    def restore(self, step: int, template: Any) -> Any:
        """Returns the checkpoint at ``step`` read whole into ``template``'s shapes, types
        and shardings (each process reads the shards it owns; no barrier: the caller
        agrees the outcome with the other processes).

        Raises:
          Exception: the checkpoint is torn or cannot be read (Orbax's or TensorStore's).
        """
        handler = ocp.StandardCheckpointHandler()
        abstract = abstract_of(savable_shapes(template))
        tree = handler.restore(self._item(step), args=ocp.args.StandardRestore(abstract))
        return placed_back(template, tree)

    def saved_tree(self, step: int) -> Any:
        """Returns the tree of the checkpoint at ``step`` as its metadata says it (each
        array's shape and type).

        Raises:
          Exception: the metadata is missing or torn.
        """
        return ocp.StandardCheckpointHandler().metadata(self._item(step)).tree

    def remove(self) -> None:
        """Removes every checkpoint (training completed; process 0)."""
        for step in self.steps():
            shutil.rmtree(self.path(step), ignore_errors=True)

    def _item(self, step: int) -> Any:
        """Returns the path of the state saved in the checkpoint at ``step``."""
        from etils import epath

        return epath.Path(self.path(step)) / "default"

    def _committed(self, step: int) -> str:
        """Waits for Orbax's write of ``step`` to end; returns its directory.

        Raises:
          OSError: Orbax ended without committing it (its log says why).
        """
        self.manager.wait_until_finished()
        self.manager.check_for_errors()
        if not os.path.isdir(self.path(step)):
            raise OSError(f"Orbax did not commit the checkpoint at step {step} in "
                          f"{self.directory} (its log says why)")
        return self.path(step)
