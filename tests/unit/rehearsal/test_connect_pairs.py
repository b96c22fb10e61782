"""_connect_pairs: which peers each rank dials in check --connect (pure)."""

from __future__ import annotations

import math
from collections import deque
from typing import List, Sequence, Set, Tuple

import pytest

from mpi_resolver.rehearsal.connect_pairs import (ALL_PAIRS, ALL_PAIRS_NODES, ONE_NODE,
                                                  POWERS_OF_TWO, connections_per_rank, node_dials,
                                                  node_offsets, pattern_of, peers_of)
from mpi_resolver.core.errors import ResolutionError

pytestmark = pytest.mark.unit


def job(sizes: Sequence[int]) -> List[List[int]]:
    """Returns the nodes of a job whose node i has sizes[i] ranks, numbered in node order."""
    nodes, first = [], 0
    for size in sizes:
        nodes.append(list(range(first, first + size)))
        first += size
    return nodes


def every_dial(nodes: Sequence[Sequence[int]]) -> List[Tuple[int, int]]:
    """Returns every (rank, peer) dial of the job, from peers_of."""
    return [(rank, peer) for ranks in nodes for rank in ranks for peer in peers_of(rank, nodes)]


def node_of(nodes: Sequence[Sequence[int]]) -> List[int]:
    return [i for i, ranks in enumerate(nodes) for _ in ranks]


# Jobs by ranks per node: both sides of ALL_PAIRS_NODES, one node, one rank, uneven nodes.
JOBS = {
    "one rank": [1],
    "one node of 3": [3],
    "2 nodes of 4": [4, 4],
    "3 nodes, uneven": [1, 4, 2],
    "64 nodes of 1": [1] * 64,
    "64 nodes, 1 to 5": [1 + i % 5 for i in range(64)],
    "65 nodes of 4": [4] * 65,
    "65 nodes, one of 64": [64] + [1] * 64,
    "100 nodes, 3 or 4": [3 + i % 2 for i in range(100)],
    "100 nodes of 9": [9] * 100,
}


@pytest.mark.parametrize("count, pattern, offsets", [
    pytest.param(1, ONE_NODE, [], id="1"),
    pytest.param(2, ALL_PAIRS, [1], id="2"),
    pytest.param(3, ALL_PAIRS, [1, 2], id="3"),
    pytest.param(64, ALL_PAIRS, list(range(1, 64)), id="64: the last of all pairs"),
    pytest.param(65, POWERS_OF_TWO, [1, 2, 4, 8, 16, 32, 64], id="65: powers of two"),
    pytest.param(128, POWERS_OF_TWO, [1, 2, 4, 8, 16, 32, 64], id="128"),
    pytest.param(129, POWERS_OF_TWO, [1, 2, 4, 8, 16, 32, 64, 128], id="129: one more"),
])
def test_the_pattern_switches_after_64_nodes(count, pattern, offsets):
    assert ALL_PAIRS_NODES == 64
    assert pattern_of(count) == pattern
    assert node_offsets(count) == offsets


@pytest.mark.parametrize("sizes, peers", [
    pytest.param([1], {0: [0]}, id="one rank: dials its own address"),
    pytest.param([3], {0: [1], 1: [2], 2: [0]}, id="one node: a ring"),
    pytest.param([2, 2], {0: [2], 1: [3], 2: [0], 3: [1]}, id="2 nodes of 2: rank to rank"),
    pytest.param([1, 1, 1], {0: [1, 2], 1: [2, 0], 2: [0, 1]}, id="3 nodes of 1: all pairs"),
    pytest.param([1, 3], {0: [1, 2, 3], 1: [0], 2: [0], 3: [0]},
                 id="one rank dials every rank of the larger node"),
    pytest.param([4, 1, 1], {0: [4], 1: [4], 2: [5], 3: [5], 4: [5, 2, 3], 5: [0, 1, 4]},
                 id="4 ranks share 2 other nodes; each is dialled"),
])
def test_peers_of_small_jobs(sizes, peers):
    nodes = job(sizes)
    assert {rank: peers_of(rank, nodes) for rank in peers} == peers


@pytest.mark.parametrize("sizes", JOBS.values(), ids=JOBS.keys())
def test_every_rank_dials_and_is_dialled_across_nodes_each_peer_once(sizes):
    nodes = job(sizes)
    where = node_of(nodes)
    dials = every_dial(nodes)
    assert {rank for rank, _ in dials} == {peer for _, peer in dials} == set(range(sum(sizes)))
    assert len(dials) == len(set(dials))
    if len(nodes) > 1:
        assert all(where[rank] != where[peer] for rank, peer in dials)


@pytest.mark.parametrize("sizes", JOBS.values(), ids=JOBS.keys())
def test_connections_per_rank_counts_what_peers_of_dials(sizes):
    nodes = job(sizes)
    made, taken = [0] * sum(sizes), [0] * sum(sizes)
    for rank, peer in every_dial(nodes):
        made[rank] += 1
        taken[peer] += 1
    assert connections_per_rank(nodes) == list(zip(made, taken, strict=True))


def node_pairs(nodes: Sequence[Sequence[int]]) -> Set[Tuple[int, int]]:
    where = node_of(nodes)
    return {(where[rank], where[peer]) for rank, peer in every_dial(nodes)}


