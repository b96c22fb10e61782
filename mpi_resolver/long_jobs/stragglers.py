"""A slow rank, named (pure): each round gives every rank's own time for the same work (its
time before the step's collective, not its wait in it); a rank slower than the median of its
peers by more than FACTOR in WINDOW rounds in a row is slow, and said once until it recovers.
As NVIDIA's straggler detector scores a rank relative to the others, never in absolute
seconds: a model's step may take a millisecond or a minute. The rounds the training's edge
gives come at a low rate and skip the first steps, the saves and the evaluation.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Dict, List, Mapping, Optional, Set, Tuple

__all__ = ["FACTOR", "WINDOW", "Slow", "Stragglers"]

#: A rank is slow where its time exceeds its peers' median by more than this factor (a rank
#: held to 70 % of a CPU takes about 1.43 times as long; noise between healthy ranks of the
#: test cluster stays under 1.1).
FACTOR = 1.2
#: ... in this many rounds in a row (one round a minute: named within five minutes).
WINDOW = 4


@dataclass(frozen=True)
class Slow:
    """A slow rank: its number, node, its median time over the window, its peers', and the
    window's rounds."""

    rank: int
    node: Optional[str]
    seconds: float
    peers: float
    rounds: int = WINDOW

    def line(self) -> str:
        """Returns the line said of it."""
        where = f" on {self.node}" if self.node else ""
        return (f"rank {self.rank}{where} is slow: {self.seconds:.3g} s for what its peers do "
                f"in {self.peers:.3g} s ({self.seconds / self.peers:.2f} times the median) in "
                f"each of the last {self.rounds} round{'s' * (self.rounds != 1)}")


class Stragglers:
    """The rounds seen so far and the ranks said to be slow; ``nodes`` names each rank's
    node."""

    def __init__(self, nodes: Mapping[int, str], factor: float = FACTOR,
                 window: int = WINDOW) -> None:
        self.nodes, self.factor, self.window = dict(nodes), factor, window
        self._over: Dict[int, List[Tuple[float, float]]] = {}  # rank: (its time, its peers')
        #                                                          in the slow rounds in a row
        self._said: Set[int] = set()

    def add(self, times: Mapping[int, float]) -> List[Slow]:
        """Takes one round (rank: seconds) and returns the ranks newly found slow (empty
        where fewer than two ranks gave a time)."""
        found = []
        for rank, seconds in times.items():
            peers = [t for r, t in times.items() if r != rank]
            median = statistics.median(peers) if peers else 0.0
            if median <= 0 or seconds <= median * self.factor:
                self._over.pop(rank, None)
                self._said.discard(rank)  # recovered: said again should it slow down again
                continue
            rounds = self._over.setdefault(rank, [])
            rounds.append((seconds, median))
            if len(rounds) >= self.window and rank not in self._said:
                self._said.add(rank)
                last = rounds[-self.window:]
                found.append(Slow(rank, self.nodes.get(rank),
                                  statistics.median(r[0] for r in last),
                                  statistics.median(r[1] for r in last), self.window))
        return found
