"""`mpi-resolver check --checkpoint-dir DIR`, the pure parts: what each rank wrote and read,
which files each node reads back, and the verdict (its report is checkpoint_report; the file
system and MPI edge is checkpoint_probe; file names, contents and sizes are checkpoint_files).

A checkpoint saved on Slurm's warning signal is found by the requeued run only where DIR is
one directory that every node sees. Every rank writes a file there; the first rank of each
node reads back one file of each other node (the nodes _connect_pairs pairs: every other node
up to 64 nodes); nodes that see each other's files share the directory. Where no node sees
another's, DIR is node-local (a /tmp or /dev/shm of each node); where some nodes share it and
others do not, the others lack the shared mount.
"""

from __future__ import annotations

import errno
from dataclasses import asdict, dataclass
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

from mpi_resolver.rehearsal.checkpoint_files import LOCAL_TYPES, hosts_text, space_text
from mpi_resolver.rehearsal.checkpoint_report import CheckpointReport, Problem, Space
from mpi_resolver.rehearsal.connect_pairs import node_dials

#: A rank's own write went well (its ``state``); else one of the kinds below.
OK = "ok"
#: Kinds of a rank's problem in DIR on its own node (kind_of names those of an errno).
MISSING, NOT_DIR, NO_ACCESS, READ_ONLY, NO_SPACE, STUCK, ERROR = (
    "missing", "not a directory", "not writable", "read-only", "no space", "not answering",
    "error")
#: Another absolute path than rank 0's (a relative DIR, other working directories).
OTHER_PATH = "another path"
#: What a node's reader found of another node's file (or STUCK).
SEEN, ABSENT, WRONG, UNREADABLE = "seen", "absent", "wrong content", "cannot read"
#: The nodes that see nobody's files, or not the others'; a reader slower than its peers.
NODE_LOCAL, NOT_SHARED, LAGGING = "node-local", "not shared", "lagging"

_SHARED_FS = "a shared file system, such as $HOME or the site's scratch"
_FIXES = {
    MISSING: "create it on a shared file system (`mkdir -p {path}`, once, from any node), or "
             "mount that file system on that node",
    NOT_DIR: "point --checkpoint-dir at a directory (this path, or a part of it, is not one)",
    NO_ACCESS: "the job's user cannot create files there: fix its permissions "
               "(`ls -ld {path}`), or use a directory of your own",
    READ_ONLY: "the file system is read-only on that node: use a writable one, " + _SHARED_FS,
    NO_SPACE: "the file system (or your quota there) is full: free some space, or use another",
    STUCK: "the file system does not answer on that node (a network mount that hangs): "
           "check `df {path}` there, or raise --timeout if it is only slow",
    ERROR: "check that file system on that node (`df {path}`, `ls -ld {path}`)",
    OTHER_PATH: "give --checkpoint-dir an absolute path: the ranks' working directories differ "
                "(Slurm starts a task in /tmp where its working directory is missing)",
    NODE_LOCAL: "use a directory on " + _SHARED_FS + ": this one is each node's own "
                "(a /tmp, /dev/shm or local disk)",
    NOT_SHARED: "the shared file system is not mounted at {path} on that node "
                "(`findmnt -T {path}` there): ask the admins, or leave the node out "
                "(sbatch --exclude)",
    LAGGING: "that node's file system cache lags: raise --timeout, or check its mount "
             "options (NFS: lookupcache, actimeo)",
    WRONG: "the file system gave back other data than was written: tell the site's admins",
    UNREADABLE: "permissions differ between the nodes (root squash, ACLs): `ls -l {path}` "
                "there",
}


_ERRNO_KINDS = {errno.ENOENT: MISSING, errno.ENOTDIR: NOT_DIR, errno.EACCES: NO_ACCESS,
                errno.EPERM: NO_ACCESS, errno.EROFS: READ_ONLY, errno.ENOSPC: NO_SPACE,
                errno.EDQUOT: NO_SPACE}


def kind_of(code: int) -> str:
    """Returns the kind of problem an OSError's errno ``code`` is (ERROR where none else)."""
    return _ERRNO_KINDS.get(code, ERROR)


@dataclass(frozen=True)
class Written:
    """What a rank did in DIR on its node: its absolute ``path``, its ``state`` (OK or a
    problem's kind) and the error, its file's name and nonce, the free and total bytes there
    and the file system's type, where known."""

    rank: int
    host: str
    path: str
    state: str
    detail: Optional[str] = None
    name: Optional[str] = None
    nonce: str = ""
    free: Optional[int] = None
    total: Optional[int] = None
    fstype: Optional[str] = None

    def as_json(self) -> Dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Written:
        return cls(**data)