@pytest.mark.parametrize("sizes, all_pairs", [
    pytest.param([1, 1], True, id="2 nodes"),
    pytest.param([2, 5, 1], True, id="3 nodes, uneven"),
    pytest.param([1] * 63, True, id="63 nodes"),
    pytest.param([3] * 64, True, id="64 nodes: every pair"),
    pytest.param([1] * 65, False, id="65 nodes: not every pair"),
    pytest.param([2] * 100, False, id="100 nodes"),
])
def test_every_pair_of_nodes_both_ways_up_to_64_nodes_then_the_offsets(sizes, all_pairs):
    n = len(sizes)
    every = {(a, b) for a in range(n) for b in range(n) if a != b}
    pattern = {(a, b) for a in range(n) for b in node_dials(a, n)}
    assert node_pairs(job(sizes)) == pattern
    assert (pattern == every) is all_pairs


def reaches_all(n: int, backwards: bool) -> bool:
    """Returns True when a breadth-first search over the node dials from node 0 (or over
    the dials reversed) reaches every node."""
    step = {a: [(a - d) % n if backwards else (a + d) % n for d in node_offsets(n)]
            for a in range(n)}
    seen, todo = {0}, deque([0])
    while todo:
        for b in step[todo.popleft()]:
            if b not in seen:
                seen.add(b)
                todo.append(b)
    return len(seen) == n


@pytest.mark.parametrize("n", [1, 2, 3, 64, 65, 100, 1000, 4097])
def test_the_node_graph_is_strongly_connected(n):
    assert reaches_all(n, backwards=False) and reaches_all(n, backwards=True)


def bound(n: int) -> float:
    return 2 * math.log2(n) + 2


@pytest.mark.parametrize("sizes", [
    pytest.param([1] * 65, id="65 x 1"),
    pytest.param([4] * 65, id="65 x 4"),
    pytest.param([1 + i % 7 for i in range(65)], id="65 x 1 to 7: ceil(p/7) alike"),
    pytest.param([1] * 100, id="100 x 1"),
    pytest.param([4 + i % 5 for i in range(100)], id="100 x 4 to 8"),
    pytest.param([1] * 1000, id="1000 x 1"),
    pytest.param([4] * 1000, id="1000 x 4"),
    pytest.param([8 + i % 9 for i in range(1000)], id="1000 x 8 to 16"),
    pytest.param([1] * 4097, id="4097 x 1"),
])
def test_beyond_64_nodes_a_rank_makes_and_takes_at_most_2_log2_n_plus_2(sizes):
    counts = connections_per_rank(job(sizes))
    assert max(out + into for out, into in counts) <= bound(len(sizes))


def test_nodes_of_unlike_shares_may_pass_the_bound():
    # 8 ranks need two of each of 7 offsets' ranks (ceil(8/7) = 2), 1 to 7 ranks one.
    counts = connections_per_rank(job([1 + i % 8 for i in range(65)]))
    assert max(out + into for out, into in counts) == 19 > bound(65)


@pytest.mark.parametrize("n, per_node, most", [
    pytest.param(64, 1, 126, id="64 x 1: every other node, both ways"),
    pytest.param(64, 4, 32, id="64 x 4: the ranks share the 63 others"),
    pytest.param(65, 1, 14, id="65 x 1: 7 out, 7 in"),
    pytest.param(1024, 4, 6, id="1024 x 4"),
    pytest.param(100_000, 1, 34, id="100,000 x 1: 17 out, 17 in"),
])
def test_the_most_a_rank_makes_and_takes(n, per_node, most):
    counts = connections_per_rank(job([per_node] * n))
    assert max(out + into for out, into in counts) == most
    assert (most <= bound(n)) is (n > ALL_PAIRS_NODES)


@pytest.mark.parametrize("n", [2, 3, 64, 65, 1000])
@pytest.mark.parametrize("per_node", [1, 2, 3, 7, 8, 64])
def test_alike_nodes_a_rank_dials_at_most_ceil_offsets_over_ranks_plus_1(n, per_node):
    width = len(node_offsets(n))
    counts = connections_per_rank(job([per_node] * n))
    assert max(max(out, into) for out, into in counts) <= -(-width // per_node) + 1


def test_a_one_rank_node_dials_every_rank_of_a_large_node_in_ceil_shares():
    nodes = job([64] + [1] * 64)  # node 64 dials node 0 first (offset 1), 7 offsets
    assert peers_of(nodes[64][0], nodes)[:10] == list(range(10))  # ceil(64 / 7) of them
    assert len(peers_of(nodes[64][0], nodes)) == 10 + 6


@pytest.mark.parametrize("call, message", [
    pytest.param(lambda: peers_of(3, job([1, 2])), "rank 3 is on none of the job's 2 nodes",
                 id="a rank of no node"),
    pytest.param(lambda: peers_of(2, [[0], [], [1]]), "node 1 of the job has no ranks",
                 id="an empty node before the rank's"),
    pytest.param(lambda: connections_per_rank([[0], []]), "node 1 of the job has no ranks",
                 id="counts: an empty node"),
    pytest.param(lambda: connections_per_rank([[0, 1], [1]]),
                 "rank 1 of node 1: the ranks of a job of 3 are 0 to 2", id="a rank twice"),
    pytest.param(lambda: connections_per_rank([[0, 3]]), "rank 3 of node 0", id="too high"),
    pytest.param(lambda: connections_per_rank([[0, 2]]), "rank 2 of node 0", id="N: too high"),
    pytest.param(lambda: connections_per_rank([[-1, 0]]), "rank -1 of node 0", id="negative"),
    pytest.param(lambda: connections_per_rank([]), "a job has at least one node",
                 id="no nodes"),
])
def test_a_job_that_is_not_one(call, message):
    with pytest.raises(ResolutionError, match=message):
        call()


@pytest.mark.parametrize("sizes", [[1], [5]], ids=["one rank", "one node"])
def test_one_node_counts_one_dial_made_and_one_taken_each(sizes):
    assert connections_per_rank(job(sizes)) == [(1, 1)] * sizes[0]
