"""long_jobs.story: the runs put together from the ledger's records, with and without
supervise, one job's among several, a newer format refused, short causes."""

from __future__ import annotations

import pytest

from mpi_resolver.long_jobs.ledger import RunEnded
from mpi_resolver.long_jobs.story import NewerLedger, short_cause, story_of
from mpi_resolver.long_jobs.stragglers import Slow
from tests.unit.long_jobs.ledger_records import (T, completed, end, night, restore, save, slow,
                                                 start)

pytestmark = pytest.mark.unit


def test_a_night_under_supervise_is_three_runs() -> None:
    story = story_of(night())
    assert story.job == "123" and story.other_jobs == [] and story.passed_over == 0
    assert [(r.resumed, r.reached) for r in story.runs] == [(0, 237), (200, 390), (390, 600)]
    assert [r.requeues for r in story.runs] == [0, 0, 1]
    assert [r.trained for r in story.runs] == [237, 190, 210]
    first = story.runs[0]
    assert (first.start, first.trained_from, first.end, first.reached_at) == (
        T, T + 8, T + 41, T + 36)
    assert [s.step for s in first.saves] == [100, 200]
    assert [r.completed for r in story.runs] == [False, False, True]
    assert story.runs[2].plan == 600


def test_without_supervise_each_restore_starts_a_run() -> None:
    """srun alone: worker 0's records only; a run ends where the next restore comes."""
    records = [restore(0, 0, plan=None), save(10, 50), restore(30, 50), save(40, 90),
               save(45, 95, ok=False), completed(50, 100)]
    story = story_of(records)
    assert [(r.start, r.resumed, r.reached) for r in story.runs] == [
        (T, 0, 50), (T + 30, 50, 100)]
    assert [r.ended for r in story.runs] == [None, None]
    assert story.runs[0].until == T + 10  # its last record
    assert [s.ok for s in story.runs[1].saves] == [True, False]
    assert story.runs[1].reached == 100 and story.runs[1].completed
    assert story.runs[0].plan is None


def test_a_run_end_without_its_start_opens_the_run_its_seconds_before() -> None:
    story = story_of([end(1, 50, seconds=20, reached=7, reached_at=45)])
    assert len(story.runs) == 1
    assert (story.runs[0].start, story.runs[0].reached) == (T + 30, 7)


def test_a_save_before_any_start_opens_a_run() -> None:
    story = story_of([save(5, 10)])
    assert len(story.runs) == 1 and story.runs[0].reached == 10


def test_the_step_after_from_the_manifest_where_no_progress_file_said_more() -> None:
    story = story_of([start(1, 0), end(1, 10, after=30)])
    assert story.runs[0].reached == 30 and story.runs[0].reached_at is None


def test_a_reached_step_never_goes_back() -> None:
    story = story_of([start(1, 0), restore(1, 0), save(5, 40),
                      end(1, 10, reached=20, reached_at=9)])
    assert (story.runs[0].reached, story.runs[0].reached_at) == (40, T + 5)


def test_a_run_start_restore_pair_is_one_run_and_a_second_restore_another() -> None:
    story = story_of([start(1, 0), restore(5, 0), restore(9, 0)])
    assert len(story.runs) == 2
    assert story.runs[0].trained_from == T + 5 and story.runs[1].start == T + 9


@pytest.mark.parametrize("job, runs, others", [
    (None, 1, ["11"]),   # the ledger's last job
    ("11", 2, ["12"]),
    ("99", 0, ["11", "12"]),
])
def test_one_job_of_several(job, runs, others) -> None:
    records = [start(1, 0, job="11"), start(2, 5, job="11"), start(1, 20, job="12")]
    story = story_of(records, job)
    assert len(story.runs) == runs and story.other_jobs == others


def test_records_not_understood_are_counted_and_passed_over() -> None:
    story = story_of([{"event": "tea"}, {"no": "event"}, *night()])
    assert story.passed_over == 2 and len(story.runs) == 3