@dataclass(frozen=True)
class Read:
    """What rank ``reader`` found of rank ``writer``'s file (SEEN, ABSENT, WRONG, UNREADABLE,
    STUCK), the error, and the seconds it polled."""

    reader: int
    writer: int
    state: str
    detail: Optional[str] = None
    waited: float = 0.0

    def as_json(self) -> Dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Read:
        return cls(**data)


def usable(w: Written, first: Written) -> bool:
    """Returns True where rank ``w`` wrote its file in the directory rank 0 (``first``) uses."""
    return w.state == OK and w.path == first.path


def by_node(written: Sequence[Written]) -> Dict[str, List[Written]]:
    """Returns the ranks of each node, nodes in the order of their first rank."""
    nodes: Dict[str, List[Written]] = {}
    for w in written:
        nodes.setdefault(w.host, []).append(w)
    return nodes


def read_targets(rank: int, written: Sequence[Written]) -> List[Written]:
    """Returns the files ``rank`` reads back: none unless it is the first rank of its node
    and wrote its own; else the first rank's of each node it pairs with that wrote one."""
    nodes = list(by_node(written).values())
    index = next(i for i, ranks in enumerate(nodes) if any(w.rank == rank for w in ranks))
    own = nodes[index][0]
    if own.rank != rank or not usable(own, written[0]):
        return []
    return [nodes[j][0] for j in node_dials(index, len(nodes))
            if usable(nodes[j][0], written[0])]


def _fix(kind: str, path: str) -> str:
    return _FIXES[kind].replace("{path}", path)


def _local_problems(nodes: Mapping[str, List[Written]], first: Written
                    ) -> Tuple[List[Problem], List[str]]:
    """Returns (a row for each node where a rank could not write its file, the other nodes)."""
    rows, fine = [], []
    for host, ranks in nodes.items():
        bad = next((w for w in ranks if not usable(w, first)), None)
        if bad is None:
            fine.append(host)
        elif bad.state == OK:  # written, in another directory
            rows.append(Problem([host], OTHER_PATH, f"the path is {bad.path} there, "
                                f"{first.path} on {first.host}", _fix(OTHER_PATH, first.path)))
        else:
            rows.append(Problem([host], bad.state, bad.detail, _fix(bad.state, first.path)))
    return rows, fine


def _classes(hosts: Sequence[str], pairs: Iterable[Tuple[str, str]]) -> List[List[str]]:
    """Returns ``hosts`` parted into the groups ``pairs`` connect, in the order of ``hosts``."""
    root = {h: h for h in hosts}

    def find(h: str) -> str:
        while root[h] != h:
            root[h] = root[root[h]]
            h = root[h]
        return h

    for a, b in pairs:
        root[find(a)] = find(b)
    classes: Dict[str, List[str]] = {}
    for h in hosts:
        classes.setdefault(find(h), []).append(h)
    return list(classes.values())


def _sharing(fine: Sequence[str], reads: Sequence[Read], host: Mapping[int, str]
             ) -> List[List[str]]:
    """Returns the nodes of ``fine`` (those that wrote) parted into the groups that see each
    other's files: one file system each."""
    return _classes(fine, [(host[r.reader], host[r.writer]) for r in reads
                           if r.state in (SEEN, WRONG)
                           and host[r.reader] in fine and host[r.writer] in fine])


def _visibility(fine: Sequence[str], classes: Sequence[List[str]], reads: Sequence[Read],
                host: Mapping[int, str], fstype: Mapping[str, Optional[str]], path: str
                ) -> List[Problem]:
    """Returns the rows of the nodes (of ``fine``, those that wrote, parted into ``classes``
    that see each other's files) whose files the others do not see: all of them where none
    sees another's (node-local), else the nodes outside the largest class, and the readers of
    that class that lag."""
    absent = [r for r in reads if r.state == ABSENT
              and host[r.reader] in fine and host[r.writer] in fine]
    if not absent:
        return []
    waited = f"waited {max(r.waited for r in absent):.1f} s"
    if len(classes) == len(fine):
        types = ", ".join(sorted({fstype[h] or "?" for h in fine}))
        return [Problem(list(fine), NODE_LOCAL, "each node has its own: no node sees the files "
                        f"written on the others ({waited}; {types})", _fix(NODE_LOCAL, path))]
    main = max(classes, key=len)
    rows = [Problem([h], NOT_SHARED, f"not the directory of {hosts_text(main)}: no files seen "
                    f"either way ({waited}; {fstype[h] or '?'} there, {fstype[main[0]] or '?'}"
                    f" on {main[0]})", _fix(NOT_SHARED, path)) for h in fine if h not in main]
    rows += [Problem([host[r.reader]], LAGGING, f"did not see the file of {host[r.writer]} "
                     f"within {r.waited:.1f} s, though the others' were seen",
                     _fix(LAGGING, path))
             for r in absent if host[r.reader] in main and host[r.writer] in main]
    return rows


