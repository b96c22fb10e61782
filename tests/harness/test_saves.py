"""tests/harness/saves: a save waited for in the ledger; one that never comes is named."""

from __future__ import annotations

import threading

import pytest

from mpi_resolver.long_jobs import ledger
from tests.harness.saves import wait_saved

pytestmark = pytest.mark.unit


def test_a_save_recorded_later_is_waited_for(tmp_path) -> None:
    ledger.append(str(tmp_path), {"event": "save", "step": 10})
    timer = threading.Timer(0.3, lambda: ledger.append(str(tmp_path),
                                                       {"event": "save", "step": 20}))
    timer.start()
    wait_saved(tmp_path, 20, 10)
    assert [r["step"] for r in ledger.read(str(tmp_path))] == [10, 20]


@pytest.mark.parametrize("records", [[], [{"event": "save", "step": 10},
                                          {"event": "save_failed", "step": 20}]])
def test_a_save_that_never_comes_is_named(tmp_path, records) -> None:
    for record in records:
        ledger.append(str(tmp_path), record)
    with pytest.raises(TimeoutError, match=r"no save at step 20 in .* within 0.2 s \(saves "
                                           r"seen: \[(10)?\]\)"):
        wait_saved(tmp_path, 20, 0.2)
