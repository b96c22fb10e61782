"""long_jobs.journal.write_ended, the one rule both edges follow when a checkpoint's write
ends: the manifest first (its failure is the save's), then the save's record (what the
training paid: the stall alone in the background, the stall and the write at once), or the
warning and the failure's record; worker 0's records alone, none without a journal."""

from __future__ import annotations

import logging
from typing import Any, List, Optional

import pytest

from mpi_resolver.long_jobs import ledger
from mpi_resolver.long_jobs.background import Written
from mpi_resolver.long_jobs.journal import Journal, write_ended

pytestmark = pytest.mark.unit


def manifest_that(fails: bool) -> Any:
    def write() -> None:
        if fails:
            raise OSError(30, "Read-only file system")
    return write


@pytest.mark.parametrize("written, background, fails, why, record", [
    (Written(6, 0.25, 2.0), False, False, None,
     {"event": "save", "step": 6, "seconds": 2.25, "kind": "periodic", "checkpoint": "ck-6",
      "bytes": 99}),
    (Written(6, 0.25, 2.0), True, False, None,
     {"event": "save", "step": 6, "seconds": 0.25, "kind": "periodic", "checkpoint": "ck-6",
      "bytes": 99, "write": 2.0}),
    (Written(6, 0.25, 2.0), True, True, "[Errno 30] Read-only file system",
     {"event": "save_failed", "step": 6, "seconds": 0.25, "kind": "periodic",
      "error": "[Errno 30] Read-only file system"}),
    (Written(6, 0.25, 0.0, error="No space left"), False, False, "No space left",
     {"event": "save_failed", "step": 6, "seconds": 0.25, "kind": "periodic",
      "error": "No space left"}),
])
def test_write_ended(tmp_path, caplog, written: Written, background: bool, fails: bool,
                     why: Optional[str], record: dict) -> None:
    caplog.set_level(logging.INFO, "mpi_resolver")
    said: List[str] = []
    journal = Journal(str(tmp_path), "77", True, {}, say=said.append)
    got = write_ended(journal, written, "periodic", background, manifest_that(fails),
                      lambda: ("ck-6", 99))
    assert got == why
    (found,) = ledger.read(str(tmp_path))
    assert {k: v for k, v in found.items() if k not in ("job", "time", "format")} == record
    warned = [r.getMessage() for r in caplog.records if "was not saved" in r.getMessage()]
    assert warned == ([] if why is None else [
        f"mpi_resolver: the checkpoint at step 6 was not saved ({why}); the last one that "
        "restores is kept"])


@pytest.mark.parametrize("chief", [False, None])
def test_no_record_but_worker_0_s(tmp_path, chief) -> None:
    """Another worker's journal writes nothing and never asks for the checkpoint's name and
    bytes (a walk of its files); without a journal the rule still holds."""
    journal = None if chief is None else Journal(str(tmp_path), "77", chief, {})

    def never() -> Any:
        raise AssertionError("the checkpoint's files walked on another worker")
    assert write_ended(journal, Written(6, 0.25, 2.0), "signal", False, lambda: None,
                       never) is None
    assert write_ended(journal, Written(7, 0.25, 2.0), "signal", False,
                       manifest_that(True), never) == "[Errno 30] Read-only file system"
    assert ledger.read(str(tmp_path)) == []
