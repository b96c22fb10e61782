"""long_jobs.local_saves, the node-local tier between processes, on real files: each process a
thread of this test, one per node, meeting through an in-memory gather and sending parts
through an in-memory link (the real ones, JAX's and TensorFlow's coordination services and
MPI, run in tests/jax/test_local_tier.py and tests/cluster). Saves, partner copies (each
received straight into its file: long_jobs.inbox) or none where every part is the whole state,
the restore across the tiers (own, partner's copy, the shared directory's), and each way a save
or a restore goes wrong, the same answer on every process."""

from __future__ import annotations

import logging
import math
import shutil
import threading
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Tuple

import pytest

from mpi_resolver.core import logs
from mpi_resolver.core.errors import ConfigurationError
from mpi_resolver.long_jobs import local_saves
from mpi_resolver.long_jobs.local_saves import KEEP_LOCAL, LocalSaves
from mpi_resolver.long_jobs.local_tier import PACKED, LocalTier, Packed

pytestmark = pytest.mark.unit

NAME = "MPI_RESOLVER_LOCAL_DIR"
WAIT = 10.0  # seconds a thread waits for the others (a bug, not a speed)


class Room:
    """The processes' meeting point and their link's mailbox, in memory; ``close`` stands for
    process 0's end (its process holds the coordination service): every read fails after it."""

    def __init__(self, size: int, deaf: Tuple[int, ...] = (),
                 cut: Tuple[int, ...] = ()) -> None:
        self.size, self.deaf, self.cut = size, deaf, cut  # cut: a rank whose receives break
        self.values: Dict[Tuple[str, int], Any] = {}
        self.cond = threading.Condition()
        self.closed = False

    def close(self) -> None:
        with self.cond:
            self.closed = True
            self.cond.notify_all()

    def put(self, key: Tuple[str, int], value: Any) -> None:
        with self.cond:
            self.values[key] = value
            self.cond.notify_all()

    def take(self, key: Tuple[str, int], seconds: float) -> Optional[Any]:
        with self.cond:
            if not self.cond.wait_for(lambda: key in self.values or self.closed, seconds):
                return None
            return None if self.closed else self.values[key]


class Member:
    """One process's coordinator (local_saves.Meeting); a ``late`` one reads the others'
    values that many seconds after it said its own."""

    def __init__(self, room: Room, rank: int, late: float = 0.0) -> None:
        self.room, self.rank, self.size, self.chief = room, rank, room.size, rank == 0
        self.late = late
        self.asked: List[Tuple[str, str]] = []  # (key, what) of each gather, in order
        self.left: List[str] = []  # the keys of each leave, in order

    def gather(self, key: str, value: str, what: str) -> List[str]:
        assert (key, self.rank) not in self.room.values, f"{key} set twice"
        self.asked.append((key, what))
        self.room.put((key, self.rank), value)
        time.sleep(self.late)
        said = [self.room.take((key, r), WAIT) for r in range(self.size)]
        assert None not in said, f"a process did not say {what}"
        return [str(s) for s in said]

    def leave(self, key: str) -> None:
        self.left.append(key)
        if not self.chief:
            self.room.put((key, self.rank), "read")
            return
        missing = [r for r in range(1, self.size) if self.room.take((key, r), WAIT) is None]
        assert not missing, f"{missing} did not say they read all"


