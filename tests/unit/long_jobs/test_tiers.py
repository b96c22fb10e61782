"""long_jobs.tiers, the node-local tier's rules, as tables: the local directory's patterns
and refusals, a path two nodes see, the room a save wants, which saves go to the shared
directory too, the partners, and the step a restore takes across the tiers."""

from __future__ import annotations

import pytest

from mpi_resolver.core.errors import FormatError
from mpi_resolver.long_jobs.tiers import (OWN, PARTNER, SHARED, Restore, holder, local_path,
                                          partner, partner_ranks, replicas, restore_across,
                                          restore_step, room_for, seen_by_others, to_shared)

pytestmark = pytest.mark.unit

#: The name the errors give the pattern (the variable that will set it).
VARIABLE = "MPI_RESOLVER_LOCAL_DIR"


@pytest.mark.parametrize("pattern, path", [
    ("/dev/shm/ckpt", "/dev/shm/ckpt"),
    ("/dev/shm/ckpt-%j", "/dev/shm/ckpt-77"),
    ("/local/%u/ckpt-%N", "/local/ada/ckpt-node2"),
    ("/tmp/%j/%n", "/tmp/77/1"),
    ("/tmp/100%%/%N%N", "/tmp/100%/node2node2"),
    ("/tmp/%%N", "/tmp/%N"),
    ("/tmp/%", "/tmp/%"),  # a lone '%' at the end: no pattern, the path as it is
])
def test_local_path(pattern: str, path: str) -> None:
    assert local_path(pattern, "node2", 1, "77", "ada", VARIABLE) == path


@pytest.mark.parametrize("pattern, job, says", [
    ("dev/shm/ckpt", "77", "MPI_RESOLVER_LOCAL_DIR='dev/shm/ckpt' is not an absolute path: "
                           "give a node-local directory such as /dev/shm/ckpt-%j"),
    ("", "77", "MPI_RESOLVER_LOCAL_DIR='' is not an absolute path"),
    ("/tmp/%x", "77", "MPI_RESOLVER_LOCAL_DIR='/tmp/%x': %x is not a pattern it takes; it "
                      "takes %N (the node's name), %n (its index in the job), %j (the job's "
                      "id), %u (the user), %%"),
    ("/tmp/%j", None, "MPI_RESOLVER_LOCAL_DIR='/tmp/%j': %j names the job's id, and this is "
                      "not a Slurm job; it takes %N"),
])
def test_local_path_refusals(pattern: str, job, says: str) -> None:
    with pytest.raises(FormatError) as e:
        local_path(pattern, "node2", 1, job, "ada", VARIABLE)
    assert says in str(e.value)


@pytest.mark.parametrize("markers, shared", [
    ({}, []),
    ({"node1": ["node1"], "node2": ["node2"]}, []),
    ({"node1": [], "node2": []}, []),
    ({"node1": ["node1", "node2"], "node2": ["node1", "node2"]}, ["node1", "node2"]),
    ({"node2": ["node1"], "node1": ["node1"]}, ["node2"]),
])
def test_seen_by_others(markers: dict, shared: list) -> None:
    assert seen_by_others(markers) == shared


@pytest.mark.parametrize("free, last, fits", [
    (0, None, True),  # nothing saved yet: nothing says it will not fit
    (120, 100, True),
    (119, 100, False),
    (1000, 100, True),
    (0, 0, True),
    (0, 1, False),
])
def test_room_for(free: int, last, fits: bool) -> None:
    assert room_for(free, last) is fits


@pytest.mark.parametrize("saves, every, shared", [
    (0, 3, False), (1, 3, False), (2, 3, False), (3, 3, True), (4, 3, False), (6, 3, True),
    (1, 1, True), (2, 1, True),
])
def test_to_shared(saves: int, every: int, shared: bool) -> None:
    assert to_shared(saves, every) is shared


@pytest.mark.parametrize("index, count, kept_by", [
    (0, 1, None), (0, 2, 1), (1, 2, 0), (0, 3, 1), (1, 3, 2), (2, 3, 0),
])
def test_partner(index: int, count: int, kept_by) -> None:
    assert partner(index, count) == kept_by


@pytest.mark.parametrize("own, copies, shared, step, sources", [
    pytest.param([set(), set()], [set(), set()], set(), None, [], id="nothing anywhere"),
    pytest.param([{10}, {10}], [{10}, {10}], {5}, 10, [OWN, OWN],
                 id="every node its own: the local step, newer than the shared"),
    pytest.param([{10}, set()], [{10}, {10}], {5}, 10, [OWN, PARTNER],
                 id="node 1's directory wiped: its partner's copy, at the local step"),
    pytest.param([{10}, set()], [{10}, set()], {5}, 5, [SHARED, SHARED],
                 id="node 1's part lost twice: the shared step"),
    pytest.param([{10}, {10}], [set(), set()], {10}, 10, [OWN, OWN],
                 id="the same step in both tiers: the local one"),
    pytest.param([{10, 20}, {10}], [{10}, {10, 20}], {5}, 20, [OWN, PARTNER],
                 id="the newest whole across nodes"),
    pytest.param([{20}, {10}], [set(), set()], {5}, 5, [SHARED, SHARED],
                 id="no step that both nodes have locally: the shared"),
    pytest.param([{10}, {10}], [set(), set()], {30}, 30, [SHARED, SHARED],
                 id="the shared newer than any local"),
    pytest.param([{10}, {10}], [set(), set()], set(), 10, [OWN, OWN], id="no shared yet"),
    pytest.param([], [], {7}, 7, [], id="no node: the shared alone"),
    pytest.param([set(), set()], [{10}, {10}], set(), 10, [PARTNER, PARTNER],
                 id="only the partners' copies: each node from its partner"),
])
def test_restore_step(own, copies, shared, step, sources) -> None:
    assert restore_step(own, copies, shared) == Restore(step, sources)


