"""The periodic saves of a JAX LongJob with a node-local tier (the edge): each save's snapshot
(this process's part, copied to host memory) is what the step pays; its write to the node's
directory (straight into a file there, placed by its name) and the partner's copy run in the
background, one at a time, where saves are in the background and MPI allows a thread beside
the training; every ``shared_every``-th save goes to the shared directory too, and so does
the save after one the tier did not take whole; a restore takes the tier's newest step where
it is the newest whole across the tiers. Importing this module imports JAX."""

from __future__ import annotations

import time
from typing import Any, Callable, Dict, List, Optional, Tuple

from mpi_resolver.core.logs import log_once
from mpi_resolver.jax.local_parts import from_part, packed_file, part_snapshot
from mpi_resolver.jax.restoring import Restored
from mpi_resolver.long_jobs.background import BackgroundWrites, Written
from mpi_resolver.long_jobs.local_saves import LocalSaves
from mpi_resolver.long_jobs.local_tier import PACKED, Packed
from mpi_resolver.long_jobs.tiers import SharedTurns

__all__ = ["TierSaves", "Whole"]

#: Told of each local save once it is whole: (step, what the training paid, the write in
#: the background or None, the part's bytes, whether the step went to the tier alone).
Whole = Callable[[int, float, Optional[float], Optional[int], bool], None]


class TierSaves:
    """The periodic saves to ``local`` (open or not yet), every ``shared_every``-th also to
    ``directory`` (the caller's), written in the background where ``background``; ``whole``
    is told of each local save that ended whole. ``last_write``: the newest local write's
    seconds (None: none yet, or written at once)."""

    def __init__(self, local: LocalSaves, shared_every: int, background: bool,
                 directory: str, whole: Whole) -> None:
        self.local, self.directory = local, directory
        self.turns = SharedTurns(shared_every)
        self._background, self._whole = background, whole
        self.writes: Optional[BackgroundWrites] = None
        self.last_write: Optional[float] = None
        self._alone = False  # whether the step in flight goes to the tier alone

    def restore(self, state: Any, coord: Any, key: str,
                steps: Callable[[], List[int]]) -> Optional[Restored]:
        """Returns the tier's newest step where it is the newest whole across the tiers (every
        process; ``steps``: the shared directory's, listed by process 0 and told to all over
        ``coord``), else None (the shared directory's, or none anywhere)."""
        self.local.open()
        listed = ",".join(map(str, steps())) if coord.chief else ""
        told = coord.agree(f"{key}_shared", listed, "which checkpoints there are")
        shared = [int(s) for s in told.split(",") if s]
        found = self.local.restore(shared, lambda blob: from_part(blob, state))
        if found is None:
            return None
        step, tree, where = found
        if coord.chief:
            log_once(f"restored step {step} from the node-local tier ({where}); the newest in "
                     f"{self.directory}: {f'step {max(shared)}' if shared else 'none'}")
        return Restored(step, tree, f"{step} (node-local: {where})")

    def save(self, step: int, tree: Any) -> Tuple[float, bool]:
        """Saves ``tree`` at ``step`` to the tier after the write in flight (every process);
        returns (what the training paid: the snapshot, or the whole save written at once;
        whether the shared directory takes this step too)."""
        start = time.monotonic()
        self.settle()
        if self.local.tier is None:  # the script did not restore first
            self.local.open()
        if self.writes is None and self._background and self.local.threads_ok():
            self.writes = BackgroundWrites()
        arrays = part_snapshot(tree)
        shared = self.turns.plan()
        self._alone = not shared
        stall = time.monotonic() - start
        if self.writes is not None:
            self.writes.start(step, stall, lambda: self.local.write(step, self._pack(arrays)))
            return stall, shared
        why = self.local.write(step, self._pack(arrays))
        took = time.monotonic() - start
        if why is not None:
            log_once(f"the node-local save at step {step} is not whole ({why}): saved to "
                     f"{self.directory} instead")
            return took, True
        self._whole(step, took, None, self.local.last_bytes, self._alone)
        return took, shared

    def _pack(self, arrays: Dict[str, Any]) -> Callable[[], Packed]:
        """Returns what writes ``arrays`` as this process's part: straight into a file of
        the tier's, placed by its name (no copy in memory)."""
        tier = self.local.tier
        assert tier is not None  # (open)
        return lambda: packed_file(arrays, tier.scratch() + PACKED)

    def done(self) -> None:
        """Records the write that ended since the last call, if one did (at each step)."""
        if self.writes is not None:
            self._ended(self.writes.done())

    def settle(self) -> None:
        """Waits for the write in flight, if one is, and records it (every process)."""
        if self.writes is not None:
            self._ended(self.writes.wait())

    def _ended(self, written: Optional[Written]) -> None:
        """Records a background write that ended: whole, or the next save goes to the
        shared directory too (one line)."""
        if written is None:
            return
        why = written.error or written.result
        if why is not None:
            self.turns.missed()
            log_once(f"the node-local save at step {written.step} is not whole ({why}): the "
                     f"next save goes to {self.directory} too")
            return
        self.last_write = written.seconds
        self._whole(written.step, written.stall, written.seconds, self.local.last_bytes,
                    self._alone)