class Link:
    """One process's link (local_saves.Link): sends to a deaf rank are never taken; each
    part received into the buffer ``into`` gives, as MPI does (part_link)."""

    def __init__(self, room: Room, rank: int) -> None:
        self.room, self.rank, self.count = room, rank, 0

    def transfer(self, sends: Dict[int, bytes], sources: List[int], seconds: float,
                 into: Optional[Callable[[int, int], Any]] = None
                 ) -> Tuple[Dict[int, Any], List[int]]:
        self.count += 1
        assert all(isinstance(d, int) for d in sends), sends  # a rank, never None
        if self.rank in self.room.deaf:
            return {}, sorted(sources)
        for dest, blob in sends.items():
            self.room.put((f"part {self.count} to {dest}", self.rank), bytes(blob))
        got = {s: self.room.take((f"part {self.count} to {self.rank}", s), seconds)
               for s in sources}
        late = {s for s, b in got.items() if b is None} | \
            {d for d in sends if d in self.room.deaf}
        if self.rank in self.room.cut:  # each part's buffer given, its bytes never all come
            for s, b in got.items():
                if into is not None and b is not None:
                    into(s, len(b))
            return {}, sorted(set(sources) | late)
        return {s: filled(into, s, b) for s, b in got.items() if b is not None}, sorted(late)


def filled(into: Optional[Callable[[int, int], Any]], source: int, data: bytes) -> Any:
    """Returns ``data`` in the buffer ``into(source, its size)`` gives (else itself)."""
    if into is None:
        return data
    buffer = into(source, len(data))
    buffer[:] = data
    return buffer


class World:
    """One process's MPI world (local_saves.World): rank -1 without MPI."""

    def __init__(self, room: Room, rank: int, mpi: bool = True, threads: bool = True) -> None:
        self.room, self._rank, self.mpi, self.threads = room, rank, mpi, threads

    def rank(self) -> int:
        return self._rank if self.mpi else -1

    def link(self, seconds: float) -> Link:
        assert seconds == local_saves.PARTNER_WITHIN
        return Link(self.room, self._rank)

    def threads_multiple(self) -> bool:
        return self.threads