@pytest.mark.parametrize("fmt, refused", [(1, False), (2, True), ("2", False), (None, False)])
def test_a_newer_format_is_refused(fmt, refused) -> None:
    record = {**start(1, 0), "format": fmt}
    if refused:
        with pytest.raises(NewerLedger, match="format 2; this release of mpi_resolver reads "
                                              "format 1 and older: upgrade it"):
            story_of([record])
    else:
        assert len(story_of([record]).runs) == 1


def test_a_first_release_record_reads() -> None:
    """Release 39's run_end had no came, warning, reached: it reads, they take defaults."""
    old = {k: v for k, v in end(1, 10).items()
           if k not in ("came", "warning", "reached", "reached_at", "format")}
    story = story_of([start(1, 0), old])
    assert story.runs[0].ended is not None and story.runs[0].ended.came == "nothing"


def _ended(cause: str, what: str = "x", status: int = 1, came: str = "nothing") -> RunEnded:
    return RunEnded("1", 1, cause, what, None, False, status, None, None, "advanced",
                    "restart", came=came, warning="USR2")


@pytest.mark.parametrize("ended, short", [
    (None, "?"),
    (_ended("saved, to run again", came="the warning signal"), "USR2"),
    (_ended("saved, to run again"), "USR2"),
    (_ended("killed by the warning signal", "task 0: signal 12", 140,
            came="the warning signal"), "USR2"),
    (_ended("ended by SIGTERM", came="SIGTERM at the time limit"), "time limit"),
    (_ended("ended by SIGTERM", came="SIGTERM (Slurm ends the job)"), "SIGTERM"),
    (_ended("completed", came="SIGHUP or SIGINT"), "SIGHUP"),
    (_ended("killed by a signal", "task 1 on node2: Killed (signal 9)", 137), "SIGKILL"),
    (_ended("killed by a signal", "python exited 143 (128 + SIGTERM)", 143), "SIGTERM"),
    (_ended("killed by a signal", "srun exited 138", 138), "SIGUSR1"),
    (_ended("killed by a signal", "srun exited 129", 129), "SIGHUP"),
    (_ended("killed by a signal", "srun exited 128", 128), "killed by a signal"),
    (_ended("killed by a signal", "task 0: Killed (signal 99)", 1), "killed by a signal"),
    (_ended("killed by the warning signal", "task 0: signal 10", 138), "SIGUSR1"),
    (_ended("a non-zero exit", "srun exited 3", 3), "exit 3"),
    (_ended("a hang"), "a hang"),
    (_ended("out of memory"), "out of memory"),
])
def test_short_causes(ended, short) -> None:
    assert short_cause(ended) == short


def test_a_run_read_whole() -> None:
    """Every field of a run as its records give it."""
    from mpi_resolver.long_jobs.story import Run, Save

    first = story_of(night()).runs[0]
    assert first == Run("123", 0, T, end=T + 41, nodes="node[1-2]", trained_from=T + 8,
                        resumed=0, reached=237, reached_at=T + 36,
                        saves=[Save(T + 20, 100, 0.2, "periodic"),
                               Save(T + 32, 200, 0.2, "periodic")],
                        ended=first.ended, completed=False, last=T + 41, plan=600)
    assert first.ended is not None and first.ended.cause == "killed by a signal"


@pytest.mark.parametrize("record, field, value", [
    ({**restore(3, 0), "step": "7"}, "resumed", 0),          # not a step: from 0
    ({**restore(3, 0), "plan": "600"}, "plan", None),        # not a number of steps
    ({**restore(3, 0), "time": None}, "trained_from", 0.0),  # no time
    ({**restore(3, 0), "time": True}, "trained_from", 0.0),  # a bool is no time
    ({**restore(3, 0), "requeues": "2"}, "requeues", 0),
    ({**restore(3, 0), "requeues": 2}, "requeues", 2),
    ({**restore(3, 0), "job": "9"}, "job", "9"),
    ({**restore(3, 0), "nodes": "n[1-4]"}, "nodes", "n[1-4]"),
    (restore(3, 5), "reached_at", T + 3),
])
def test_a_restore_alone(record, field, value) -> None:
    run = story_of([record], record.get("job")).runs[0]
    assert getattr(run, field) == value


