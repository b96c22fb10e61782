"""supervise's own settings: --max-restarts' forms and refusals (the decisions are the
policy's: test_policy, test_supervision)."""

from __future__ import annotations

import pytest

from mpi_resolver.core.errors import FormatError
from mpi_resolver.long_jobs.restarts import DEFAULT_MAX_RESTARTS, parse_max_restarts

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("text, number", [
    ("0", 0), ("1", 1), ("3", 3), (" 12 ", 12), ("999999999999999999", 999999999999999999),
])
def test_max_restarts_accepted(text: str, number: int) -> None:
    assert parse_max_restarts(text) == number


@pytest.mark.parametrize("text", ["-1", "1.5", "three", "", " ", "+2", "0x3", "1e3",
                                  "9999999999999999999"])
def test_max_restarts_refused_naming_the_accepted_forms(text: str) -> None:
    with pytest.raises(FormatError, match=r"--max-restarts .*a whole number of restarts, 0 or "
                                          r"more: --max-restarts 3 \(the default\), 0 \(never\)"):
        parse_max_restarts(text)


def test_the_default_is_three() -> None:
    assert DEFAULT_MAX_RESTARTS == 3
