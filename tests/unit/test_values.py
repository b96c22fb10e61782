"""_values: whole numbers, ports and GPU counts, one rule each."""

from __future__ import annotations

import pytest

from mpi_resolver._values import require_whole as parse_int

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("value, minimum, expected", [
    pytest.param("0", 0, 0, id="zero is a whole number"),
    pytest.param(" 12 ", 0, 12, id="spaces around the number are ignored"),
    pytest.param("007", 1, 7, id="leading zeros are decimal"),
])
def test_parse_int_accepts(value, minimum, expected):
    assert parse_int(value, name="X_VAR", minimum=minimum) == expected
