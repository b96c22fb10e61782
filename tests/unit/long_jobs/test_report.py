"""long_jobs.report: each run's time split and steps lost, the job's totals, the ETTR, the
JSON's keys and the job's end line, on a night of three runs and on edge cases."""

from __future__ import annotations

import pytest

from mpi_resolver.long_jobs.report import as_json, end_line, figures, totals
from mpi_resolver.long_jobs.story import story_of
from tests.unit.long_jobs.ledger_records import (completed, end, night, restore, save, slow,
                                                 start)

pytestmark = pytest.mark.unit


def test_a_nights_runs() -> None:
    each = figures(story_of(night()))
    assert [(f.run, f.steps_from, f.steps_to, f.trained, f.lost) for f in each] == [
        (1, 0, 237, 237, 37), (2, 200, 390, 190, 0), (3, 390, 600, 210, 0)]
    assert [f.then for f in each] == ["restart", "requeue", "end"]
    assert [f.cause for f in each] == ["SIGKILL", "USR1", "completed"]
    assert [f.node for f in each] == ["node2", None, None]
    first = each[0]
    # 41 s: 8 starting, 28 s from the restore to step 237 (0.4 saving), 5 stopping
    assert first.seconds == 41 and first.starting == 8 and first.stopping == 5
    assert first.saving == pytest.approx(0.4)
    assert first.redone == pytest.approx(27.6 * 37 / 237)
    assert first.training + first.redone + first.saving == pytest.approx(28)
    assert (first.saves, first.failed_saves) == (2, 0)


def test_a_nights_totals_and_ettr() -> None:
    t = totals(story_of(night()))
    assert (t.runs, t.restarts, t.requeues, t.saves) == (3, 1, 1, 4)
    assert (t.steps_done, t.steps_trained, t.steps_lost, t.completed) == (600, 637, 37, True)
    assert t.wall == 163 and t.waiting == pytest.approx(163 - 41 - 29 - 33)
    assert t.starting == 8 + 8 + 7
    parts = t.starting + t.training + t.saving + t.redone + t.stopping + t.waiting
    assert parts == pytest.approx(t.wall)
    assert t.ettr == pytest.approx(t.training / 163)


def test_the_json_has_the_documented_keys() -> None:
    out = as_json(story_of(night()), "/ck")
    assert {"runs", "restarts", "requeues", "steps_done", "steps_lost", "ettr",
            "seconds"} <= set(out)
    assert isinstance(out["runs"], list) and len(out["runs"]) == 3
    assert out["runs"][0]["lost"] == 37 and out["steps_lost"] == 37
    assert out["runs"][0]["redone"] == round(27.6 * 37 / 237, 3)
    assert out["runs"][0]["steps_to"] == 237 and out["runs"][0]["node"] == "node2"
    assert set(out["seconds"]) == {"wall", "starting", "training", "saving", "redone",
                                   "stopping", "waiting"}
    assert out["directory"] == "/ck" and out["job"] == "123"
    assert out["ettr"] == round(totals(story_of(night())).ettr, 4)


def test_the_end_line() -> None:
    assert end_line(story_of(night())) == (
        "job 123: 3 runs, 1 restart (SIGKILL on node2), 1 requeue (USR1), 37 steps lost, "
        f"ETTR {totals(story_of(night())).ettr:.2f}")


def test_an_empty_story() -> None:
    story = story_of([])
    t = totals(story)
    assert (t.runs, t.wall, t.ettr, t.steps_done, t.completed) == (0, 0.0, None, None, False)
    assert end_line(story) == ("job (no Slurm job): 0 runs, 0 restarts, 0 requeues, 0 steps "
                               "lost, ETTR ?")
    assert as_json(story, "d")["ettr"] is None


def test_without_supervise_a_requeue_is_the_next_runs_higher_count() -> None:
    records = [restore(0, 0), save(10, 50), restore(60, 50, requeues=1), save(70, 80),
               restore(100, 80, requeues=1), completed(110, 90)]
    t = totals(story_of(records))
    assert (t.runs, t.requeues, t.restarts, t.steps_lost) == (3, 1, 0, 0)


@pytest.mark.parametrize("requeues_after, then, line", [
    (1, "requeue", "2 runs, 0 restarts, 1 requeue (SIGTERM), 0 steps lost"),  # scontrol's
    (0, "end", "2 runs, 0 restarts, 0 requeues, 0 steps lost"),
])
def test_a_job_slurm_requeued_is_a_requeue_though_supervise_saw_it_end(
        requeues_after, then, line) -> None:
    """`scontrol requeue`: SIGTERM came to supervise, which ended the run (exit 143), and
    Slurm started the job again (the next run's requeue count is higher)."""
    records = [start(1, 0), restore(5, 0), save(20, 60, "signal"),
               end(1, 21, cause="ended by SIGTERM", status=143, what="srun exited 143",
                   node=None, blamed=False, action="end", came="SIGTERM (Slurm ends the job)",
                   reached=60, reached_at=20, after=60),
               start(2, 30, 60, requeues=requeues_after),
               restore(35, 60, requeues=requeues_after), completed(50, 600)]
    story = story_of(records)
    assert [f.then for f in figures(story)] == [then, None]  # run 2: no end record
    assert totals(story).requeues == requeues_after
    assert line in end_line(story)


def test_a_requeue_supervise_asked_for_counts_before_the_next_run() -> None:
    """The job waits in the queue: no run after the one supervise requeued."""
    records = night()[:9]  # runs 1 and 2, to run 2's end (requeued)
    story = story_of(records)
    assert [f.then for f in figures(story)] == ["restart", "requeue"]
    assert totals(story).requeues == 1
    assert "1 requeue (USR1)" in end_line(story)


