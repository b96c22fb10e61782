"""The node-local tier of a TensorFlow job's periodic saves (the TensorFlow edge; importing this
module imports TensorFlow): each periodic save's snapshot, packed as a part (local_parts, in a
scratch directory of the node-local directory's), goes to every worker's node-local directory
(long_jobs.local_saves; the partner node's own part is its copy, as each is the whole state:
none is sent); every ``shared_every``-th save, and the one after a save the tier did not take
whole, goes to the shared directory too;
a restore takes the tier's newest step where it is the newest whole across the tiers, every
worker the same one.

Under MultiWorkerMirroredStrategy every worker holds the whole state: its part is a whole
checkpoint, and the shared directory's steps are read from TensorFlow's own record in each
checkpoint (the handler's count of runs)."""

from __future__ import annotations

from typing import Any, Callable, List, NamedTuple, Optional, Tuple

import tensorflow as tf

from mpi_resolver.core.logs import log_once
from mpi_resolver.long_jobs.local_saves import LocalSaves
from mpi_resolver.long_jobs.tiers import SharedTurns
from mpi_resolver.tensorflow import snapshot as snapshots
from mpi_resolver.tensorflow.local_parts import packed, restore_from, unpacked

__all__ = ["TfTier", "TierWritten", "checkpoint_step", "RUNS_KEY"]

#: Where PreemptionCheckpointHandler records, in each checkpoint, the runs (steps) done.
RUNS_KEY = "checkpointed_runs/.ATTRIBUTES/VARIABLE_VALUE"


class TierWritten(NamedTuple):
    """How a periodic save with the tier ended: ``why`` the tier did not take it whole (None:
    it did), the shared directory's checkpoint written beside it (None: none)."""

    why: Optional[str]
    prefix: Optional[str]


def checkpoint_step(prefix: str) -> Optional[int]:
    """Returns the step (runs done) checkpoint ``prefix`` holds, None where it cannot be
    read or holds none."""
    try:
        return int(tf.train.load_checkpoint(prefix).get_tensor(RUNS_KEY))
    except (tf.errors.OpError, ValueError):
        return None


class TfTier:
    """The tier ``local`` of ``checkpoint``'s periodic saves, every ``shared_every``-th also
    to the shared directory (``key`` keeps its agreements apart). ``restore`` on every worker
    first."""

    def __init__(self, local: LocalSaves, shared_every: int, checkpoint: Any,
                 key: str) -> None:
        self.local, self.checkpoint, self.key = local, checkpoint, key
        self.turns = SharedTurns(shared_every)

    def restore(self, listed: Callable[[], List[str]]) -> Optional[Tuple[int, str]]:
        """Restores the tier's newest step where it is the newest whole across the tiers
        (every worker; ``listed``: the shared directory's checkpoints, which the chief reads
        and tells all); returns (its step, where each worker read its part), else None."""
        self.local.open()
        coord = self.local.coord
        steps = [checkpoint_step(p) for p in listed()] if coord.chief else []
        told = coord.agree(f"{self.key}_shared", ",".join(str(s) for s in steps if s is not None),
                           "which checkpoints there are")
        found = self.local.restore([int(s) for s in told.split(",") if s],
                                   lambda blob: unpacked(blob, self._scratch()))
        if found is None:
            return None
        step, prefix, where = found
        restore_from(self.checkpoint, prefix)
        return step, where

    def plan(self) -> bool:
        """Counts a local save; returns whether the shared directory takes it too."""
        return self.turns.plan()

    def write(self, step: int, snap: snapshots.Snapshot,
              shared: Optional[Callable[[], str]]) -> TierWritten:
        """Writes ``snap`` at ``step`` to the tier (every worker, from any thread), then
        ``shared()`` where given (the chief's write to the shared directory)."""
        if self.local.tier is None:  # no restore first (a script's own loop)
            self.local.open()
        why = self.local.write(step, lambda: packed(snap, self._scratch()))
        return TierWritten(why, shared() if shared is not None else None)

    def _scratch(self) -> str:
        """Returns a fresh scratch directory of this node's tier (open)."""
        assert self.local.tier is not None  # (open)
        return self.local.tier.scratch()

    def ended(self, step: int, why: Optional[str]) -> None:
        """Notes a local save that was not whole (``why``): the next save goes to the
        shared directory too (one line)."""
        if why is not None:
            self.turns.missed()
            log_once(f"the node-local save at step {step} is not whole ({why}): the next "
                     "save goes to the checkpoint directory too")