def test_the_restore_s_nodes_where_supervise_gave_none() -> None:
    story = story_of([{**start(1, 0), "nodes": None}, restore(1, 0)])
    assert story.runs[0].nodes == "node[1-2]"
    story = story_of([{**start(1, 0), "nodes": "a"}, {**restore(1, 0), "nodes": "b"}])
    assert story.runs[0].nodes == "a"


@pytest.mark.parametrize("fields, kind, seconds", [
    ({}, "periodic", 0.5),
    ({"kind": None, "seconds": None}, "periodic", 0.0),
    ({"kind": "signal", "seconds": True}, "signal", 0.0),
    ({"kind": "final", "seconds": 2}, "final", 2.0),
])
def test_a_save_s_kind_and_seconds(fields, kind, seconds) -> None:
    s = story_of([{**save(5, 10), **fields}]).runs[0].saves[0]
    assert (s.kind, s.seconds, s.time, s.step, s.ok) == (kind, seconds, T + 5, 10, True)


@pytest.mark.parametrize("fields, found", [
    ({}, Slow(1, "node2", 0.29, 0.2, 3, 5)),
    ({"node": None, "rounds": None, "window": "5"}, Slow(1, None, 0.29, 0.2, 0, 0)),
    ({"node": 7, "seconds": 1, "rounds": 4}, Slow(1, None, 1.0, 0.2, 4, 5)),
    ({"rank": "1"}, None),      # no rank
    ({"seconds": None}, None),  # no time
    ({"peers": 0}, None),       # no ratio
    ({"peers": True}, None),
])
def test_a_slow_rank_s_record(fields, found) -> None:
    run = story_of([restore(0, 0), {**slow(5), **fields}]).runs[0]
    assert run.slow == ([] if found is None else [found])
    assert run.last == T + 5


def test_the_completion_s_step_and_time() -> None:
    run = story_of([restore(0, 0), save(5, 10), completed(8, 12)]).runs[0]
    assert (run.reached, run.reached_at, run.completed, run.last) == (12, T + 8, True, T + 8)


def test_a_run_start_s_step_is_reached_and_a_completed_end_completes() -> None:
    run = story_of([start(1, 0, step=40), end(1, 10, cause="completed", status=0,
                                              action="end")]).runs[0]
    assert (run.reached, run.reached_at, run.completed) == (40, None, True)
    run = story_of([start(1, 0, step=40), end(1, 10)]).runs[0]
    assert run.completed is False


def test_a_record_after_a_run_s_end_opens_another() -> None:
    story = story_of([start(1, 0), end(1, 10), save(12, 5)])
    assert len(story.runs) == 2 and story.runs[1].start == T + 12


def test_a_run_end_not_understood_still_ends_the_run() -> None:
    broken = {k: v for k, v in end(1, 50).items() if k != "cause"}
    story = story_of([broken, save(60, 5)])
    assert [(r.start, r.ended) for r in story.runs] == [(T + 50, None), (T + 60, None)]


@pytest.mark.parametrize("what, status, name", [
    ("python exited 1 (128 + SIGTERM)", 1, "SIGTERM"),   # the words win over the status
    ("task 1: Killed (signal 9)", 1, "SIGKILL"),
    ("srun exited 100", 100, None),
    ("srun exited 128", 128, None),
    ("srun exited 137", 137, "SIGKILL"),
])
def test_signal_names(what, status, name) -> None:
    from mpi_resolver.long_jobs.story import _signal_name

    assert _signal_name(what, status) == name


def test_a_run_with_its_start_alone_lasts_nothing() -> None:
    run = story_of([start(1, 5)]).runs[0]
    assert (run.start, run.until) == (T + 5, T + 5)
