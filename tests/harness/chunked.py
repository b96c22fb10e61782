"""Records that many ranks print into one stream, put back together.

A rank writes its record (a JSON text) as lines ``<marker><id> <k>/<n> <piece>`` of at most
CHUNK characters, each line in one write: srun cuts lines past 1024 bytes, and a write that
small reaches srun's and mpirun's forwarding whole. What it cannot stop is another process's
unfinished line coming first (Gloo prints ``... peer ranks is : `` and its ``3`` in two
writes), so read() finds a marker anywhere in a line, not only at its start.
"""

from __future__ import annotations

import json
import re
import sys
from typing import Any, Dict, List, TextIO

CHUNK = 700


class TornRecord(ValueError):
    """A record whose pieces did not all arrive, or whose text is not JSON."""


def write(text: str, marker: str, ident: str, out: TextIO = sys.stdout) -> None:
    """Writes ``text`` in lines of at most CHUNK characters of it, one write per line."""
    pieces = [text[i:i + CHUNK] for i in range(0, len(text), CHUNK)] or [""]
    for k, piece in enumerate(pieces):
        out.write(f"{marker}{ident} {k}/{len(pieces)} {piece}\n")
        out.flush()


def read(stdout: str, marker: str) -> List[Any]:
    """Returns the records in ``stdout`` in the order of their first pieces.

    Raises TornRecord naming the record whose pieces are missing or whose text is not JSON.
    """
    line_of = re.compile(re.escape(marker) + r"(\S+) (\d+)/(\d+) (.*)$")
    parts: Dict[str, Dict[int, str]] = {}
    sizes: Dict[str, int] = {}
    for line in stdout.splitlines():
        found = line_of.search(line)
        if found is None:
            continue
        ident, k, n, piece = found.group(1), int(found.group(2)), int(found.group(3)), \
            found.group(4)
        parts.setdefault(ident, {})[k] = piece
        sizes[ident] = n
    return [_joined(ident, parts[ident], sizes[ident]) for ident in parts]


def _joined(ident: str, parts: Dict[int, str], size: int) -> Any:
    """Returns the record of ``ident`` from its pieces; raises TornRecord."""
    if sorted(parts) != list(range(size)):
        raise TornRecord(f"record {ident} is incomplete: pieces {sorted(parts)} of {size}")
    text = "".join(parts[k] for k in range(size))
    try:
        return json.loads(text)
    except ValueError as e:
        raise TornRecord(f"record {ident} is not JSON ({e}): {text[:500]!r}") from None