def together(room: Room, act: Callable[[int], Any], ends: bool = False) -> List[Any]:
    """Runs ``act(rank)`` for every rank of ``room`` in a thread each; returns each one's
    result or the exception it raised, in rank order. Where every process ``ends`` after
    ``act``, process 0's end closes the room."""
    out: List[Any] = [None] * room.size

    def one(rank: int) -> None:
        try:
            out[rank] = act(rank)
        except Exception as e:  # noqa: BLE001 - the test looks at it
            out[rank] = e
        if ends and rank == 0:
            room.close()

    threads = [threading.Thread(target=one, args=(r,)) for r in range(room.size)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(3 * WAIT)
    return out


def opened(room: Room, pattern: str, mpi: bool = True, nodes: str = "12",
           replicated: bool = False) -> List[LocalSaves]:
    """Returns every process's LocalSaves, open (process r on node{nodes[r]})."""
    saves = [LocalSaves(pattern, Member(room, r), "test", NAME, World(room, r, mpi),
                        node=f"node{nodes[r]}", replicated=replicated)
             for r in range(room.size)]
    out = together(room, lambda r: saves[r].open())
    assert out == [None] * room.size, out
    return saves


@pytest.fixture(autouse=True)
def fresh_logs(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(logs, "_logged", set())


def blob(rank: int, step: int) -> bytes:
    return f"part of process {rank} at step {step}".encode()


def save(room: Room, saves: List[LocalSaves], step: int,
         pack: Optional[Callable[[int], bytes]] = None) -> List[Optional[str]]:
    """Every process's write of ``step``: its part ``pack(rank)`` (else ``blob``'s)."""
    return together(room, lambda r: saves[r].write(
        step, lambda: (pack or (lambda rank: blob(rank, step)))(r)))


def restore(room: Room, saves: List[LocalSaves], shared: List[int] = (),  # type: ignore
            unpack: Callable[[bytes], Any] = bytes) -> List[Any]:
    return together(room, lambda r: saves[r].restore(list(shared), unpack))


# ------------------------------------------------------------------------------ saves
def test_a_save_leaves_each_part_on_its_node_and_a_copy_on_its_partner_s(tmp_path: Path) -> None:
    room = Room(2)
    saves = opened(room, f"{tmp_path}/local-%N")
    assert save(room, saves, 10) == [None, None]
    one, two = tmp_path / "local-node1", tmp_path / "local-node2"
    assert (one / "10" / "part-0").read_bytes() == blob(0, 10)
    assert (one / "10" / "part-1").read_bytes() == blob(1, 10)  # node2's copy, on node1
    assert (two / "10" / "part-1").read_bytes() == blob(1, 10)
    assert (two / "10" / "part-0").read_bytes() == blob(0, 10)
    assert [s.partners for s in saves] == [[1, 0], [1, 0]]
    assert saves[0].last_bytes == len(blob(0, 10))


@pytest.mark.parametrize("nodes", ["12", "112"])
def test_parts_each_the_whole_state_are_kept_on_their_node_alone_none_sent(
        tmp_path: Path, nodes: str) -> None:
    """Replicated (TensorFlow's): a part's partner holds its own part of the step, its copy."""
    room = Room(len(nodes))
    saves = opened(room, f"{tmp_path}/local-%N", nodes=nodes, replicated=True)
    assert save(room, saves, 10) == [None] * len(nodes)
    ranks: Dict[str, List[str]] = {}
    for rank, node in enumerate(nodes):
        ranks.setdefault(f"local-node{node}", []).append(f"part-{rank}")
    for name, parts in ranks.items():
        assert sorted(p.name for p in (tmp_path / name / "10").iterdir()) == parts
    assert [s.link is not None and s.link.count for s in saves] == [0] * len(nodes)  # type: ignore
    assert saves[-1].last_bytes == len(blob(len(nodes) - 1, 10))


def test_the_newest_steps_are_kept_on_each_node(tmp_path: Path) -> None:
    room = Room(2)
    saves = opened(room, f"{tmp_path}/local-%N")
    for step in (10, 20, 30):
        assert save(room, saves, step) == [None, None]
    assert KEEP_LOCAL == 1
    for node in ("node1", "node2"):
        assert sorted(p.name for p in (tmp_path / f"local-{node}").iterdir()
                      if p.name.isdigit()) == ["30"]


def test_a_partner_that_takes_no_copy_is_named_on_every_process(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(local_saves, "PARTNER_WITHIN", 0.2)
    room = Room(2, deaf=(1,))
    saves = opened(room, f"{tmp_path}/local-%N")
    said = save(room, saves, 10)
    assert said[0] == said[1] == "process 0: process 1 took no copy within 0.2 s"
    assert sorted(p.name for p in (tmp_path / "local-node1").iterdir()
                  if p.name.isdigit()) == ["10"]  # whole steps stay: nothing removed


def test_a_copy_cut_short_is_named_and_leaves_no_file(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    room = Room(2, cut=(0,))
    saves = opened(room, f"{tmp_path}/local-%N")
    said = save(room, saves, 10)
    assert said[0] == said[1] == "process 0: process 1 took no copy within 120 s"
    assert sorted(p.name for p in (tmp_path / "local-node1" / "10").iterdir()) == ["part-0"]


def test_a_part_packed_as_a_file_is_placed_and_its_pages_sent(tmp_path: Path) -> None:
    room = Room(2)
    saves = opened(room, f"{tmp_path}/local-%N")

    def pack(rank: int) -> Packed:
        tier = saves[rank].tier
        assert tier is not None
        path = tier.scratch() + PACKED
        Path(path).write_bytes(blob(rank, 10) * 3)
        return Packed(path)

    assert save(room, saves, 10, pack) == [None, None]  # type: ignore[arg-type]
    for node, rank in (("node1", 0), ("node2", 1)):
        here = tmp_path / f"local-{node}"
        assert (here / "10" / f"part-{rank}").read_bytes() == blob(rank, 10) * 3
        assert (here / "10" / f"part-{1 - rank}").read_bytes() == blob(1 - rank, 10) * 3
        assert sorted(p.name for p in here.iterdir()) == ["10", f"node-{node}"]
    assert saves[1].last_bytes == 3 * len(blob(1, 10))


@pytest.mark.parametrize("mpi, replicated, populate", [
    (True, False, [True, True]),
    (False, False, [False, False]),
    (True, True, [False, False]),  # each part the whole state: none sent
])
def test_a_part_s_pages_are_mapped_at_once_only_to_be_sent(tmp_path: Path, monkeypatch,
                                                           mpi: bool, replicated: bool,
                                                           populate: list) -> None:
    """With a partner link its pages go to the partner; without one only its size is read."""
    asked: List[bool] = []
    mapped = LocalTier.mapped

    def spy(self: LocalTier, step: int, rank: int, *, populate: bool) -> Any:
        asked.append(populate)
        return mapped(self, step, rank, populate=populate)
    monkeypatch.setattr(LocalTier, "mapped", spy)
    room = Room(2)
    saves = opened(room, f"{tmp_path}/local-%N", mpi=mpi, replicated=replicated)

    def pack(rank: int) -> Packed:
        tier = saves[rank].tier
        assert tier is not None
        path = tier.scratch() + PACKED
        Path(path).write_bytes(blob(rank, 10))
        return Packed(path)

    assert save(room, saves, 10, pack) == [None, None]  # type: ignore[arg-type]
    assert asked == populate and saves[1].last_bytes == len(blob(1, 10)), asked


def test_a_packed_part_that_cannot_be_placed_is_named_and_copied_nowhere(
        tmp_path: Path) -> None:
    room = Room(2)
    saves = opened(room, f"{tmp_path}/local-%N")
    (tmp_path / "local-node2" / "10").write_text("a file where the step's directory goes")

    def pack(rank: int) -> Any:
        tier = saves[rank].tier
        assert tier is not None
        path = tier.scratch() + PACKED
        Path(path).write_bytes(blob(rank, 10))
        return Packed(path) if rank == 1 else blob(rank, 10)

    said = save(room, saves, 10, pack)
    want = f"process 1: [Errno 17] File exists: '{tmp_path}/local-node2/10'"
    assert said == [want, want]
    assert sorted(p.name for p in (tmp_path / "local-node1" / "10").iterdir()) == ["part-0"]
    assert saves[1].last_bytes is None  # no part: no size to go by
    assert not [p for p in (tmp_path / "local-node2").iterdir() if p.name.endswith(PACKED)]


def test_a_copy_without_room_is_named_on_every_process(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    room = Room(2)
    saves = opened(room, f"{tmp_path}/local-%N")

    def full(step: int, rank: int, size: int) -> None:
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(saves[0].tier, "incoming", full)
    said = save(room, saves, 10)
    want = "process 0: [Errno 28] No space left on device"
    assert said == [want, want]
    assert sorted(p.name for p in (tmp_path / "local-node1" / "10").iterdir()) == ["part-0"]
    monkeypatch.undo()
    assert save(room, saves, 20) == [None, None]  # room again: whole again


def test_a_copy_that_cannot_be_made_a_part_is_named_on_every_process(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """All of node2's copy came to node1, which cannot rename it into place: named on every
    process, each save's own reason."""
    room = Room(2)
    saves = opened(room, f"{tmp_path}/local-%N")
    fails = iter([OSError(21, "Is a directory"), OSError(5, "Input/output error")])

    def accept(step: int, rank: int) -> None:
        raise next(fails)
    monkeypatch.setattr(saves[0].tier, "accept", accept)
    assert save(room, saves, 10) == ["process 0: [Errno 21] Is a directory"] * 2
    assert save(room, saves, 20) == ["process 0: [Errno 5] Input/output error"] * 2


def test_a_node_without_room_for_the_next_save_says_so(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    room = Room(2)
    saves = opened(room, f"{tmp_path}/local-%N")
    assert save(room, saves, 10) == [None, None]
    size = len(blob(0, 10))
    free = math.ceil(size * 1.2)  # the least room a save wants (the last's and a fifth)
    monkeypatch.setattr(saves[1].tier, "free", lambda: free)  # type: ignore[union-attr]
    assert save(room, saves, 20) == [None, None]
    free -= 1  # one byte less: refused
    said = save(room, saves, 30)
    want = (f"process 1: {saves[1].tier.directory} has {free} bytes free, "  # type: ignore
            f"too few for {size}")
    assert said == [want, want]
    assert not (tmp_path / "local-node1" / "30" / "part-1").exists()  # no part: no copy
    assert saves[1].last_bytes == size


def test_a_part_that_cannot_be_packed_is_named_on_every_process_and_copied_nowhere(
        tmp_path: Path) -> None:
    """Its process sends no bytes: the partner writes no copy, and waits for none."""
    room = Room(2)
    saves = opened(room, f"{tmp_path}/local-%N")
    assert save(room, saves, 10) == [None, None]

    def pack(rank: int) -> bytes:
        if rank == 1:
            raise OSError(28, "No space left on device")
        return blob(rank, 20)

    said = save(room, saves, 20, pack)
    want = "process 1: [Errno 28] No space left on device"
    assert said == [want, want]
    assert sorted(p.name for p in (tmp_path / "local-node1" / "20").iterdir()) == ["part-0"]
    assert not (tmp_path / "local-node2" / "20").exists()  # a failed save writes no more
    assert saves[1].last_bytes == len(blob(1, 10))  # the last part's size stays the guide
    assert save(room, saves, 30) == [None, None]  # the next save is whole again


def test_a_part_that_cannot_be_written_is_named_on_every_process(tmp_path: Path) -> None:
    room = Room(2)
    saves = opened(room, f"{tmp_path}/local-%N")
    (tmp_path / "local-node2" / "10").write_text("a file where the step's directory goes")
    said = save(room, saves, 10)
    want = f"process 1: [Errno 17] File exists: '{tmp_path}/local-node2/10'"
    assert said == [want, want]


def test_the_agreements_are_numbered_and_say_what_they_are(tmp_path: Path) -> None:
    room = Room(2)
    saves = opened(room, f"{tmp_path}/local-%N")
    save(room, saves, 10)
    restore(room, saves)
    assert saves[0].coord.asked == saves[1].coord.asked == [
        ("test_local_1_nodes", "its node"), ("test_local_2_open", "its open"),
        ("test_local_3_markers", "its directory's markers"),
        ("test_local_4_saved_10", "its local save"),
        ("test_local_5_found", "the parts in its local directory"),
        ("test_local_6_read_10", "how it read its part")]
    assert saves[0].coord.left == saves[1].coord.left == []  # nobody ends: nobody leaves


def test_a_fresh_tier_has_no_directory_no_link_no_partners(monkeypatch) -> None:
    monkeypatch.setenv("SLURMD_NODENAME", "node7")
    room = Room(2)
    fresh = LocalSaves("/x/%N", Member(room, 0), "test", NAME, World(room, 0, threads=False))
    assert (fresh.tier, fresh.link, fresh.partners, fresh.node) == (None, None, [], "node7")
    assert fresh.threads_ok() and fresh.last_bytes is None
    assert not fresh.replicated  # parts are copied unless said otherwise (JAX's)


def test_the_pattern_s_forms_name_the_node_s_index_the_job_and_the_user(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import getpass

    monkeypatch.setenv("SLURM_JOB_ID", "77")
    room = Room(2)
    saves = opened(room, f"{tmp_path}/%n-%j-%u-%N")
    user = getpass.getuser()
    assert [s.tier.directory for s in saves] == [  # type: ignore[union-attr]
        f"{tmp_path}/0-77-{user}-node1", f"{tmp_path}/1-77-{user}-node2"]


# ------------------------------------------------------------------------------ restores
def test_each_process_restores_its_own_part_of_the_newest_local_step(tmp_path: Path) -> None:
    room = Room(2)
    saves = opened(room, f"{tmp_path}/local-%N")
    save(room, saves, 10)
    save(room, saves, 20)
    assert restore(room, saves, [10]) == [(20, blob(0, 20), "own"), (20, blob(1, 20), "own")]


def test_a_node_that_lost_its_directory_restores_from_its_partner_s_copy(
        tmp_path: Path) -> None:
    room = Room(2)
    save(room, opened(room, f"{tmp_path}/local-%N"), 20)
    shutil.rmtree(tmp_path / "local-node2")  # node2 lost: the next run's processes
    again = opened(Room(2), f"{tmp_path}/local-%N")
    where = "process 1 from its partner's copy"
    assert restore(again[0].coord.room, again, [10]) == \
        [(20, blob(0, 20), where), (20, blob(1, 20), where)]


@pytest.mark.parametrize("nodes, lost, want", [
    ("12", "node2", [0, 0]),
    ("12", "node1", [1, 1]),
    ("112", "node1", [2, 2, 2]),  # both of node1's from node2's one part
    ("112", "node2", [0, 1, 0]),
])
def test_a_node_that_lost_its_directory_restores_its_partner_s_part_where_each_is_whole(
        tmp_path: Path, nodes: str, lost: str, want: List[int]) -> None:
    """Replicated (TensorFlow's): a process that lost its part restores its partner's own
    part of the step (the same state), fetched over the link."""
    room = Room(len(nodes))
    save(room, opened(room, f"{tmp_path}/local-%N", nodes=nodes, replicated=True), 20)
    shutil.rmtree(tmp_path / f"local-{lost}")
    again = opened(Room(len(nodes)), f"{tmp_path}/local-%N", nodes=nodes, replicated=True)
    fetched = [str(r) for r, n in enumerate(nodes) if f"local-node{n}" == f"local-{lost}"]
    where = f"process {', '.join(fetched)} from its partner's part"
    assert restore(again[0].coord.room, again, [10]) == \
        [(20, blob(w, 20), where) for w in want]


def test_replicated_parts_each_on_its_node_restore_their_own(tmp_path: Path) -> None:
    room = Room(2)
    saves = opened(room, f"{tmp_path}/local-%N", replicated=True)
    save(room, saves, 20)
    assert restore(room, saves, [10]) == [(20, blob(0, 20), "own"), (20, blob(1, 20), "own")]
    assert [s.link.count for s in saves] == [0, 0]  # type: ignore[union-attr]


@pytest.mark.parametrize("shared, want", [
    ([30], None),  # the shared directory's step is newer
    ([20], "own"),  # the same step: the local tier first (faster)
    ([], "own"),
])
def test_the_shared_directory_s_newer_step_wins(tmp_path: Path, shared: List[int],
                                                want: Optional[str]) -> None:
    room = Room(2)
    saves = opened(room, f"{tmp_path}/local-%N")
    save(room, saves, 20)
    got = restore(room, saves, shared)
    assert [g if g is None else g[2] for g in got] == [want, want]


def test_a_node_that_lost_its_own_part_but_kept_its_partner_s_copy(tmp_path: Path) -> None:
    """node2 lost its own part of step 20, not node1's copy: process 1 fetches its part back,
    process 0 reads its own (and receives nothing)."""
    room = Room(2)
    save(room, opened(room, f"{tmp_path}/local-%N"), 20)
    (tmp_path / "local-node2" / "20" / "part-1").unlink()
    again = opened(Room(2), f"{tmp_path}/local-%N")
    where = "process 1 from its partner's copy"
    assert restore(again[0].coord.room, again) == \
        [(20, blob(0, 20), where), (20, blob(1, 20), where)]


@pytest.mark.parametrize("size", [1, 2])
def test_nothing_saved_anywhere_is_none(tmp_path: Path, size: int) -> None:
    room = Room(size)
    assert restore(room, opened(room, f"{tmp_path}/local-%N")) == [None] * size


def test_one_process_restores_its_own_part(tmp_path: Path) -> None:
    room = Room(1)
    saves = opened(room, f"{tmp_path}/local-%N")
    assert save(room, saves, 20) == [None]
    assert restore(room, saves, [10]) == [(20, blob(0, 20), "own")]


def test_without_mpi_each_process_restores_its_own_part(tmp_path: Path) -> None:
    room = Room(2)
    saves = opened(room, f"{tmp_path}/local-%N", mpi=False)
    save(room, saves, 20)
    assert restore(room, saves, [10]) == [(20, blob(0, 20), "own"), (20, blob(1, 20), "own")]


def test_without_mpi_no_copies_are_kept_and_a_lost_node_restores_the_shared_step(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    room = Room(2)
    with caplog.at_level(logging.WARNING, "mpi_resolver"):
        saves = opened(room, f"{tmp_path}/local-%N", mpi=False)
    assert [s.link for s in saves] == [None, None]
    assert [r.getMessage() for r in caplog.records].count(
        "mpi_resolver: the node-local tier keeps no partner copies: MPI is not running across "
        "this job's processes (launch with `srun --mpi=pmix` or `mpirun`): a node lost loses "
        "its parts, and the restore takes the shared directory's checkpoint") == 1
    save(room, saves, 20)
    assert not (tmp_path / "local-node1" / "20" / "part-1").exists()
    shutil.rmtree(tmp_path / "local-node2" / "20")
    assert restore(room, saves, [10]) == [None, None]


def test_a_part_that_cannot_be_unpacked_sends_every_process_to_the_shared_directory(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    room = Room(2)
    saves = opened(room, f"{tmp_path}/local-%N")
    save(room, saves, 20)

    def unpack(data: bytes) -> bytes:
        if b"process 1" in data:
            raise ValueError("not a part of this state\nmore")
        return data

    with caplog.at_level(logging.WARNING, "mpi_resolver"):
        assert restore(room, saves, [10], unpack) == [None, None]
    assert [r.getMessage() for r in caplog.records] == [
        "mpi_resolver: the local tier's step 20 could not be read (process 1: not a part of "
        "this state): restoring from the shared directory"]


def test_a_partner_that_does_not_send_its_copy_back_sends_all_to_the_shared_directory(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    room = Room(2)
    save(room, opened(room, f"{tmp_path}/local-%N"), 20)
    shutil.rmtree(tmp_path / "local-node2")
    monkeypatch.setattr(local_saves, "PARTNER_WITHIN", 0.2)
    deaf = Room(2, deaf=(0,))
    again = opened(deaf, f"{tmp_path}/local-%N")
    with caplog.at_level(logging.WARNING, "mpi_resolver"):
        assert restore(deaf, again, [10]) == [None, None]
    assert [r.getMessage() for r in caplog.records] == [
        "mpi_resolver: the local tier's step 20 could not be read (process 1: process 0 did "
        "not send its copy within 0.2 s): restoring from the shared directory"]


# ------------------------------------------------------------------------------ opening
LATE = 0.3  # seconds process 1 takes to read the others' values: process 0 raised by then


def test_one_directory_that_two_nodes_see_is_refused_on_every_process(tmp_path: Path) -> None:
    """Every process raises, process 0 (whose end closes the meeting point) once process 1,
    which reads late, has read all."""
    room = Room(2)
    saves = [LocalSaves(f"{tmp_path}/local", Member(room, r, LATE * r), "test", NAME,
                        World(room, r), node=f"node{r + 1}") for r in range(2)]
    out = together(room, lambda r: saves[r].open(), ends=True)
    assert all(isinstance(e, ConfigurationError) for e in out), out
    assert saves[0].coord.left == saves[1].coord.left == ["test_local_4_left"]
    assert str(out[0]) == str(out[1]) == (
        f"{NAME}='{tmp_path}/local': {tmp_path}/local is one directory that nodes node1, "
        "node2 share, not each node's own: name the node in it (%N) or give a directory on "
        "each node's own disk (/dev/shm, $TMPDIR)")


def test_a_directory_one_node_cannot_make_is_refused_on_every_process(tmp_path: Path) -> None:
    (tmp_path / "node2").write_text("not a directory")
    room = Room(2)
    saves = [LocalSaves(f"{tmp_path}/%N/local", Member(room, r, LATE * r), "test", NAME,
                        World(room, r), node=f"node{r + 1}") for r in range(2)]
    (tmp_path / "node1").mkdir()
    out = together(room, lambda r: saves[r].open(), ends=True)
    assert all(isinstance(e, ConfigurationError) for e in out), out
    assert saves[0].coord.left == saves[1].coord.left == ["test_local_3_left"]
    assert str(out[0]) == str(out[1]) == (
        f"{NAME}: the node-local directory {tmp_path}/node2/local cannot be made on node2: "
        f"{tmp_path}/node2 is not there. Give a directory every node has (/dev/shm, $TMPDIR, a "
        "local disk's mount point).")


@pytest.mark.parametrize("size, mpi, threads, replicated, link, ok", [
    (1, True, False, False, False, True),  # alone: no partner, no link
    (2, True, True, False, True, True),
    (2, True, False, False, True, False),  # a link, and MPI allows one thread: writes at once
    (2, True, False, True, True, True),  # a link, no copy sent at a save
    (2, False, False, False, False, True),  # no MPI: no link
])
def test_the_link_and_whether_a_thread_may_write(tmp_path: Path, size: int, mpi: bool,
                                                 threads: bool, replicated: bool, link: bool,
                                                 ok: bool) -> None:
    room = Room(size)
    saves = [LocalSaves(f"{tmp_path}/local-%N", Member(room, r), "test", NAME,
                        World(room, r, mpi, threads), node=f"node{r + 1}",
                        replicated=replicated)
             for r in range(size)]
    assert together(room, lambda r: saves[r].open()) == [None] * size
    assert [s.link is not None for s in saves] == [link] * size
    assert [s.threads_ok() for s in saves] == [ok] * size


def test_two_processes_of_one_node_share_its_directory_and_copy_to_the_other_node(
        tmp_path: Path) -> None:
    room = Room(3)
    saves = opened(room, f"{tmp_path}/local-%N", nodes="112")
    assert saves[0].partners == [2, 2, 0]
    assert save(room, saves, 10) == [None] * 3
    assert sorted(p.name for p in (tmp_path / "local-node2" / "10").iterdir()) == \
        ["part-0", "part-1", "part-2"]


def test_processes_of_one_node_alone_keep_no_copies(tmp_path: Path) -> None:
    room = Room(2)
    saves = opened(room, f"{tmp_path}/local-%N", nodes="11")
    assert saves[0].partners == [None, None]
    assert save(room, saves, 10) == [None, None]
    assert sorted(p.name for p in (tmp_path / "local-node1" / "10").iterdir()) == \
        ["part-0", "part-1"]


def test_a_pattern_that_is_not_a_path_is_refused_naming_where_it_came_from() -> None:
    from mpi_resolver.core.errors import FormatError

    room = Room(1)
    saves = LocalSaves("local/%N", Member(room, 0), "test", NAME, World(room, 0), node="node1")
    with pytest.raises(FormatError) as e:
        saves.open()
    assert str(e.value).startswith(f"{NAME}='local/%N' is not an absolute path")


def test_remove_takes_each_node_s_directory(tmp_path: Path) -> None:
    room = Room(3)
    saves = opened(room, f"{tmp_path}/local-%N", nodes="112")
    save(room, saves, 10)
    LocalSaves("/x", Member(Room(1), 0), "test", NAME, World(Room(1), 0)).remove()  # unopened
    assert together(room, lambda r: saves[r].remove()) == [None] * 3  # node1's twice
    assert sorted(p.name for p in tmp_path.iterdir()) == []
