"""long_jobs.journal: worker 0's records (restore, save, save_failed, slow, completed) in the
ledger, the save's line, the progress file at most every PROGRESS_EVERY seconds; the other
workers write nothing; a directory that cannot be written said once, the training going on."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import List

import pytest

from mpi_resolver.long_jobs import ledger
from mpi_resolver.core.errors import FormatError
from mpi_resolver.long_jobs.journal import (PROGRESS, PROGRESS_EVERY, Journal,
                                            checkpoint_bytes, planned_steps, read_progress,
                                            error_text, not_saved_line, save_line)
from mpi_resolver.long_jobs.stragglers import Slow

pytestmark = pytest.mark.unit

ENV = {"SLURM_RESTART_COUNT": "2", "SLURM_JOB_NODELIST": "node[1-2]"}


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def journal(tmp_path, chief: bool = True, env=ENV):
    said: List[str] = []
    clock = Clock()
    return Journal(str(tmp_path), "77", chief, env, clock=clock, say=said.append), clock, said


@pytest.mark.parametrize("name, step, kind, seconds, write, line", [
    ("ckpt-7", 280, "periodic", 0.214, None,
     "checkpoint ckpt-7 at step 280 (periodic) in 0.21 s"),
    (None, 3, "signal", None, None, "checkpoint (the save_fn) at step 3 (signal)"),
    ("ckpt-00000010.npz", 10, "final", 12.0, None,
     "checkpoint ckpt-00000010.npz at step 10 (final) in 12.00 s"),
    ("ckpt-7", 280, "periodic", 0.0042, 0.214, "checkpoint ckpt-7 at step 280 (periodic) in "
                                               "0.004 s, written in the background in 0.21 s"),
    ("ckpt-7", 280, "periodic", None, 0.0, "checkpoint ckpt-7 at step 280 (periodic), "
                                           "written in the background in 0.00 s"),
])
def test_save_lines(name, step, kind, seconds, write, line) -> None:
    assert save_line(name, step, kind, seconds, write) == line


def test_a_save_written_in_the_background_records_its_write(tmp_path) -> None:
    j, _, said = journal(tmp_path)
    j.saved(60, 0.004, "periodic", "ckpt-3", 2048, write=0.5)
    j.saved(70, 0.25, "signal", "ckpt-4", 2048)
    first, second = ledger.read(str(tmp_path))
    assert (first["seconds"], first["write"]) == (0.004, 0.5)
    assert "write" not in second
    assert said == ["checkpoint ckpt-3 at step 60 (periodic) in 0.004 s, written in the "
                    "background in 0.50 s", "checkpoint ckpt-4 at step 70 (signal) in 0.25 s"]


def test_worker_0_records_a_run(tmp_path) -> None:
    j, clock, said = journal(tmp_path)
    j.restored(40, "ckpt-2", ["checkpoint ckpt-3 ... skipped"], plan=100)
    clock.now += 5
    j.saved(60, 0.25, "periodic", "ckpt-3", 2048)
    j.save_failed(70, 1.5, "signal", "disk full")
    j.slow(Slow(1, "node2", 0.29, 0.2, 4, 5))
    j.completed(80)
    records = ledger.read(str(tmp_path))
    assert [r["event"] for r in records] == ["restore", "save", "save_failed", "slow",
                                             "completed"]
    assert records[0] == {"event": "restore", "step": 40, "checkpoint": "ckpt-2",
                          "skipped": ["checkpoint ckpt-3 ... skipped"], "plan": 100,
                          "nodes": "node[1-2]", "requeues": 2, "job": "77", "time": 1000.0,
                          "format": ledger.FORMAT}
    assert records[1] == {"event": "save", "step": 60, "seconds": 0.25, "kind": "periodic",
                          "checkpoint": "ckpt-3", "bytes": 2048, "job": "77", "time": 1005.0,
                          "format": ledger.FORMAT}
    assert records[2]["error"] == "disk full" and records[2]["kind"] == "signal"
    assert records[3] == {"event": "slow", "rank": 1, "node": "node2", "seconds": 0.29,
                          "peers": 0.2, "rounds": 4, "window": 5, "job": "77",
                          "time": 1005.0, "format": ledger.FORMAT}
    assert said == ["checkpoint ckpt-3 at step 60 (periodic) in 0.25 s",
                    Slow(1, "node2", 0.29, 0.2, 4, 5).line()]
    assert read_progress(str(tmp_path)) == {"job": "77", "step": 80, "time": 1005.0,
                                            "from": 40, "since": 1000.0}


def test_the_other_workers_write_nothing(tmp_path) -> None:
    j, _, said = journal(tmp_path, chief=False)
    j.restored(0, None)
    j.saved(1, 0.1, "periodic", "c")
    j.progress(2, force=True)
    j.slow(Slow(1, None, 2.0, 1.0))
    j.completed(3)
    assert os.listdir(tmp_path) == [] and said == []


def test_the_progress_file_at_most_every_so_often(tmp_path) -> None:
    j, clock, _ = journal(tmp_path, env={})
    j.restored(0, None)
    assert read_progress(str(tmp_path))["step"] == 0
    clock.now += PROGRESS_EVERY - 0.01
    j.progress(5)
    assert read_progress(str(tmp_path))["step"] == 0
    clock.now += 0.01
    j.progress(6)
    assert read_progress(str(tmp_path))["step"] == 6
    j.progress(7, force=True)
    assert read_progress(str(tmp_path))["step"] == 7
    assert not os.path.exists(tmp_path / (PROGRESS + ".part"))
    assert ledger.read(str(tmp_path))[0]["requeues"] == 0
    assert ledger.read(str(tmp_path))[0]["nodes"] is None


def test_a_first_progress_is_written_at_once(tmp_path) -> None:
    j, _, _ = journal(tmp_path)
    j.progress(3)
    assert read_progress(str(tmp_path))["step"] == 3


def test_a_directory_that_cannot_be_written_is_said_once(tmp_path) -> None:
    gone = tmp_path / "gone"
    said: List[str] = []
    j = Journal(str(gone), "77", True, ENV, say=said.append)
    j.restored(0, None)
    j.saved(1, 0.1, "periodic", "c")
    j.progress(5, force=True)
    assert len(said) == 2 and said[1] == "checkpoint c at step 1 (periodic) in 0.10 s"
    assert said[0].startswith(f"{gone}/mpi_resolver.ledger.jsonl cannot be written (")
    assert said[0].endswith("the job's ledger and progress stop here; the training goes on")


def test_a_progress_file_that_cannot_be_written_is_said(tmp_path) -> None:
    j, _, said = journal(tmp_path)
    os.mkdir(tmp_path / (PROGRESS + ".part"))  # the part file cannot be opened
    j.progress(1)
    assert len(said) == 1 and PROGRESS in said[0]
    j.saved(2, 0.1, "periodic", "c")
    assert ledger.read(str(tmp_path)) == []  # broken: nothing more


@pytest.mark.parametrize("content", ["[1, 2]", "{torn", None])
def test_a_progress_file_not_one_object_is_none(tmp_path, content) -> None:
    if content is not None:
        (tmp_path / PROGRESS).write_text(content)
    assert read_progress(str(tmp_path)) is None


def test_checkpoint_bytes(tmp_path) -> None:
    (tmp_path / "a").write_bytes(b"x" * 10)
    (tmp_path / "b").write_bytes(b"x" * 5)
    assert checkpoint_bytes([str(tmp_path / "a"), str(tmp_path / "b")]) == 15
    assert checkpoint_bytes([str(tmp_path / "a"), str(tmp_path / "none")]) == 10
    assert checkpoint_bytes([str(tmp_path / "none"), str(tmp_path)]) is None
    assert checkpoint_bytes([]) is None
    assert json.dumps(checkpoint_bytes([])) == "null"


def test_a_step_not_written_yet_is_written_at_the_end(tmp_path) -> None:
    j, clock, _ = journal(tmp_path)
    j.restored(0, None)
    j.flush()  # nothing pending: nothing more
    assert read_progress(str(tmp_path))["step"] == 0
    clock.now += 0.5
    j.progress(7)
    assert read_progress(str(tmp_path))["step"] == 0
    j.flush()
    assert read_progress(str(tmp_path)) == {"job": "77", "step": 7, "time": 1000.5, "from": 0,
                                            "since": 1000.0}
    clock.now += 0.1
    j.flush()  # written: not again
    assert read_progress(str(tmp_path))["time"] == 1000.5


def test_worker_0_flushes_at_its_exit(tmp_path) -> None:
    """A process that ends on an error (a peer lost) writes the step it reached."""
    script = (
        "import sys; from mpi_resolver.long_jobs.journal import Journal\n"
        f"j = Journal({str(tmp_path)!r}, '5', True, {{}})\n"
        "j.restored(0, None)\n"
        "for step in range(1, 51): j.progress(step)\n"
        "raise SystemExit(1)\n")
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, timeout=60)
    assert proc.returncode == 1
    assert read_progress(str(tmp_path))["step"] == 50


def test_forced_writes_and_the_first_values(tmp_path) -> None:
    j, clock, _ = journal(tmp_path, env={"SLURM_NODELIST": "n[1-3]"})
    j.flush()  # nothing reached yet: nothing written
    assert read_progress(str(tmp_path)) is None
    j.progress(2)
    assert read_progress(str(tmp_path)) == {"job": "77", "step": 2, "time": 1000.0, "from": 0,
                                            "since": None}
    j.restored(7, "ckpt-1")  # right after a write: the restore's is written all the same
    assert read_progress(str(tmp_path))["step"] == 7
    j.saved(9, 0.1, "periodic", "ckpt-2")  # likewise the save's
    assert read_progress(str(tmp_path))["step"] == 9
    j.save_failed(10, 0.2, "signal", "quota")
    records = ledger.read(str(tmp_path))
    assert records[0]["nodes"] == "n[1-3]"
    assert records[-1] == {"event": "save_failed", "step": 10, "seconds": 0.2,
                           "kind": "signal", "error": "quota", "job": "77", "time": 1000.0,
                           "format": ledger.FORMAT}


def test_no_flush_into_a_directory_gone(tmp_path) -> None:
    directory = tmp_path / "ck"
    directory.mkdir()
    said: List[str] = []
    j = Journal(str(directory), "77", True, {}, say=said.append)
    j.progress(1)
    j.progress(2)  # pending
    (directory / PROGRESS).unlink()
    directory.rmdir()
    j.flush()
    assert said == [] and not directory.exists()


@pytest.mark.parametrize("value, planned", [(None, None), (1, 1), (600, 600)])
def test_planned_steps(value, planned) -> None:
    assert planned_steps(value) == planned


@pytest.mark.parametrize("value", [0, -1, True, "600", 2.0])
def test_planned_steps_refused(value) -> None:
    with pytest.raises(FormatError, match=r"total_steps: expected the whole number of steps "
                                          r"the training plans \(> 0\), or None, got "):
        planned_steps(value)


@pytest.mark.parametrize("error, text", [
    (OSError(28, "No space left on device"), "[Errno 28] No space left on device"),
    (RuntimeError("  two\n  lines "), "two lines"),
    (RuntimeError(""), "RuntimeError"),
    (ValueError("x" * 301), "x" * 300),
])
def test_error_text(error, text) -> None:
    assert error_text(error) == text


def test_not_saved_line() -> None:
    assert not_saved_line(7, "disk full") == ("the checkpoint at step 7 was not saved (disk "
                                              "full); the last one that restores is kept")
