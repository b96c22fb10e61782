"""_tables: the aligned text tables of the reports."""

from __future__ import annotations

import pytest

from mpi_resolver.core.tables import text_table

pytestmark = pytest.mark.unit


def test_columns_are_padded_to_their_widest_cell_and_lines_end_without_blanks():
    rows = [{"rank": 0, "host": "node1", "gpus": None}, {"rank": 10, "host": "n2", "gpus": "0"}]
    assert text_table(rows, ("rank", "host", "gpus")).splitlines() == [
        "rank  host   gpus",
        "0     node1  -",
        "10    n2     0",
    ]


@pytest.mark.parametrize("count, limit, last", [
    pytest.param(3, None, "2", id="no limit: every row"),
    pytest.param(3, 3, "2", id="as many rows as the limit: every row"),
    pytest.param(4, 3, "... and 1 more rows", id="one more than the limit"),
    pytest.param(10, 3, "... and 7 more rows", id="seven more"),
])
def test_a_limit_cuts_the_rows_and_says_how_many_more(count, limit, last):
    lines = text_table([{"r": i} for i in range(count)], ("r",), limit).splitlines()
    assert lines[-1] == last
    assert len(lines) == 1 + min(count, limit or count) + (count > (limit or count))
