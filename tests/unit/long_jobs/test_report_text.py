"""long_jobs.report_text: the report's screen: the job's state, a row a run, the totals, the
time's split, the ETTR, other jobs and passed-over records, the end line; durations."""

from __future__ import annotations

import pytest

import time

from mpi_resolver.long_jobs.report import totals
from mpi_resolver.long_jobs.report_text import duration, report_text
from mpi_resolver.long_jobs.story import story_of
from tests.unit.long_jobs.ledger_records import (T, completed, end, night, restore, save, slow,
                                                 start)

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("seconds, text", [
    (0.214, "0.21 s"), (9.99, "9.99 s"), (10, "10 s"), (119.4, "119 s"), (120, "2.0 min"),
    (7199, "120.0 min"), (7200, "2.0 h"), (36000, "10.0 h"),
])
def test_durations(seconds, text) -> None:
    assert duration(seconds) == text


def test_a_nights_report() -> None:
    lines = report_text(story_of(night()), "/ck", "/ck/mpi_resolver.ledger.jsonl")
    assert lines[0] == "job 123: training completed at step 600"
    assert lines[1].split() == ["run", "start", "length", "steps", "ended", "by", "then"]
    rows = lines[2:5]
    assert rows[0].split()[0] == "1" and "0 -> 237" in rows[0]
    assert "SIGKILL (task 1 on node2)" in rows[0] and rows[0].endswith("restart, 37 steps lost")
    assert "USR1 (srun exited 75)" in rows[1] and rows[1].endswith("requeue")
    assert "390 -> 600" in rows[2] and rows[2].endswith("completed" + " " * 31 + "  end")
    assert lines[5] == "runs 3: 1 restarted in the allocation, 1 requeued; saves 4 in 0.95 s"
    assert lines[6] == "steps: 600 done, 637 trained, 37 lost (trained again)"
    assert lines[7].startswith("wall time 2.7 min: training ")
    assert lines[8].startswith("ETTR 0.")
    assert lines[-1].startswith("job 123: 3 runs, 1 restart (SIGKILL on node2), 1 requeue")
    assert len(lines) == 10


def test_the_slow_ranks_follow_the_table() -> None:
    from mpi_resolver.long_jobs.stragglers import Slow

    records = night()
    records.insert(7, slow(60))
    lines = report_text(story_of(records), "/ck")
    assert lines[5] == "run 2: " + Slow(1, "node2", 0.29, 0.2, 3, 5).line()
    assert lines[5] == ("run 2: rank 1 on node2 is slow: 0.29 s for what its peers do in 0.2 "
                        "s (1.45 times their median), slow in 3 of its last 5 rounds")
    assert lines[6].startswith("runs 3: ") and len(lines) == 11


def test_a_running_job_without_supervise() -> None:
    records = [restore(0, 0), save(10, 50, ok=False), save(20, 60)]
    lines = report_text(story_of(records), "/ck")
    assert lines[0] == "job 123: at step 60, not completed (yet)"
    assert "? (no supervise)" in lines[2] and lines[2].rstrip().endswith("-")
    assert lines[3].endswith("saves 1 in 1.00 s (1 failed)")


def test_no_step_yet_and_unknown_steps() -> None:
    lines = report_text(story_of([start(1, 0, job=None)]), "/ck")
    assert lines[0] == "the job (no Slurm job id): no step reached yet"
    assert "? -> ?" in lines[2]
    assert lines[-2] == "ETTR ?: the time training steps that were kept over the wall time " \
                        "(docs/long-jobs.md, 'What a job went through')"


def test_other_jobs_and_records_passed_over_are_said() -> None:
    records = [start(1, 0, job="7"), {"event": "tea"}, *night()]
    lines = report_text(story_of(records), "/ck", "/ck/L")
    assert "the ledger also holds 1 earlier job(s) in /ck: 7 (--job ID)" in lines
    assert "1 record(s) of /ck/L not understood were passed over (another release of " \
           "mpi_resolver?)" in lines


def test_a_restart_without_words() -> None:
    records = [start(1, 0), end(1, 5, what="", cause="a hang", status=124, node=None)]
    row = report_text(story_of(records), "/ck")[2]
    assert "a hang ()" in row


@pytest.mark.parametrize("reached, said", [(201, "restart, 1 step lost"),
                                           (202, "restart, 2 steps lost"), (200, "restart")])
def test_a_rows_steps_lost(reached, said) -> None:
    records = [start(1, 0), restore(1, 0), end(1, 10, reached=reached, reached_at=9),
               start(2, 11), restore(12, 200)]
    assert report_text(story_of(records), "/ck")[2].endswith(said)


def test_the_time_line_and_the_start_column() -> None:
    story = story_of(night())
    t = totals(story)
    lines = report_text(story, "/ck")
    assert lines[7] == (
        f"wall time {duration(t.wall)}: training {duration(t.training)}, starting "
        f"{duration(t.starting)}, saving {duration(t.saving)}, redone {duration(t.redone)}, "
        f"stopping {duration(t.stopping)}, between runs {duration(t.waiting)}")
    assert lines[2].split()[1:3] == time.strftime("%m-%d %H:%M:%S", time.localtime(T)).split()


@pytest.mark.parametrize("records, ended", [
    ([restore(0, 0), completed(5, 10)], "completed"),
    ([restore(0, 0), save(5, 10)], "? (no supervise)"),
    ([start(1, 0), end(1, 5, what="rank 1 on n2: Killed (signal 9)")], "SIGKILL (rank 1 on n2)"),
    ([start(1, 0), end(1, 5, what="mpirun: noticed", status=3, cause="a non-zero exit")],
     "exit 3 (mpirun: noticed)"),
])
def test_how_a_row_says_the_end(records, ended) -> None:
    row = report_text(story_of(records), "/ck")[2]
    assert row[47:].startswith(ended), row  # the column after run, start, length, steps