def _read_errors(reads: Sequence[Read], host: Mapping[int, str], path: str) -> List[Problem]:
    """Returns a row for each read that failed otherwise than by a missing file."""
    return [Problem([host[r.reader]], r.state, f"the file of {host[r.writer]}: {r.detail}",
                    _fix(r.state, path))
            for r in reads if r.state in (WRONG, UNREADABLE, STUCK)]


def _grouped(rows: Sequence[Problem]) -> List[Problem]:
    """Returns ``rows`` with the same problem, seen alike, as one row of all their nodes."""
    groups: Dict[Tuple[str, Optional[str], str], List[str]] = {}
    for p in rows:
        hosts = groups.setdefault((p.kind, p.seen, p.fix), [])
        hosts.extend(h for h in p.hosts if h not in hosts)
    return [Problem(hosts, kind, seen, fix) for (kind, seen, fix), hosts in groups.items()]


def _spaces(nodes: Mapping[str, List[Written]], sharing: Sequence[List[str]]) -> List[Space]:
    """Returns the free space of each node, in node order: one figure for each group of nodes
    that see each other's files (one file system, read at different moments: its first rank
    that knows it), the figure of its own first rank that knows it for any other node; nodes
    with the same figures (as printed) together."""
    group = {h: hosts for hosts in sharing for h in hosts}
    figures: Dict[str, Space] = {}
    for host in nodes:
        known = [(w.free, w.total) for h in group.get(host, [host]) for w in nodes[h]
                 if w.free is not None and w.total is not None]
        if known:
            free, total = known[0]
            figures.setdefault(space_text(free, total), Space(free, total, [])).hosts.append(host)
    return list(figures.values())


def _notes(written: Sequence[Written], removals: Sequence[Optional[str]],
           nodes: Mapping[str, List[Written]], gathered: bool) -> List[str]:
    """Returns the report's notes: what could not be checked, files left behind."""
    notes = []
    if not gathered:
        notes.append("without MPI (--source slurm) the ranks cannot compare what they see: "
                     "whether the other nodes see this directory is not checked (run it "
                     "under MPI, srun --mpi=pmix, for that)")
    elif len(nodes) == 1:
        notes.append("the job has one node: whether other nodes (a requeued run may get "
                     "others) see this directory is not checked")
    first = written[0]
    if (not gathered or len(nodes) == 1) and first.fstype in LOCAL_TYPES:
        notes.append(f"it is on {first.fstype} on {first.host}, a file system of that node "
                     "alone: other nodes would not see it")
    left = [f"rank {w.rank} on {w.host}: {error}" for w, error in
            zip(written, removals, strict=True) if error]
    if left:
        notes.append("files left behind in the directory (could not be removed): " +
                     "; ".join(left[:3]) + (f"; and {len(left) - 3} more" if left[3:] else ""))
    return notes


def judge(written: Sequence[Written], reads: Sequence[Read],
          removals: Sequence[Optional[str]], *, gathered: bool, seconds: float
          ) -> CheckpointReport:
    """Returns the report of every rank's write (``written``, in rank order: every rank's
    with MPI, this rank's alone without), the nodes' reads of each other's files, and each
    rank's error removing its file (None where it did, or wrote none)."""
    first = written[0]
    nodes = by_node(written)
    host = {w.rank: w.host for w in written}
    fstypes = {h: ranks[0].fstype for h, ranks in nodes.items()}
    rows, fine = _local_problems(nodes, first)
    sharing = _sharing(fine, reads, host)
    rows += _visibility(fine, sharing, reads, host, fstypes, first.path)
    rows += _read_errors(reads, host, first.path)
    return CheckpointReport(first.path, list(nodes), _grouped(rows), _spaces(nodes, sharing),
                            fstypes, gathered, seconds, _notes(written, removals, nodes, gathered))
