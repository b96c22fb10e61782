"""Aligned plain-text tables for the reports (pure)."""

from __future__ import annotations

from typing import Mapping, Optional, Sequence


def text_table(rows: Sequence[Mapping[str, object]], columns: Sequence[str],
               limit: Optional[int] = None) -> str:
    """Returns ``rows`` (dicts keyed by column) as a table with a header line, columns padded
    to their widest cell; at most ``limit`` rows, then a line saying how many more there are.
    None prints as '-'."""
    shown = rows if limit is None else rows[:limit]
    cells = [list(columns)] + [["-" if row[c] is None else str(row[c]) for c in columns]
                               for row in shown]
    widths = [max(len(r[i]) for r in cells) for i in range(len(columns))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in cells]
    if limit is not None and len(rows) > limit:
        lines.append(f"... and {len(rows) - limit} more rows")
    return "\n".join(lines)
