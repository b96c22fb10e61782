"""A slow rank, named (pure): each round gives every rank's own time for the same work (the
probe's, long_jobs.slow_ranks: its speed, never a wait for a peer); a rank slower than FACTOR
times its peers' median in MAJORITY of its last WINDOW rounds is slow, and said once until it
recovers (none of its last WINDOW rounds slow: a rank near the factor is not said again and
again). As NVIDIA's straggler detector scores a rank relative to the others, never in
absolute seconds: a machine's speed changes, the ratio does not. A majority of rounds, not
each one, because a round on a busy machine may go either way: one round does not name a
rank, nor does one fast round clear it.
"""

from __future__ import annotations

import statistics
from collections import deque
from dataclasses import dataclass
from typing import Deque, Dict, List, Mapping, Optional, Set, Tuple

__all__ = ["FACTOR", "WINDOW", "MAJORITY", "Slow", "Stragglers"]

#: A rank is slow where its time over its peers' median exceeds this factor (a rank held to
#: 70 % of a CPU takes about 1.43 times as long; the ratio between healthy ranks of the test
#: machine, two cores shared with other jobs, ranges 0.86-1.31 in single rounds).
FACTOR = 1.2
#: ... in MAJORITY of its last WINDOW rounds (judged from its MAJORITY-th round on: a rank
#: slow from its first round is named after MAJORITY rounds).
WINDOW = 5
MAJORITY = WINDOW // 2 + 1


@dataclass(frozen=True)
class Slow:
    """A slow rank: its number, node, its time and its peers' median time in its median round
    of the last ones (by their ratio; the upper one of an even count), and how many of its
    last rounds were slow."""

    rank: int
    node: Optional[str]
    seconds: float
    peers: float
    rounds: int = MAJORITY
    window: int = WINDOW

    def line(self) -> str:
        """Returns the line said of it."""
        where = f" on {self.node}" if self.node else ""
        return (f"rank {self.rank}{where} is slow: {self.seconds:.3g} s for what its peers do "
                f"in {self.peers:.3g} s ({self.seconds / self.peers:.2f} times their median), "
                f"slow in {self.rounds} of its last {self.window} rounds")


class Stragglers:
    """The rounds seen so far and the ranks said to be slow; ``nodes`` names each rank's
    node."""

    def __init__(self, nodes: Mapping[int, str], factor: float = FACTOR,
                 window: int = WINDOW) -> None:
        self.nodes, self.factor, self.window = dict(nodes), factor, window
        self.majority = window // 2 + 1
        self._last: Dict[int, Deque[Tuple[float, float]]] = {}  # rank: (its time, peers')
        self._said: Set[int] = set()

    def add(self, times: Mapping[int, float]) -> List[Slow]:
        """Takes one round (rank: seconds) and returns the ranks newly found slow (none where
        fewer than two ranks gave a time)."""
        found = []
        for rank, seconds in times.items():
            peers = [t for r, t in times.items() if r != rank]
            median = statistics.median(peers) if peers else 0.0
            if median <= 0:
                continue
            last = self._last.setdefault(rank, deque(maxlen=self.window))
            last.append((seconds, median))
            slow = sum(t > m * self.factor for t, m in last)
            if slow == 0:
                self._said.discard(rank)  # recovered: said again should it slow down again
            elif slow >= self.majority and rank not in self._said:
                self._said.add(rank)
                t, m = sorted(last, key=lambda r: r[0] / r[1])[len(last) // 2]
                found.append(Slow(rank, self.nodes.get(rank), t, m, slow, self.window))
        return found
