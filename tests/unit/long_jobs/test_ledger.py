"""long_jobs.ledger: the job's record of its runs, appended whole and read back (a torn line
passed over), and what the policy reads in it: the last run's progress, the nodes blamed."""

from __future__ import annotations

import json
import os
from typing import List, Optional

import pytest

from mpi_resolver.long_jobs import ledger
from mpi_resolver.long_jobs.ledger import LEDGER, RunEnded

pytestmark = pytest.mark.unit


def ended(run: int, *, job: Optional[str] = "12", cause: str = "killed by a signal",
          node: Optional[str] = "node2", blamed: bool = True,
          progress: str = "stalled", came: str = "nothing") -> RunEnded:
    return RunEnded(job, run, cause, f"task 1 on {node}: Killed (signal 9)", node, blamed, 137,
                    40, 40, progress, "restart", 1.5, came=came)


WARNED, TIME_LIMIT = "the warning signal", "SIGTERM at the time limit"


def test_a_record_round_trips(tmp_path) -> None:
    record = ended(1)
    ledger.append(str(tmp_path), record.record())
    ledger.append(str(tmp_path), {"event": "run_start", "job": "12", "run": 2})
    read = ledger.read(str(tmp_path))
    assert [r["event"] for r in read] == ["run_end", "run_start"]
    assert RunEnded.of(read[0]) == record
    assert (tmp_path / LEDGER).read_text().count("\n") == 2  # one line each
    first = (tmp_path / LEDGER).read_text().splitlines()[0]
    assert list(json.loads(first)) == sorted(record.record())  # keys in order: lines diff


def test_a_torn_line_then_later_runs_are_read_past_it(tmp_path) -> None:
    """A supervise killed mid-write leaves half a line; the next one's records follow it."""
    with open(tmp_path / LEDGER, "wb") as f:
        f.write(b'{"event": "run_end", "job": "12", "r\xff\xfe\n')  # cut short, bad bytes
    ledger.append(str(tmp_path), ended(2).record())
    assert [RunEnded.of(r) for r in ledger.read(str(tmp_path))] == [ended(2)]


def test_a_torn_line_and_other_text_are_passed_over(tmp_path) -> None:
    ledger.append(str(tmp_path), ended(1).record())
    with open(tmp_path / LEDGER, "a") as f:
        f.write('[1, 2]\n{"event": "run_end", "job": "12", "ru')  # not an object; cut short
    assert [RunEnded.of(r) for r in ledger.read(str(tmp_path))] == [ended(1)]


def test_no_ledger_is_no_record(tmp_path) -> None:
    assert ledger.read(str(tmp_path / "nowhere")) == []


def test_the_ledger_is_created_with_the_directory_s_rights(tmp_path) -> None:
    ledger.append(str(tmp_path), {"event": "x"})
    assert os.stat(tmp_path / LEDGER).st_mode & 0o777 == 0o644 & ~_umask()


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


@pytest.mark.parametrize("record", [
    {"event": "run_start", "job": "12", "run": 1},
    {**ended(1).record(), "event": "save"},
    {k: v for k, v in ended(1).record().items() if k != "progress"},  # a field missing
    {},
])
def test_only_whole_run_ends_are_runs(record) -> None:
    assert RunEnded.of(record) is None


def test_runs_are_this_job_s() -> None:
    records = [ended(1).record(), ended(2, job="99").record(), {"event": "run_start"},
               ended(3).record()]
    assert [r.run for r in ledger.runs(records, "12")] == [1, 3]
    assert ledger.runs(json.loads(json.dumps(records)), "13") == []


@pytest.mark.parametrize("history, stalled", [
    ([], None),
    ([ended(1, progress="advanced")], None),
    ([ended(1)], 1),
    ([ended(1), ended(2, progress="advanced")], None),
    ([ended(1, progress="advanced"), ended(2)], 2),
    ([ended(1), ended(2, cause="not started")], 1),  # a run not started is not a run
    ([ended(1, progress="unknown")], None),
    ([ended(1, progress="complete")], None),
])
def test_stalled_before(history: List[RunEnded], stalled: Optional[int]) -> None:
    found = ledger.stalled_before(history)
    assert (found.run if found else None) == stalled


@pytest.mark.parametrize("history, cut_now, stalled", [
    # a run now that the scheduler cut: only a run it cut as well, without progress, stops
    ([ended(1)], True, None),
    ([ended(1, came=WARNED)], True, 1),
    ([ended(1, came=TIME_LIMIT)], True, 1),
    ([ended(1, cause="killed by the warning signal")], True, 1),
    ([ended(1, came=WARNED, progress="advanced")], True, None),
    ([ended(1, came=WARNED), ended(2, cause="not started")], True, 1),
    ([ended(1, came="SIGTERM (Slurm ends the job)")], True, None),
    # a failure now: the runs cut without progress are passed over
    ([ended(1), ended(2, came=WARNED)], False, 1),
    ([ended(1), ended(2, cause="killed by the warning signal")], False, 1),
    ([ended(1, progress="advanced"), ended(2, came=WARNED)], False, None),
    ([ended(1), ended(2, came=WARNED, progress="advanced")], False, None),
    ([ended(1, came=WARNED)], False, None),
    ([ended(1, came=TIME_LIMIT), ended(2, came=WARNED)], False, None),
])
def test_stalled_before_a_run_the_scheduler_cut(history: List[RunEnded], cut_now: bool,
                                                stalled: Optional[int]) -> None:
    """A run the scheduler cut (its warning signal, the time limit) is no failure of the
    job's: a failure and a cut run do not stop the job together; two cut runs in a row
    without progress do (its time never reaches a save), and so do two failures with cut
    runs between them."""
    found = ledger.stalled_before(history, cut_now=cut_now)
    assert (found.run if found else None) == stalled


def test_blamed_are_the_failures_nodes() -> None:
    history = [ended(1, node="node2"), ended(2, node="node1", blamed=False),
               ended(3, node=None), ended(4, node="node2")]
    assert ledger.blamed(history) == ["node2", "node2"]
