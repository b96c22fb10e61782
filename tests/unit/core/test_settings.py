"""core.settings: the MPI_RESOLVER_* variables, an argument first, then the variable's text
checked by the argument's own rule, the error naming the variable; the list the API page
shows."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from mpi_resolver.core.errors import FormatError, ResolutionError
from mpi_resolver.core.settings import VARIABLES, number_text, setting
from mpi_resolver.long_jobs.restarts import SUPERVISED_ENV

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("text, expected", [
    ("8888", 8888), ("+3", 3), ("-1", -1), ("auto", "auto"), ("1.5", "1.5"), ("", ""),
    ("-", "-"), ("٣", "٣"), ("X1", "X1"),
])
def test_number_text(text, expected):
    assert number_text(text) == expected


def test_setting_keeps_the_error_s_kind():
    def bad_format(_):
        raise FormatError("expected X")

    def bad_value(_):
        raise ResolutionError("expected Y")

    with pytest.raises(FormatError, match=r"^V='a': expected X$"):
        setting(None, "V", {"V": "a"}, bad_format)
    with pytest.raises(ResolutionError, match=r"^V='b': expected Y$") as e:
        setting(None, "V", {"V": "b"}, bad_value)
    assert not isinstance(e.value, FormatError)
    assert setting(0, "V", {"V": "b"}, bad_value) == 0  # a falsy argument is still given


def test_every_variable_the_package_reads_is_listed():
    """Every MPI_RESOLVER_* name in the package's source is a listed setting, but the one that
    supervise sets for its step (not the user's to set)."""
    source = Path(__file__).resolve().parents[3] / "mpi_resolver"
    named = {m for path in source.rglob("*.py")
             for m in re.findall(r"MPI_RESOLVER_[A-Z_]+", path.read_text())}
    assert named - {SUPERVISED_ENV} == set(VARIABLES)
    assert all(name.startswith("MPI_RESOLVER_") for name in VARIABLES)


def test_the_api_page_lists_every_variable_and_no_other():
    text = (Path(__file__).resolve().parents[3] / "docs" / "api.md").read_text()
    section = text.split("## Settings from the environment", 1)[1].split("\n## ", 1)[0]
    table = section.split("| variable | stands for |", 1)[1].split("\n\n", 1)[0]
    rows = [ln.split("|")[1].strip().strip("`") for ln in table.splitlines()
            if ln.startswith("| `")]
    assert rows == list(VARIABLES)
