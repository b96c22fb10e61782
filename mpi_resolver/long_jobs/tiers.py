"""The node-local tier of a long job's checkpoints, as rules (pure: no file, no network):
where each node's local directory is (a path that may name the node as Slurm's file name
patterns do), whether one path is seen by two nodes (then it is the
shared directory, not a tier), whether a save fits in what is free, which local saves go to
the shared directory too, each node's partner (the node that keeps a copy of its part; where
every part is the same whole state, its own part is that copy), and the step a restore takes
across the tiers: the newest that every node has whole, from its own copy or its partner's,
else the newest of the shared directory.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Collection, Dict, List, Mapping, Optional, Sequence

from mpi_resolver.core.errors import FormatError

__all__ = ["local_path", "seen_by_others", "room_for", "to_shared", "SharedTurns", "partner",
           "partner_ranks", "Restore", "restore_step", "restore_across", "holder", "replicas",
           "OWN", "PARTNER", "SHARED", "ROOM"]

#: Where a node's part comes from at a restore.
OWN, PARTNER, SHARED = "own", "partner", "shared"
#: The free space a save wants: the last save's bytes and a fifth more (the next may grow).
ROOM = 1.2
_PATTERN = re.compile(r"%(.)")
_FORMS = "%N (the node's name), %n (its index in the job), %j (the job's id), %u (the user), %%"


def local_path(pattern: str, node: str, index: int, job: Optional[str], user: str,
               name: str) -> str:
    """Returns the local directory ``pattern`` names on node ``node`` (the ``index``-th of
    the job's nodes), Slurm's file name patterns expanded (``_FORMS``); ``name``: the
    variable or argument that gave it, for the errors.

    Raises:
      FormatError: a pattern that is not an absolute path, names no job outside one, or has
        another '%' than those, naming ``name`` and the forms.
    """
    values = {"N": node, "n": str(index), "u": user, "%": "%", "j": job}

    def one(found: "re.Match[str]") -> str:
        value = values.get(found.group(1))
        if value is None:
            raise FormatError(
                f"{name}={pattern!r}: %{found.group(1)} "
                + ("names the job's id, and this is not a Slurm job" if found.group(1) == "j"
                   else "is not a pattern it takes") + f"; it takes {_FORMS}")
        return value

    if not pattern.startswith("/"):
        raise FormatError(f"{name}={pattern!r} is not an absolute path: give a node-local "
                          "directory such as /dev/shm/ckpt-%j or /local/$USER/ckpt-%N")
    return _PATTERN.sub(one, pattern)


def seen_by_others(markers: Mapping[str, Collection[str]]) -> List[str]:
    """Returns the nodes whose local directory holds another node's marker (``markers``:
    each node's name and the names of the markers it found there), sorted: the same path
    seen by two nodes is a shared directory, not a node's own."""
    return sorted(node for node, found in markers.items()
                  if any(other != node for other in found))


def room_for(free: int, last_bytes: Optional[int]) -> bool:
    """Returns whether ``free`` bytes hold the next save, the last one's ``last_bytes`` and
    a fifth more (None: none was saved yet, so nothing says it will not fit)."""
    return last_bytes is None or free >= last_bytes * ROOM


def to_shared(local_saves: int, every: int) -> bool:
    """Returns whether the ``local_saves``-th local save (counted from 1) also goes to the
    shared directory: every ``every``-th one."""
    return local_saves > 0 and local_saves % every == 0


class SharedTurns:
    """Which local saves of a run go to the shared directory too: every ``every``-th
    (to_shared), and the one after a save the tier did not take whole (``missed``)."""

    def __init__(self, every: int) -> None:
        self.every, self.saves, self._next = every, 0, False

    def plan(self) -> bool:
        """Counts a local save; returns whether the shared directory takes it too."""
        self.saves += 1
        shared = self._next or to_shared(self.saves, self.every)
        self._next = False
        return shared

    def missed(self) -> None:
        """Notes a local save the tier did not take whole: the next goes shared too."""
        self._next = True


def partner(index: int, count: int) -> Optional[int]:
    """Returns the node that keeps node ``index``'s copy (the next in the job, the last's is
    the first), None where the job has one node."""
    return (index + 1) % count if count > 1 else None


def partner_ranks(nodes: Sequence[str]) -> List[Optional[int]]:
    """Returns, for each rank (``nodes``: each rank's node, in rank order), the rank that
    keeps a copy of its part: on the partner of its node (the nodes in the order they first
    come), the rank of the same local index, or of that index modulo the partner node's rank
    count; None where the job has one node."""
    order = list(dict.fromkeys(nodes))
    ranks_of = {node: [r for r, n in enumerate(nodes) if n == node] for node in order}
    out: List[Optional[int]] = []
    for rank, node in enumerate(nodes):
        other = partner(order.index(node), len(order))
        if other is None:
            out.append(None)
            continue
        there = ranks_of[order[other]]
        out.append(there[ranks_of[node].index(rank) % len(there)])
    return out


@dataclass(frozen=True)
class Restore:
    """The step to restore (None: none anywhere), and where each node reads its part:
    OWN, PARTNER or SHARED."""

    step: Optional[int]
    sources: List[str]


def restore_step(own: Sequence[Collection[int]], copies: Sequence[Collection[int]],
                 shared: Collection[int]) -> Restore:
    """Returns the step a restore takes: the newest step that every node has, its own part
    in its local directory (``own[i]``) or its partner's copy of it (``copies[i]``), or that
    the shared directory has whole (``shared``); at one step, the local tier first (faster),
    a node's own copy before its partner's."""
    steps = set(shared).union(*own, *copies)
    for step in sorted(steps, reverse=True):
        local = [OWN if step in mine else PARTNER if step in kept else None
                 for mine, kept in zip(own, copies, strict=True)]
        if own and None not in local:
            return Restore(step, [s for s in local if s is not None])
        if step in shared:
            return Restore(step, [SHARED] * len(own))
    return Restore(None, [])


def restore_across(seen: Sequence[Mapping[int, Collection[int]]],
                   shared: Collection[int]) -> Restore:
    """Returns restore_step's answer where ``seen[h]`` is what rank ``h`` finds in its local
    directory (each origin rank's steps whose part is there whole): a rank's own part is what
    it sees of its own; a partner's copy, what another rank sees of it (on another node: a
    rank of the same node would see it in the same directory)."""
    ranks = range(len(seen))
    own = [set(seen[r].get(r, ())) for r in ranks]
    copies = [set().union(*(seen[h].get(r, ()) for h in ranks if h != r)) for r in ranks]
    return restore_step(own, copies, shared)


def holder(seen: Sequence[Mapping[int, Collection[int]]], origin: int,
           step: int) -> Optional[int]:
    """Returns the lowest rank other than ``origin`` that has ``origin``'s part of ``step``
    (``seen`` as restore_across takes it), None where none has."""
    return next((h for h, found in enumerate(seen)
                 if h != origin and step in found.get(origin, ())), None)


def replicas(seen: Sequence[Mapping[int, Collection[int]]]) -> List[Dict[int, List[int]]]:
    """Returns ``seen`` (as restore_across takes it) where every rank's part is the same
    whole state (TensorFlow's MultiWorkerMirroredStrategy: each worker holds all of it): each
    rank holds every rank's part of the steps of its own (another rank's part is its copy;
    any copy it holds besides is not counted)."""
    return [{origin: sorted(found.get(h, ())) for origin in range(len(seen))}
            for h, found in enumerate(seen)]
