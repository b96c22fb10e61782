"""docs/long-jobs.md's table of `mpi-resolver report --json` against the code: its keys are
as_json's, every run's key and every key of `seconds` and of a slow rank is named."""

from __future__ import annotations

import re
from dataclasses import fields
from pathlib import Path
from typing import Dict

import pytest

from mpi_resolver.long_jobs.report import RunFigures, as_json
from mpi_resolver.long_jobs.story import story_of
from mpi_resolver.long_jobs.stragglers import Slow
from tests.unit.long_jobs.ledger_records import night, slow

pytestmark = pytest.mark.unit

DOC = Path(__file__).resolve().parents[2] / "docs" / "long-jobs.md"


def table() -> Dict[str, str]:
    """Returns the JSON table's rows: each key of the first column, its meaning."""
    text = DOC.read_text()
    body = text[text.index("| key | meaning |"):].split("\n\n")[0].splitlines()[2:]
    rows = {}
    for row in body:
        keys, meaning = row.strip("|").split("|", 1)
        for key in re.findall(r"`(\w+)`", keys):
            rows[key] = meaning
    return rows


def test_the_table_s_keys_are_the_json_s() -> None:
    records = night()
    records.insert(3, slow(25))
    out = as_json(story_of(records), "/ck")
    assert set(table()) == set(out)


def test_every_key_of_a_run_a_slow_rank_and_the_seconds_is_named() -> None:
    named = table()
    in_runs = set(re.findall(r"`(\w+)`", named["runs"]))
    assert {f.name for f in fields(RunFigures)} <= in_runs
    assert {f.name for f in fields(Slow)} <= in_runs
    out = as_json(story_of(night()), "/ck")
    assert set(out["seconds"]) <= set(re.findall(r"`(\w+)`", named["seconds"]))
