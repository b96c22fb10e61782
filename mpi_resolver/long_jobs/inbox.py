"""The partners' copies of a step that a process of the node-local tier receives (the
tier's partner copies, framework-free): each straight into its file in the node's directory
(long_jobs.local_tier: its space taken first), made a part once all its bytes are in, removed
where they did not all come."""

from __future__ import annotations

from typing import Any, List, Mapping, Optional

from mpi_resolver.long_jobs.local_tier import Blob, LocalTier
from mpi_resolver.long_jobs.resume import first_line

__all__ = ["Inbox"]


class Inbox:
    """The partners' copies of ``step`` a process receives, each straight into its file in
    ``tier`` (its space taken first), made a part once all its bytes are in; none written
    unless ``keep``."""

    def __init__(self, tier: LocalTier, step: int, keep: bool) -> None:
        self.tier, self.step, self.keep_any = tier, step, keep
        self.files: List[int] = []  # the origins whose copy goes into its file
        self.why: Optional[str] = None

    def buffer(self, origin: int, size: int) -> Any:
        """Returns where ``origin``'s copy of ``size`` bytes goes: its file's mapping, else
        memory (an empty copy: no part; none kept; a directory without room: why kept)."""
        if size and self.keep_any:
            try:
                mapping = self.tier.incoming(self.step, origin, size)
                self.files.append(origin)
                return mapping
            except OSError as e:
                self.why = self.why or first_line(e)
        return bytearray(size)

    def keep(self, received: Mapping[int, Blob]) -> Optional[str]:
        """Makes each copy of ``received`` its part, removes the files of those that did not
        come whole; returns why a copy is not kept, else None."""
        for origin in self.files:
            if origin in received:
                try:
                    self.tier.accept(self.step, origin)
                except OSError as e:
                    self.why = self.why or first_line(e)
            else:
                self.tier.discard(self.step, origin)
        return self.why
