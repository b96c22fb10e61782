"""The report of `mpi-resolver check --checkpoint-dir DIR`: its rows (the nodes, the problem,
what was seen, the likely fix), the free space, the text rank 0 prints and the JSON of
`check --json`. The verdict that fills it is checkpoint_check's."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Dict, List, Optional

from mpi_resolver.core.tables import text_table
from mpi_resolver.rehearsal.checkpoint_files import hosts_text, space_text


@dataclass(frozen=True)
class Problem:
    """A row of the report: the nodes, the problem's kind, what was seen, the likely fix."""

    hosts: List[str]
    kind: str
    seen: Optional[str]
    fix: str


@dataclass(frozen=True)
class Space:
    """The free and total bytes at DIR, alike on ``hosts``."""

    free: int
    total: int
    hosts: List[str]


@dataclass(frozen=True)
class CheckpointReport:
    """What --checkpoint-dir found: rank 0's absolute path, the job's nodes (this rank's alone
    without MPI), the problems, the free space, each node's file system, notes, the seconds
    it took."""

    path: str
    nodes: List[str]
    problems: List[Problem]
    space: List[Space]
    fstypes: Dict[str, Optional[str]]
    gathered: bool
    seconds: float
    notes: List[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """True when every node shown could write DIR and saw the others' files."""
        return not self.problems

    def text(self) -> str:
        """Returns the report rank 0 prints (or each rank without MPI)."""
        n = len(self.nodes)
        space = "; ".join(f"{space_text(s.free, s.total)} ({hosts_text(s.hosts)}"
                          f"{' alike' if len(s.hosts) > 1 else ''})" for s in self.space)
        space = f"free space: {space or 'unknown'}"
        where = "" if self.gathered else " on this rank's node"
        if self.ok:
            one = ", the job's one node" if self.gathered else ""
            done = (f"seen and written by all {n} nodes" if n > 1 else
                    f"written and read back on {self.nodes[0]}{one}")
            lines = [f"CHECKPOINT DIR OK{where}: {self.path} {done}; {space}"]
        else:
            failing = len({h for p in self.problems for h in p.hosts})
            rows = [{"nodes": hosts_text(p.hosts), "problem": p.kind, "seen": p.seen,
                     "likely fix": p.fix} for p in self.problems]
            lines = [f"CHECKPOINT DIR FAILED{where}: {self.path}: {failing} of {n} "
                     f"node{'s' if n > 1 else ''} cannot use it as the job's shared checkpoint "
                     "directory:", text_table(rows, ("nodes", "problem", "seen", "likely fix"),
                                              100), space]
        return "\n".join(lines + [f"note: {note}" for note in self.notes])

    def as_json(self) -> Dict[str, Any]:
        """Returns the report for `check --json`."""
        return {"ok": self.ok, "path": self.path, "nodes": self.nodes,
                "gathered": self.gathered, "seconds": round(self.seconds, 3),
                "problems": [{"hosts": p.hosts, "problem": p.kind, "seen": p.seen,
                              "fix": p.fix} for p in self.problems],
                "space": [asdict(s) for s in self.space], "fstypes": self.fstypes,
                "notes": self.notes}