def test_a_run_that_never_trained_is_all_starting() -> None:
    f = figures(story_of([start(1, 0), end(1, 30, cause="a hang", status=124)]))[0]
    assert (f.starting, f.training, f.stopping, f.trained) == (30, 0, 0, 0)


def test_steps_lost_never_more_than_trained() -> None:
    """A next run that resumed from before this run's start (an older checkpoint kept)."""
    records = [start(1, 0), restore(1, 100), end(1, 10, reached=120, reached_at=9),
               start(2, 11), restore(12, 50)]
    each = figures(story_of(records))
    assert each[0].lost == 20 and each[0].trained == 20


def test_a_restart_blamed_nowhere_names_no_node() -> None:
    records = [start(1, 0), restore(1, 0),
               end(1, 10, cause="a non-zero exit", status=3, what="srun exited 3",
                   node="node1", blamed=False),
               start(2, 11), restore(12, 0), end(2, 20, cause="completed", status=0,
                                                action="end", node=None, blamed=False)]
    assert "1 restart (exit 3)," in end_line(story_of(records))


@pytest.mark.parametrize("n, words", [(1, "1 run, 1 restart (SIGKILL on node2)"),
                                      (2, "2 runs, 2 restarts (SIGKILL on node2, SIGKILL on")])
def test_plural(n, words) -> None:
    records = [r for i in range(n) for r in (start(i + 1, i * 10), end(i + 1, i * 10 + 5))]
    assert end_line(story_of(records)).startswith(f"job 123: {words}")


def test_a_run_s_figures_whole() -> None:
    from mpi_resolver.long_jobs.report import RunFigures
    from tests.unit.long_jobs.ledger_records import T

    third = figures(story_of(night()))[2]
    assert third == RunFigures(
        3, "123", 1, T + 130, 33.0, 390, 600, 210, 0, 1, 0, 7.0, pytest.approx(23.75), 0.25,
        0.0, 2.0, "completed", "srun exited 0", None, "end", True, ())


def test_slow_ranks_in_their_run_and_counted() -> None:
    from mpi_resolver.long_jobs.stragglers import Slow

    records = night()
    records.insert(7, slow(60, seconds=0.28571, peers=0.2))  # in run 2
    records.insert(3, slow(25, rank=3, node=None))            # in run 1
    each, t = figures(story_of(records)), totals(story_of(records))
    assert [f.slow_ranks for f in each] == [(Slow(3, None, 0.29, 0.2, 3, 5),),
                                            (Slow(1, "node2", 0.28571, 0.2, 3, 5),), ()]
    assert t.slow_ranks == 2 and totals(story_of(night())).slow_ranks == 0
    out = as_json(story_of(records), "/ck")
    assert out["slow_ranks"] == 2
    assert out["runs"][1]["slow_ranks"] == [{"rank": 1, "node": "node2", "seconds": 0.286,
                                             "peers": 0.2, "rounds": 3, "window": 5}]


def test_a_reach_without_a_restore_trains_nothing() -> None:
    """supervise's record alone (no worker 0's restore): the run's time is all starting."""
    f = figures(story_of([start(1, 0), end(1, 10, reached=5, reached_at=3)]))[0]
    assert (f.starting, f.training, f.saving, f.stopping, f.trained) == (10, 0, 0, 0, 5)


def test_clocks_out_of_step_give_no_negative_time() -> None:
    """worker 0's clock behind supervise's: its restore before the run's start, its last
    step after the run's end."""
    records = [start(1, 10), restore(5, 0), end(1, 20, reached=50, reached_at=25)]
    f = figures(story_of(records))[0]
    assert (f.seconds, f.starting) == (10, 0)
    assert f.training == 15 and f.stopping == 0  # the span ends at the run's end
    records = [start(1, 10), restore(30, 0), end(1, 20, reached=50, reached_at=31)]
    f = figures(story_of(records))[0]
    assert (f.starting, f.training, f.stopping) == (20, 0, 0)


def test_a_next_run_without_a_restore_loses_nothing_known() -> None:
    each = figures(story_of([start(1, 0), restore(1, 0), end(1, 10, reached=50, reached_at=9),
                             start(2, 11), end(2, 20)]))
    assert each[0].lost == 0


def test_overlapping_runs_wait_nothing() -> None:
    t = totals(story_of([start(1, 0), end(1, 20, seconds=20), start(2, 10), end(2, 30)]))
    assert t.wall == 30 and t.waiting == 0


@pytest.mark.parametrize("records, ettr", [
    ([restore(0, 0), save(0.5, 10, seconds=0.1)], pytest.approx(0.4 / 0.5)),
    ([restore(0, 0)], None),                          # no time passed
    ([start(1, 0), end(1, 10)], None),                # no training seen
])
def test_the_ettr_where_known(records, ettr) -> None:
    assert totals(story_of(records)).ettr == ettr


def test_the_json_rounds_and_names_the_rest() -> None:
    records = [start(1, 0), restore(1 / 3, 0), save(2 / 3, 10, seconds=1 / 9), {"event": "x"}]
    out = as_json(story_of([start(1, 0, job="7"), *records]), "/ck")
    assert out["seconds"]["starting"] == 0.333 and out["runs"][0]["saving"] == 0.111
    assert out["other_jobs"] == ["7"] and out["records_passed_over"] == 1


def test_the_end_line_without_supervise_names_no_cause() -> None:
    records = [restore(0, 0), save(10, 50), restore(60, 50, requeues=1), completed(70, 90)]
    assert "1 requeue (?)" in end_line(story_of(records))
