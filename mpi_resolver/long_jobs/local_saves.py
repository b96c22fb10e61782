"""The node-local tier of a long job, between its processes (framework-free: the parts' bytes
are the edge's): each save writes every process's part to its node's directory
(long_jobs.local_tier) and sends a copy to its partner process on the next node (``World``'s
link: MPI, the communicator the package already has), none where every part is the same whole
state (``replicated``: the partner's own part is the copy); a restore takes the newest step whole
across the tiers (long_jobs.tiers), every process the same one, a part its node lost fetched
back from the partner's copy. The small agreements go over the framework's coordinator
(``Meeting``: JAX's or TensorFlow's coordination service)."""

from __future__ import annotations

import getpass
import json
import os
from typing import (Any, Callable, Collection, Dict, List, Mapping, NoReturn, Optional,
                    Protocol, Sequence, Tuple)

from mpi_resolver.core.errors import ConfigurationError
from mpi_resolver.core.logs import log_once
from mpi_resolver.long_jobs.inbox import Inbox
from mpi_resolver.long_jobs.local_tier import Blob, LocalTier, Packed, Part
from mpi_resolver.long_jobs.manifest import this_job
from mpi_resolver.long_jobs.resume import first_line
from mpi_resolver.long_jobs.slow_ranks import node_name
from mpi_resolver.long_jobs.tiers import (OWN, PARTNER, SHARED, holder, local_path,
                                          partner_ranks, replicas, restore_across, room_for,
                                          seen_by_others)

__all__ = ["LocalSaves", "Meeting", "World", "Link", "PARTNER_WITHIN", "KEEP_LOCAL"]

#: Seconds a partner has to take a copy (or give one back at a restore): past them the save
#: falls back to the shared directory, the partner named.
PARTNER_WITHIN = 120.0
#: Local steps kept in a node's directory (its own parts and its partners' copies): the
#: newest whole one alone, since a restore takes the newest step whole across the tiers (one
#: of its parts unreadable sends it to the shared directory, not to an older local step), and
#: each step kept holds a state's parts in the node's memory or disk.
KEEP_LOCAL = 1


class Link(Protocol):
    """Parts between processes (exchange.part_link.PartLink)."""

    def transfer(self, sends: Mapping[int, Blob], sources: Collection[int], seconds: float,
                 into: Optional[Callable[[int, int], Any]] = None
                 ) -> Tuple[Dict[int, Blob], List[int]]: ...


class World(Protocol):
    """MPI's world as the tier reaches it (exchange.part_link.World)."""

    def rank(self) -> int: ...

    def link(self, seconds: float) -> Link: ...

    def threads_multiple(self) -> bool: ...


class Meeting(Protocol):
    """The processes' coordinator: this one's ``rank`` of ``size``, process 0 the ``chief``;
    ``gather`` returns every process's value of a key, in process order, ``agree`` process
    0's; ``leave`` before every process ends after one of them: process 0 (which holds the
    meeting point) last (agreement.leave_last)."""

    rank: int
    size: int
    chief: bool

    def gather(self, key: str, value: str, what: str) -> List[str]: ...

    def agree(self, key: str, value: str, what: str) -> str: ...

    def leave(self, key: str) -> None: ...


