"""Which peers each rank dials in ``check --connect`` (pure).

``nodes[i]`` holds the ranks of node i (the ranks of the job are 0..N-1, each on one node).
The dials are laid out over nodes first, then over the ranks of each node:

- Node pattern. Node i dials node (i + d) mod n for each offset d of ``node_offsets(n)``:
  up to ``ALL_PAIRS_NODES`` (64) nodes every other node (d = 1..n-1: every pair of nodes,
  both ways, ``ALL_PAIRS``); beyond it d = 1, 2, 4, ..., 2^(K-1), K = ceil(log2 n)
  (``POWERS_OF_TWO``): each node dials K nodes and is dialled by K, every node reaches
  every other (d = 1 alone is a ring through all of them) and is reached in at most K hops.
- Ranks of one node dial. The dial of node A to node B along offset number e (of E offsets)
  is m = max(ceil(pA/E), ceil(pB/E)) rank-to-rank dials, A's local rank (e*ceil(pA/E) + t)
  mod pA to B's local rank (e*ceil(pB/E) + t) mod pB for t = 0..m-1 (pX: ranks of node X).
  The E windows of a node tile its ranks from 0 both ways, so every rank dials and is
  dialled at least once, each time across nodes, and the node's ranks share the other nodes
  evenly: with p ranks on every node a rank makes at most ceil(E/p) + 1 dials and takes as
  many; beyond 64 nodes out + in <= 2*log2(n) + 2 wherever ceil(p/E) is the same on every
  node (equal nodes, or nodes of at most E ranks). Where it differs, a rank of a small node
  dials ceil(pB/E) ranks of a larger node B, so that all of B's are dialled, and may pass it.
- One node (``ONE_NODE``): its ranks dial each other in a ring (local j dials j + 1 mod p);
  a one-rank job dials its own address, so its listening, its name's resolution and its
  port are still tested.
"""

from __future__ import annotations

from typing import Dict, List, Sequence, Tuple

from mpi_resolver.core.errors import ResolutionError

#: Up to this many nodes every pair of nodes is tested; beyond it the powers-of-two pattern.
ALL_PAIRS_NODES = 64

ALL_PAIRS = "every pair of nodes"
POWERS_OF_TWO = "powers-of-two offsets (node i dials nodes i+1, i+2, i+4, ... mod n)"
ONE_NODE = "a ring of the ranks of the one node"


def pattern_of(node_count: int) -> str:
    """Returns the name of the pattern a job of ``node_count`` nodes uses."""
    if node_count <= 1:
        return ONE_NODE
    return ALL_PAIRS if node_count <= ALL_PAIRS_NODES else POWERS_OF_TWO


def node_offsets(node_count: int) -> List[int]:
    """Returns the offsets d such that node i dials node (i + d) mod ``node_count``."""
    if node_count <= ALL_PAIRS_NODES:
        return list(range(1, node_count))
    return [1 << k for k in range((node_count - 1).bit_length())]


def node_dials(node: int, node_count: int) -> List[int]:
    """Returns the nodes ``node`` dials."""
    return [(node + d) % node_count for d in node_offsets(node_count)]


def _ceil(a: int, b: int) -> int:
    return -(-a // b)


def _locate(rank: int, nodes: Sequence[Sequence[int]]) -> Tuple[int, int]:
    """Returns (node, local index) of ``rank``.

    Raises:
      ResolutionError: no node has ``rank``, or a node has no ranks.
    """
    for index, ranks in enumerate(nodes):
        if not ranks:
            raise ResolutionError(f"node {index} of the job has no ranks.")
        if rank in ranks:
            return index, list(ranks).index(rank)
    raise ResolutionError(f"rank {rank} is on none of the job's {len(nodes)} nodes.")


def peers_of(rank: int, nodes: Sequence[Sequence[int]]) -> List[int]:
    """Returns the ranks ``rank`` dials (see the module docstring), each once.

    Raises:
      ResolutionError: no node has ``rank``, or a node has no ranks.
    """
    node, local = _locate(rank, nodes)
    own = nodes[node]
    if len(nodes) == 1:
        return [own[(local + 1) % len(own)]]
    offsets = node_offsets(len(nodes))
    width = len(offsets)
    c_own = _ceil(len(own), width)
    peers = []
    for e, d in enumerate(offsets):
        other = nodes[(node + d) % len(nodes)]
        c_other = _ceil(len(other), width)
        for t in range(max(c_own, c_other)):
            if (e * c_own + t) % len(own) == local:
                peers.append(other[(e * c_other + t) % len(other)])
    return peers


def _window_counts(size: int, others: Sequence[int]) -> Tuple[int, ...]:
    """Returns, per local rank of a node of ``size`` ranks, how many of the windows it takes
    part in, one window per other node at the other end (``others``: their sizes, by offset
    number)."""
    width = len(others)
    c_own = _ceil(size, width)
    diff = [0] * (size + 1)
    for e, other in enumerate(others):
        full, rest = divmod(max(c_own, _ceil(other, width)), size)
        diff[0] += full
        start = (e * c_own) % size
        end = start + rest
        diff[start] += 1
        diff[min(end, size)] -= 1
        if end > size:
            diff[0] += 1
            diff[end - size] -= 1
    counts, running = [], 0
    for step in diff[:size]:
        running += step
        counts.append(running)
    return tuple(counts)


def connections_per_rank(nodes: Sequence[Sequence[int]]) -> List[Tuple[int, int]]:
    """Returns (dials made, dials taken) of every rank, indexed by rank, without listing the
    dials: O(nodes * log nodes + ranks) where nodes are alike.

    Raises:
      ResolutionError: the ranks are not 0..N-1 each on one node, or a node has none.
    """
    sizes = [len(ranks) for ranks in nodes]
    _check_ranks(nodes, sum(sizes))
    n = len(nodes)
    counts = [(0, 0)] * sum(sizes)
    if n == 1:
        return [(1, 1)] * sizes[0]
    offsets = node_offsets(n)
    memo: Dict[Tuple[int, Tuple[int, ...]], Tuple[int, ...]] = {}
    for node, ranks in enumerate(nodes):
        dialled = (sizes[node], tuple(sizes[(node + d) % n] for d in offsets))
        diallers = (sizes[node], tuple(sizes[(node - d) % n] for d in offsets))
        for key in (dialled, diallers):
            if key not in memo:
                memo[key] = _window_counts(*key)
        for rank, out, into in zip(ranks, memo[dialled], memo[diallers], strict=True):
            counts[rank] = (out, into)
    return counts


def _check_ranks(nodes: Sequence[Sequence[int]], total: int) -> None:
    """Raises ResolutionError unless the ranks of ``nodes`` are 0..total-1, each once, and no
    node is empty."""
    seen = bytearray(total)
    for index, ranks in enumerate(nodes):
        if not ranks:
            raise ResolutionError(f"node {index} of the job has no ranks.")
        for rank in ranks:
            if not 0 <= rank < total or seen[rank]:
                raise ResolutionError(
                    f"rank {rank} of node {index}: the ranks of a job of {total} are 0 to "
                    f"{total - 1}, each on one node.")
            seen[rank] = 1
    if not nodes:
        raise ResolutionError("a job has at least one node.")
