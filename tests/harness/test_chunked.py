"""tests.harness.chunked: what ranks print, put back together."""

from __future__ import annotations

import io
import json
from typing import Any, List

import pytest

from tests.harness import chunked

GLOO = "[Gloo] Rank 2 is connected to 3 peer ranks. Expected number of connected peer ranks is : "


def written(record: Any, ident: str, marker: str = "@") -> List[str]:
    """Returns the lines chunked.write prints for ``record``."""
    out = io.StringIO()
    chunked.write(json.dumps(record), marker, ident, out)
    return out.getvalue().splitlines()


BIG = {"text": "x" * 1500}


@pytest.mark.parametrize("lines, expected", [
    pytest.param(written({"a": 1}, "r0") + written({"a": 2}, "r1"), [{"a": 1}, {"a": 2}],
                 id="two records, in the order they began"),
    pytest.param(written(BIG, "r0"), [BIG], id="a record in three pieces"),
    pytest.param(written(BIG, "r0")[::-1], [BIG], id="its pieces out of order"),
    pytest.param([GLOO + written({"a": 1}, "r1", "JAXPROBE ")[0], "3"], [{"a": 1}],
                 id="after another process's unfinished line (CI, stop 48)"),
    pytest.param(["user@node1 ran", "@ 1/2", "3"], [], id="lines that are no piece"),
])
def test_read_puts_records_together(lines: List[str], expected: List[Any]) -> None:
    marker = "JAXPROBE " if any("JAXPROBE" in line for line in lines) else "@"
    assert chunked.read("\n".join(lines) + "\n", marker) == expected


def test_each_piece_is_one_line_of_at_most_a_chunk() -> None:
    lines = written(BIG, "r0")
    assert [line.split(" ", 2)[1] for line in lines] == ["0/3", "1/3", "2/3"]
    assert max(len(line.split(" ", 2)[2]) for line in lines) == chunked.CHUNK


@pytest.mark.parametrize("lines, message", [
    pytest.param(written(BIG, "r0")[:2], "record r0 is incomplete: pieces [0, 1] of 3",
                 id="a piece missing"),
    pytest.param(["@r0 0/1 {\"a\": "], "record r0 is not JSON", id="not JSON"),
])
def test_read_names_a_torn_record(lines: List[str], message: str) -> None:
    with pytest.raises(chunked.TornRecord, match=message.replace("[", r"\[").replace("]", r"\]")):
        chunked.read("\n".join(lines), "@")