class LocalSaves:
    """The local tier at ``pattern`` (``name``: the variable or argument that gave it) for
    the processes of ``coord``, partner copies over ``world``, on ``node`` (else the one
    Slurm's variables or the host name give); ``key`` keeps its agreements apart;
    ``replicated``: every process's part is the same whole state (TensorFlow's
    MultiWorkerMirroredStrategy), so a partner's own part is the copy: none is sent at a save,
    and a process that lost its part takes its partner's at the restore. ``open`` before any
    save or restore, on every process."""

    def __init__(self, pattern: str, coord: Meeting, key: str, name: str, world: World,
                 node: Optional[str] = None, replicated: bool = False) -> None:
        self.pattern, self.coord, self.key, self.name = pattern, coord, f"{key}_local", name
        self.world, self.node = world, node or node_name(os.environ)
        self.replicated = replicated
        self.tier: Optional[LocalTier] = None
        self.link: Optional[Link] = None  # where MPI runs across the processes
        self.partners: List[Optional[int]] = []
        self.last_bytes: Optional[int] = None
        self._agreements = 0  # numbers each agreement: a step saved or restored twice

    def open(self) -> None:
        """Makes this node's directory, checks that no other node sees it, and starts the
        partner link (MPI's ranks must be the processes'; else one warning, no copies).

        Raises:
          ConfigurationError: on every process, where one cannot make its directory, or the
            directory is shared by two nodes, naming it.
        """
        node, rank = self.node, self.world.rank()
        told = self._gathered("nodes", [node, rank], "its node")
        nodes = [n for n, _ in told]
        index = list(dict.fromkeys(nodes)).index(node)
        path = local_path(self.pattern, node, index, this_job(os.environ), getpass.getuser(),
                          self.name)
        self.tier = LocalTier(path, node, self.name)
        self._together("open", self.tier.open)
        markers = self._gathered("markers", self.tier.markers(), "its directory's markers")
        shared = seen_by_others(dict(zip(nodes, markers, strict=True)))
        if shared:
            self._refuse(ConfigurationError(
                f"{self.name}={self.pattern!r}: {path} is one directory that nodes "
                f"{', '.join(shared)} share, not each node's own: name the node in it (%N) or "
                "give a directory on each node's own disk (/dev/shm, $TMPDIR)"))
        self.partners = partner_ranks(nodes)
        self.link = self._link([r for _, r in told])

    def write(self, step: int, pack: Callable[[], Part]) -> Optional[str]:
        """Writes this process's part of ``step`` (what ``pack`` returns: its bytes, or its
        file; an OSError it raises: no part) here and at its partner (every process; from a
        thread of its own where saves are in the background); returns None where every part
        and copy is whole, else why not (the same on every process, naming the process)."""
        tier = self.tier
        assert tier is not None  # open() first
        blob, why = self._own(tier, step, pack)
        if self.copying:  # every process, a part or none (its process says why)
            copied = self._copies(tier, step, blob, keep=why is None)
            why = why or copied
        self.last_bytes = len(blob) or self.last_bytes
        failed = self._trouble(f"saved_{step}", why, "its local save")
        if failed:
            return failed
        tier.keep_newest(KEEP_LOCAL)
        return None

    @property
    def copying(self) -> bool:
        """Returns whether a save sends each part's copy to its partner: MPI runs across the
        processes (``open`` made the link), and the parts are not ``replicated``."""
        return self.link is not None and not self.replicated

    def _own(self, tier: LocalTier, step: int,
             pack: Callable[[], Part]) -> Tuple[Blob, Optional[str]]:
        """Writes this process's part of ``step`` to ``tier``; returns (its bytes, its pages
        mapped at once where they will be sent (``copying``): none where there is no part,
        why the part is not whole or None)."""
        free = tier.free()
        if not room_for(free, self.last_bytes):
            return b"", f"{tier.directory} has {free} bytes free, too few for {self.last_bytes}"
        made, why = _packed(pack)
        if why is not None or not isinstance(made, Packed):
            return made, why or _attempt(tier.write, step, self.coord.rank, made)
        why = _attempt(tier.place, step, self.coord.rank, made.path)
        if why is not None:
            return b"", why
        return _packed(lambda: tier.mapped(step, self.coord.rank, populate=self.copying))

    def _copies(self, tier: LocalTier, step: int, blob: Blob, keep: bool) -> Optional[str]:
        """Sends ``blob`` (none: no part) to this process's partner and receives the copies
        its senders send, each into its file where ``keep`` (else none written: its own part
        failed); returns why one is not kept, else None."""
        partner = self.partners[self.coord.rank]  # (open() made one per process)
        sends = {partner: blob} if partner is not None else {}
        inbox, link = Inbox(tier, step, keep), self.link
        assert link is not None  # copying
        received, late = link.transfer(sends, self._senders(), PARTNER_WITHIN, inbox.buffer)
        why = inbox.keep(received)
        if late:
            why = why or (f"process {', '.join(map(str, late))} took no copy within "
                          f"{PARTNER_WITHIN:g} s")
        return why

    def threads_ok(self) -> bool:
        """Returns whether a write may run in a thread beside the training: it sends no copy
        (``copying``), or MPI allows every thread."""
        return not self.copying or self.world.threads_multiple()

    def restore(self, shared: Sequence[int],
                unpack: Callable[[Blob], Any]) -> Optional[Tuple[int, Any, str]]:
        """Returns (the step, ``unpack`` of this process's part, where each process read its
        part) where the newest step whole across the tiers is a local one (``shared``: the
        shared directory's steps, as process 0 listed them), else None (the shared
        directory's, or none anywhere). Every process calls it; a part that cannot be read
        or unpacked makes it None on every process, with one warning."""
        assert self.tier is not None  # open() first
        seen = [{int(o): steps for o, steps in found.items()} for found in
                self._gathered("found", self.tier.found(), "the parts in its local directory")]
        if self.link is None:  # no way to fetch another node's copy
            seen = [{r: found.get(r, [])} for r, found in enumerate(seen)]
        elif self.replicated:  # every part a copy of every other
            seen = replicas(seen)
        chosen = restore_across(seen, shared)
        if chosen.step is None or chosen.sources[0] == SHARED:
            return None
        step, rank = chosen.step, self.coord.rank
        value, why = None, None
        try:
            blob = self._fetch(seen, step, chosen.sources) if PARTNER in chosen.sources \
                else None
            value = unpack(self.tier.read(step, rank) if blob is None else blob)
        except Exception as e:  # noqa: BLE001 - a part that cannot be read: the shared one
            why = first_line(e)
        failed = self._trouble(f"read_{step}", why, "how it read its part")
        if failed:
            log_once(f"the local tier's step {step} could not be read ({failed}): restoring "
                     "from the shared directory")
            return None
        return step, value, _sources(chosen.sources, self.replicated)

    def remove(self) -> None:
        """Removes this node's directory (every process, once the training completed: each
        node's memory or disk given back; the final step is in the checkpoint directory)."""
        if self.tier is not None:
            self.tier.remove()

    def _fetch(self, seen: Sequence[Mapping[int, Sequence[int]]], step: int,
               sources: Sequence[str]) -> Optional[Blob]:
        """Sends the copies this process holds of the parts other processes lost (its own part
        where ``replicated``), receives its own where it lost it; returns it (None: its own is
        here)."""
        assert self.tier is not None and self.link is not None
        rank = self.coord.rank
        origins = [o for o, source in enumerate(sources)
                   if source == PARTNER and holder(seen, o, step) == rank]
        if self.replicated:  # its own part is each one's copy: read once
            sends = dict.fromkeys(origins, self.tier.read(step, rank)) if origins else {}
        else:
            sends = {o: self.tier.read(step, o) for o in origins}
        mine = holder(seen, rank, step) if sources[rank] == PARTNER else None
        received, late = self.link.transfer(sends, [] if mine is None else [mine],
                                            PARTNER_WITHIN)
        if mine is None:
            return None
        if late:
            raise OSError(f"process {mine} did not send its copy within {PARTNER_WITHIN:g} s")
        return received[mine]

    def _senders(self) -> List[int]:
        """Returns the processes whose partner this process is."""
        return [r for r, p in enumerate(self.partners) if p == self.coord.rank]

    def _together(self, what: str, act: Any) -> None:
        """Runs ``act`` on every process; raises its ConfigurationError on all where it
        raised one on any."""
        why = ""
        try:
            act()
        except ConfigurationError as e:
            why = str(e)
        said = [one for one in self.coord.gather(self._next(what), why, f"its {what}") if one]
        if said:
            self._refuse(ConfigurationError(said[0]))

    def _refuse(self, error: ConfigurationError) -> NoReturn:
        """Raises ``error``, which every process raises after an agreement: process 0 once
        the others have read it (Meeting.leave: its end closes the meeting point)."""
        self.coord.leave(self._next("left"))
        raise error

    def _trouble(self, key: str, why: Optional[str], what: str) -> Optional[str]:
        """Gathers each process's ``why`` (None: all went well); returns the first one said,
        naming its process, the same on every process, else None."""
        said = self.coord.gather(self._next(key), why or "", what)
        return next((f"process {p}: {one}" for p, one in enumerate(said) if one), None)

    def _gathered(self, key: str, value: Any, what: str) -> List[Any]:
        """Returns every process's ``value`` (as JSON), in process order."""
        return [json.loads(x) for x in self.coord.gather(self._next(key), json.dumps(value),
                                                         what)]

    def _next(self, name: str) -> str:
        """Returns the key of the next agreement, ``name`` numbered (every process makes its
        agreements in the same order: a key is never set twice)."""
        self._agreements += 1
        return f"{self.key}_{self._agreements}_{name}"

    def _link(self, ranks: Sequence[int]) -> Optional[Link]:
        """Returns the partner link over MPI's world, None (one warning) where MPI does not
        run, or its ranks are not the processes'."""
        if self.coord.size == 1:
            return None
        if list(ranks) != list(range(self.coord.size)):
            if self.coord.chief:
                log_once("the node-local tier keeps no partner copies: MPI is not running "
                         "across this job's processes (launch with `srun --mpi=pmix` or "
                         "`mpirun`): a node lost loses its parts, and the restore takes the "
                         "shared directory's checkpoint")
            return None
        return self.world.link(PARTNER_WITHIN)


def _packed(pack: Callable[[], Any]) -> Tuple[Any, Optional[str]]:
    """Returns (``pack()``, None), or (no bytes, why) where it raised an OSError."""
    try:
        return pack(), None
    except OSError as e:
        return b"", first_line(e)


def _attempt(act: Any, *args: Any) -> Optional[str]:
    """Runs ``act(*args)``; returns None, or why it failed (one line)."""
    try:
        act(*args)
    except OSError as e:
        return first_line(e)
    return None


def _sources(sources: Sequence[str], replicated: bool) -> str:
    """Returns where the processes read their parts, for the line: 'own', or the processes
    that took their partner's copy (``replicated``: its partner's own part)."""
    fetched = [str(r) for r, s in enumerate(sources) if s == PARTNER]
    kept = "part" if replicated else "copy"
    return OWN if not fetched else f"process {', '.join(fetched)} from its partner's {kept}"