def test_restore_step_wants_a_copy_list_per_node() -> None:
    with pytest.raises(ValueError):
        restore_step([{1}, {1}], [{1}], set())


@pytest.mark.parametrize("nodes, partners", [
    ([], []),
    (["a"], [None]),
    (["a", "a"], [None, None]),  # one node: no partner
    (["a", "b"], [1, 0]),
    (["a", "a", "b", "b"], [2, 3, 0, 1]),  # the same local index on the next node
    (["a", "b", "a", "b"], [1, 0, 3, 2]),  # cyclic placement
    (["a", "b", "c"], [1, 2, 0]),  # the last node's copy on the first
    (["a", "a", "b"], [2, 2, 0]),  # b has one rank: it keeps both of a's
    (["a", "b", "b"], [1, 0, 0]),  # a has one rank: b's second keeps its copy there too
    (["b", "a"], [1, 0]),  # the nodes in the order they come, not sorted
])
def test_partner_ranks(nodes: list, partners: list) -> None:
    assert partner_ranks(nodes) == partners


@pytest.mark.parametrize("seen, shared, want", [
    ([{}, {}], [], Restore(None, [])),
    ([{0: [4, 8]}, {1: [4, 8]}], [2], Restore(8, [OWN, OWN])),
    ([{0: [8], 1: [8]}, {}], [4], Restore(8, [OWN, PARTNER])),  # node of rank 1 wiped
    ([{0: [8], 1: [8]}, {}], [8], Restore(8, [OWN, PARTNER])),  # the local tier first
    ([{}, {}], [4], Restore(4, [SHARED, SHARED])),
    ([{0: [8]}, {}], [4], Restore(4, [SHARED, SHARED])),  # rank 1's part nowhere
    ([{0: [8], 1: [6]}, {1: [8]}], [], Restore(8, [OWN, OWN])),
    ([{1: [6]}, {0: [6], 1: [8]}], [], Restore(6, [PARTNER, PARTNER])),  # 8: rank 0 lost it
])
def test_restore_across(seen: list, shared: list, want: Restore) -> None:
    assert restore_across(seen, shared) == want


@pytest.mark.parametrize("seen, origin, step, who", [
    ([{0: [8], 1: [8]}, {}], 1, 8, 0),
    ([{0: [8], 1: [8]}, {}], 1, 6, None),  # not that step
    ([{0: [8]}, {0: [8]}], 0, 8, 1),  # its own copy is no holder
    ([{1: [8]}, {1: [8]}, {1: [8]}], 1, 8, 0),  # the lowest other rank
    ([{}, {}, {1: [8]}], 1, 8, 2),
    ([{}, {1: [8]}], 1, 8, None),
])
def test_holder(seen: list, origin: int, step: int, who) -> None:
    assert holder(seen, origin, step) == who


@pytest.mark.parametrize("seen, want", [
    ([], []),
    ([{0: [8, 4]}], [{0: [4, 8]}]),
    ([{0: [8]}, {1: [8]}], [{0: [8], 1: [8]}, {0: [8], 1: [8]}]),
    ([{0: [8]}, {}], [{0: [8], 1: [8]}, {0: [], 1: []}]),  # node of rank 1 wiped
    ([{0: [8], 1: [6]}, {1: [8]}], [{0: [8], 1: [8]}, {0: [8], 1: [8]}]),  # copies not counted
    ([{1: [8]}, {}, {2: [4]}], [{0: [], 1: [], 2: []}, {0: [], 1: [], 2: []},
                                {0: [4], 1: [4], 2: [4]}]),
])
def test_replicas(seen: list, want: list) -> None:
    assert replicas(seen) == want


@pytest.mark.parametrize("seen, shared, want", [
    ([{0: [8]}, {}], [4], Restore(8, [OWN, PARTNER])),  # rank 1's part: rank 0's own
    ([{}, {1: [8]}], [], Restore(8, [PARTNER, OWN])),
    ([{0: [8]}, {1: [6]}], [], Restore(8, [OWN, PARTNER])),  # one part of a step is all
    ([{0: [8]}, {1: [6]}], [8], Restore(8, [OWN, PARTNER])),  # the local tier first
    ([{0: [6]}, {1: [6]}], [8], Restore(8, [SHARED, SHARED])),
    ([{}, {}], [4], Restore(4, [SHARED, SHARED])),
])
def test_restore_across_replicas(seen: list, shared: list, want: Restore) -> None:
    assert restore_across(replicas(seen), shared) == want


@pytest.mark.parametrize("every, missed_at, want", [
    (3, (), [False, False, True, False, False, True]),
    (1, (), [True] * 6),
    (3, (1,), [False, True, True, False, False, True]),  # the save after a miss
    (3, (2,), [False, False, True, False, False, True]),  # a miss before its turn: no extra
    (10, (1, 2), [False, True, True, False, False, False]),
])
def test_shared_turns(every: int, missed_at: tuple, want: list) -> None:
    """Every every-th local save goes shared, and the one after a save the tier missed (the
    miss known before the next save: a background write ends before the next starts)."""
    from mpi_resolver.long_jobs.tiers import SharedTurns

    turns, got = SharedTurns(every), []
    for n in range(1, 7):
        got.append(turns.plan())
        if n in missed_at:
            turns.missed()
    assert got == want and turns.saves == 6
