"""`check --checkpoint-dir`'s files and figures (pure): the argument, the name and the text of
each rank's file, the file system a path is on (from /proc/self/mountinfo's text), sizes and
host lists as the report prints them."""

from __future__ import annotations

import errno
import re
from typing import Mapping, Optional, Sequence

from mpi_resolver.core.errors import FormatError

#: File systems of one node alone: a directory there is not what the other nodes see.
LOCAL_TYPES = frozenset({"tmpfs", "ramfs", "devtmpfs", "overlay", "ext2", "ext3", "ext4", "xfs",
                         "btrfs", "f2fs", "vfat", "exfat"})
PREFIX = ".mpi-resolver-check-"
_UNITS = ("B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB")
_HOSTS_SHOWN = 4


def checkpoint_dir(text: str) -> str:
    """Returns ``text``, --checkpoint-dir's value.

    Raises:
      FormatError: it names no directory (empty, or blanks alone).
    """
    if not text.strip():
        raise FormatError(f"an empty path ({text!r}): give the directory the job saves its "
                          "checkpoints in, on a file system every node sees (e.g. "
                          "--checkpoint-dir $HOME/ckpt)")
    return text


def job_step(env: Mapping[str, str]) -> str:
    """Returns '<job>.<step>' from Slurm's SLURM_JOB_ID and SLURM_STEP_ID ('none' for either
    where unset), each cut to what a file name takes."""
    return ".".join(re.sub(r"[^A-Za-z0-9_]", "_", env.get(v) or "none")[:20]
                    for v in ("SLURM_JOB_ID", "SLURM_STEP_ID"))


def file_name(job: str, rank: int, nonce: str) -> str:
    """Returns the hidden name of ``rank``'s file: unique to the job step, rank and nonce."""
    return f"{PREFIX}{job}-{rank}-{nonce}"


def file_text(rank: int, host: str, nonce: str) -> str:
    """Returns what ``rank`` on ``host`` writes into its file."""
    return f"mpi-resolver check --checkpoint-dir: rank {rank} on {host}, nonce {nonce}\n"


def content_problem(text: str, rank: int, host: str, nonce: str) -> Optional[str]:
    """Returns what is wrong with a file of ``rank`` that reads ``text``, or None."""
    want = file_text(rank, host, nonce)
    if text == want:
        return None
    return f"it reads {text[:80]!r}, written as {want!r}"


def error_detail(step: str, code: int, strerror: str) -> str:
    """Returns what failed, how and errno's name: 'creating a file: ... (EROFS)'."""
    return f"{step}: {strerror} ({errno.errorcode.get(code, code)})"


def _unescape(field: str) -> str:
    """Returns a mountinfo field with its octal escapes (\\040 for a blank) undone."""
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), field)


def _under(path: str, point: str) -> bool:
    return path == point or path.startswith(point.rstrip("/") + "/")


def mount_type(mountinfo: str, path: str) -> Optional[str]:
    """Returns the type of the file system that holds the absolute ``path`` (no symbolic links
    in it), read from /proc/self/mountinfo's ``mountinfo``: the last mount at the longest
    mount point above it; None where no line says."""
    best, found = -1, None
    for line in mountinfo.splitlines():
        head, _, tail = line.partition(" - ")
        fields = head.split(" ")
        if len(fields) < 5 or not tail:
            continue
        point = _unescape(fields[4])
        if _under(path, point) and len(point) >= best:
            best, found = len(point), tail.split(" ")[0]
    return found


def size_text(size: int) -> str:
    """Returns ``size`` bytes as three digits and a binary unit: '52.1 GiB', '252 GiB'."""
    value, unit = float(size), 0
    while value >= 999.5 and unit < len(_UNITS) - 1:
        value /= 1024
        unit += 1
    if unit == 0:
        return f"{size} B"
    digits = 2 if value < 9.995 else 1 if value < 99.95 else 0
    return f"{value:.{digits}f} {_UNITS[unit]}"


def space_text(free: int, total: int) -> str:
    """Returns '52.1 GiB of 252 GiB'."""
    return f"{size_text(free)} of {size_text(total)}"


def hosts_text(hosts: Sequence[str]) -> str:
    """Returns the first few of ``hosts`` and how many more: 'node1, node2 +3 more'."""
    shown = ", ".join(hosts[:_HOSTS_SHOWN])
    more = len(hosts) - _HOSTS_SHOWN
    return f"{shown} +{more} more" if more > 0 else shown
