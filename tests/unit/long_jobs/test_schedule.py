"""long_jobs.schedule: at which steps every worker saves: a step count on its own, a duration
and 'auto' by the chief's clock, shared with the others; the chief's line."""

from __future__ import annotations

from typing import Dict, List, Optional

import pytest

from mpi_resolver.long_jobs.interval import Every
from mpi_resolver.long_jobs.schedule import WARMUP_STEPS, Plan, Schedule, shown

pytestmark = pytest.mark.unit

HOURS = 3600.0


class Clock:
    """A clock the test moves."""

    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


class Board:
    """Stands for the coordination service: the chief's values by index; what each asked."""

    def __init__(self, told: Optional[Dict[int, int]] = None) -> None:
        self.values: Dict[int, int] = dict(told or {})
        self.asked: List[tuple] = []

    def __call__(self, index: int, value: Optional[int]) -> int:
        self.asked.append((index, value))
        if value is not None:
            self.values[index] = value
        return self.values[index]


def schedule(every, start=0, *, chief=True, board=None, clock=None, nodes=2, mtbf=6000.0):
    return Schedule(every, start, chief=chief, agree=board or Board(), nodes=nodes,
                    node_mtbf_hours=mtbf, clock=clock or Clock())


def due_steps(s: Schedule, last: int, clock: Optional[Clock] = None, step_time: float = 1.0,
              save_time: float = 0.0) -> List[int]:
    """Runs steps start+1..last, each ``step_time`` on ``clock``; returns where it saved."""
    saved = []
    for step in range(s.start + 1, last + 1):
        if clock is not None:
            clock.now += step_time
        if s.due(step):
            saved.append(step)
            if clock is not None:
                clock.now += save_time
            s.saved(step, save_time)
    return saved


@pytest.mark.parametrize("every, start, last, saves", [
    (1, 0, 3, [1, 2, 3]),
    (10, 0, 35, [10, 20, 30]),
    (10, 20, 35, [30]),  # a resumed run: not at its first step again
    (10, 19, 35, [20, 30]),
    (10, 0, 9, []),
])
def test_a_step_count_needs_no_clock_and_no_word(every, start, last, saves):
    board = Board()
    s = schedule(Every(steps=every), start, board=board)
    assert due_steps(s, last) == saves
    assert board.asked == []


@pytest.mark.parametrize("step, due", [(20, False), (30, True)])
def test_the_step_a_run_resumed_from_is_not_saved_again(step: int, due: bool) -> None:
    """A script that tells step_done the restored step itself (before its first step)."""
    assert schedule(Every(steps=10), 20, board=Board()).due(step) is due


def test_a_duration_is_turned_into_steps_by_the_chief_after_the_warmup():
    clock, board = Clock(), Board()
    s = schedule(Every(seconds=30.0), clock=clock, board=board)
    saves = due_steps(s, 100, clock, step_time=1.0)
    # Warm-up: 10 steps (10 s of the 30 s); then 20 steps more; then every 30 steps.
    assert saves == [30, 60, 90]
    assert [a[0] for a in board.asked] == [0, 1, 2, 3]
    assert s.plans[0] == Plan(30.0, 20, 1.0, None, 3000 * HOURS)


def test_the_other_workers_take_the_chief_s_steps():
    board = Board({0: 17, 1: 40, 2: 99})
    s = schedule(Every(seconds=30.0), chief=False, board=board)
    assert due_steps(s, 45) == [17, 40]
    assert board.asked == [(0, None), (1, None), (2, None)]
    assert s.plans == []  # only the chief plans


def test_the_save_s_time_is_not_a_step_s():
    clock = Clock()
    s = schedule(Every(seconds=20.0), clock=clock)
    due_steps(s, 60, clock, step_time=1.0, save_time=50.0)
    assert len(s.plans) > 1 and {p.step_seconds for p in s.plans} == {1.0}


def test_auto_saves_once_after_the_warmup_to_time_the_save_then_goes_by_young():
    clock = Clock()
    s = schedule(Every(auto=True), clock=clock, nodes=2, mtbf=6000.0)
    saves = due_steps(s, WARMUP_STEPS + 2, clock, step_time=2.0, save_time=0.6)
    assert saves == [WARMUP_STEPS]
    plan = s.plans[0]
    assert plan.save_seconds == 0.6 and plan.seconds == pytest.approx((2 * 0.6 * 3000 *
                                                                      HOURS) ** 0.5)
    assert plan.steps == round(plan.seconds / 2.0)
    assert plan.line(s.every) == (
        f"periodic checkpoints (auto): every {plan.seconds:.0f} s = {plan.steps} steps of "
        "2.000 s (Young: sqrt(2 x C 0.60 s x M 3000 h)); expected overhead "
        f"{(0.6 / plan.seconds + plan.seconds / (2 * 3000 * HOURS)) * 100:.2f} % (saves and "
        "work redone after a failure)")


@pytest.mark.parametrize("stall, write, seconds", [
    # Young's interval of the stall: sqrt(2 x 0.004 x 3000 h) = 293.9 s
    (0.004, 0.15, (2 * 0.004 * 3000 * HOURS) ** 0.5),
    (0.004, 300.0, 300.0),  # never below the write: the next save would wait for it
    (0.004, (2 * 0.004 * 3000 * HOURS) ** 0.5, (2 * 0.004 * 3000 * HOURS) ** 0.5),
    (0.004, None, (2 * 0.004 * 3000 * HOURS) ** 0.5),  # no write finished yet
])
def test_auto_goes_by_the_stall_and_never_below_the_write(stall: float,
                                                          write: Optional[float],
                                                          seconds: float) -> None:
    clock = Clock()
    s = schedule(Every(auto=True), clock=clock, nodes=2, mtbf=6000.0)
    for step in range(1, WARMUP_STEPS + 1):
        clock.now += 2.0
        if s.due(step):
            clock.now += stall
            s.saved(step, stall, write)
    plan = s.plans[0]
    assert (plan.save_seconds, plan.write_seconds) == (stall, write)
    assert plan.seconds == pytest.approx(seconds)
    young = f"{(2 * 0.004 * 3000 * HOURS) ** 0.5:.0f}"
    line = plan.line(s.every)
    if write is None:
        assert "(Young: sqrt(2 x C 0.00 s x M 3000 h));" in line, line
    else:
        assert line.startswith(f"periodic checkpoints (auto): every {seconds:.0f} s = "), line
        assert (f"(Young: sqrt(2 x C 0.004 s x M 3000 h), C the training's stall; not below "
                f"the write in the background, {write:.2f} s); expected overhead") in line, line
        assert young == "294"


def test_a_write_s_time_is_kept_until_a_newer_one_comes() -> None:
    s = schedule(Every(auto=True))
    s.saved(5, 0.01, 2.0)
    s.saved(6, 0.01)
    assert s.write_seconds == 2.0
    s.saved(7, 0.01, 0.5)
    assert s.write_seconds == 0.5


def test_a_duration_is_not_stretched_to_the_write() -> None:
    clock = Clock()
    s = schedule(Every(seconds=30.0), clock=clock)
    s.saved(3, 0.01, 100.0)
    due_steps(s, 11, clock)
    assert s.plans[0].seconds == 30.0


def test_a_duration_s_line_has_no_young():
    clock = Clock()
    s = schedule(Every(seconds=30.0), clock=clock)
    due_steps(s, 11, clock)
    assert s.plans[0].line(s.every) == (
        "periodic checkpoints (30 s): every 30 s = 20 steps of 1.000 s; expected overhead "
        "0.00 % (saves and work redone after a failure)")


def test_a_resumed_run_warms_up_from_its_own_start():
    clock = Clock()
    s = schedule(Every(auto=True), start=500, clock=clock)
    assert due_steps(s, 500 + WARMUP_STEPS, clock) == [500 + WARMUP_STEPS]


def test_a_duration_already_spent_in_the_warmup_saves_one_step_after():
    clock = Clock()
    s = schedule(Every(seconds=5.0), clock=clock)
    assert due_steps(s, WARMUP_STEPS + 1, clock, step_time=1.0) == [WARMUP_STEPS + 1]


def test_only_the_step_the_chief_chose_is_due():
    s = schedule(Every(seconds=30.0), chief=False, board=Board({0: 15}))
    assert [s.due(n) for n in range(1, 17)] == [False] * 14 + [True, False]


def test_a_save_of_another_step_does_not_move_the_next():
    """The signal's save (not the schedule's) does not reschedule."""
    board = Board({0: 15, 1: 30})
    s = schedule(Every(seconds=30.0), chief=False, board=board)
    due_steps(s, 12)
    s.saved(12, 0.1)
    assert len(board.asked) == 1 and s.save_seconds == 0.1


def test_the_first_step_is_not_a_step_s_time():
    """Step 1 traces the graph (10 s here), step 2 is slower (2 s): the time is measured from
    the end of step 1, over the steps after it."""
    clock = Clock()
    s = schedule(Every(seconds=100.0), clock=clock)
    for step in range(1, WARMUP_STEPS + 1):
        clock.now += {1: 10.0, 2: 2.0}.get(step, 1.0)
        s.due(step)
    assert s.plans[0].step_seconds == pytest.approx(10.0 / 9)


@pytest.mark.parametrize("step_time, steps", [(0.25, 2), (0.1, 20)])
def test_steps_faster_than_a_second_are_timed_as_they_are(step_time, steps):
    """3 s: the warm-up's 10 steps took 2.5 s (then 0.5 s is 2 steps more), or 1 s (then
    2 s is 20 steps more)."""
    clock = Clock()
    s = schedule(Every(seconds=3.0), clock=clock)
    due_steps(s, WARMUP_STEPS + 1, clock, step_time=step_time)
    assert s.plans[0].step_seconds == pytest.approx(step_time)
    assert s.plans[0].steps == steps


def test_an_interval_spent_in_the_warmup_with_fast_steps_saves_at_the_next_step():
    clock = Clock()
    s = schedule(Every(seconds=1.0), clock=clock)
    assert due_steps(s, WARMUP_STEPS + 1, clock, step_time=0.25) == [WARMUP_STEPS + 1]


def test_an_interval_of_one_step_times_that_step():
    """From the third decision on, each comes one step after the save that set its mark: one
    step of 1 s."""
    clock = Clock()
    s = schedule(Every(seconds=0.5), clock=clock)
    due_steps(s, WARMUP_STEPS + 3, clock, step_time=1.0)
    assert [p.steps for p in s.plans] == [1, 1, 1, 1]
    assert [p.step_seconds for p in s.plans] == [1.0, 1.0, 1.0, 1.0]


def test_auto_with_a_save_that_took_no_time_saves_every_step():
    clock = Clock()
    s = schedule(Every(auto=True), clock=clock)
    due_steps(s, WARMUP_STEPS + 1, clock, step_time=1.0, save_time=0.0)
    assert s.plans[0].seconds == 0.0 and s.plans[0].steps == 1


def test_the_node_mtbf_given_is_the_one_used():
    s = schedule(Every(auto=True), nodes=4, mtbf=1000.0)
    assert s.mtbf == 250 * HOURS


@pytest.mark.parametrize("env, hosts, nodes", [
    ({}, 0, 1),
    ({"SLURM_JOB_NUM_NODES": "4"}, 0, 4),
    ({"SLURM_JOB_NUM_NODES": "4"}, 2, 2),
    ({"SLURM_JOB_NUM_NODES": "x"}, 0, 1),
    ({}, 3, 3),
    ({"SLURM_JOB_NUM_NODES": "0"}, 0, 1),
    ({"SLURM_JOB_NUM_NODES": "4"}, 1, 1),
    ({"SLURM_JOB_NUM_NODES": "4"}, None, 4),
])
def test_job_nodes(env: dict, hosts: object, nodes: int) -> None:
    from mpi_resolver.long_jobs.schedule import job_nodes

    assert (job_nodes(env) if hosts is None else job_nodes(env, hosts)) == nodes


@pytest.mark.parametrize("index, value, told, sent", [
    (0, None, "40", ""),
    (3, 25, "25", "25"),
])
def test_plan_agreement_asks_for_the_chiefs_step(index, value, told, sent) -> None:
    from mpi_resolver.long_jobs.schedule import plan_agreement

    calls = []

    class Meeting:
        def agree(self, key: str, given: str, what: str) -> str:
            calls.append((key, given, what))
            return told

    assert plan_agreement(Meeting(), "mpi_resolver_7")(index, value) == int(told)
    assert calls == [(f"mpi_resolver_7_plan_{index}", sent,
                      "the step of the next periodic checkpoint")]


def _saves(s: Schedule, last: int, clock: Clock, failing_from: int, step_time: float = 1.0,
           save_time: float = 0.2) -> List[int]:
    """Runs steps to ``last``; the saves from step ``failing_from`` on fail at once
    (read-only: 1 ms); returns where it tried to save."""
    tried = []
    for step in range(s.start + 1, last + 1):
        clock.now += step_time
        if s.due(step):
            tried.append(step)
            if step >= failing_from:
                clock.now += 0.001
                s.failed(step, 0.001)
            else:
                clock.now += save_time
                s.saved(step, save_time)
    return tried


def test_a_failing_save_is_no_save_storm() -> None:
    """Reproduced before: a periodic save that failed handed 0.0 s to Young's rule, and 'auto'
    then saved at every step (10, 6583, 6584, 6585, ...)."""
    clock = Clock()
    s = schedule(Every(auto=True), clock=clock)
    tried = _saves(s, 20000, clock, failing_from=WARMUP_STEPS + 1)
    assert tried[0] == WARMUP_STEPS
    gaps = [b - a for a, b in zip(tried[1:], tried[2:], strict=False)]
    assert len(tried) < 10, tried
    assert all(b >= 2 * a - 1 for a, b in zip(gaps, gaps[1:], strict=False)), tried
    assert s.save_seconds == 0.2  # the measured save, not the failure's millisecond


def test_a_first_save_that_fails_backs_off() -> None:
    """Young's interval for a 1-ms save on 2 nodes of 6,000 h is 147 s: 294, 588, 1,176 and
    2,352 steps of 1 s after each failure in a row."""
    clock = Clock()
    s = schedule(Every(auto=True), clock=clock)
    assert _saves(s, 5000, clock, failing_from=0) == [10, 304, 892, 2068, 4420]


@pytest.mark.parametrize("step_time", [1.0, 2.0, 0.5])
def test_the_back_off_is_of_the_warmup_s_steps_at_least(step_time: float) -> None:
    """Where Young's interval is shorter than the warm-up (a tiny failure rate's), a failing
    save still waits 2, 4, 8 x the warm-up's 10 steps, however long a step takes."""
    clock = Clock()
    s = schedule(Every(auto=True), clock=clock, mtbf=1e-6)
    assert _saves(s, 200, clock, failing_from=0, step_time=step_time)[:4] == [10, 30, 70, 150]


def test_a_save_that_works_again_ends_the_back_off() -> None:
    clock = Clock()
    s = schedule(Every(seconds=5.0), clock=clock)
    for step in range(1, 40):
        clock.now += 1.0
        if s.due(step):
            if step < 20:
                s.failed(step, 0.001)
            else:
                s.saved(step, 0.2)
    assert [p.steps for p in s.plans][-1] == 5  # the rule's own interval again
    assert s._failures == 0


def _background_saves(s: Schedule, clock: Clock, whole: List[bool]) -> List[int]:
    """Runs 1-s steps with a save in the background wherever one is due, its write (2 ms
    of the step's, 0.5 s in the background) ending as ``whole`` says in turn and said at
    the next step; returns the saves' steps."""
    tried: List[int] = []
    outcome: Optional[bool] = None
    for step in range(s.start + 1, 5000):
        clock.now += 1.0
        if outcome is not None:
            s.written(outcome)
            outcome = None
        if s.due(step):
            tried.append(step)
            s.saved(step, 0.002, 0.5, pending=True)
            if len(tried) > len(whole):
                return tried
            outcome = whole[len(tried) - 1]
    return tried


@pytest.mark.parametrize("whole, gaps", [
    # Young's interval for a 2-ms stall on 2 nodes of 6,000 h: 208 s, 208 steps of 1 s
    ([True] * 4, [208, 208, 208, 208]),
    # the first write's end is said after the second save is planned; then each doubles
    ([False] * 4, [208, 416, 831, 1663]),
    ([False, False, True, False], [208, 416, 831, 208]),  # a whole write ends the back-off
])
def test_a_background_write_that_fails_backs_off_as_a_save_that_fails(
        whole: List[bool], gaps: List[int]) -> None:
    """A save written in the background is no success before its write ends: a directory
    that refuses every write is written at an interval doubled each time."""
    clock = Clock()
    s = schedule(Every(auto=True), clock=clock)
    tried = _background_saves(s, clock, whole)
    assert [b - a for a, b in zip(tried, tried[1:], strict=False)] == gaps


@pytest.mark.parametrize("pending, failures", [(True, 1), (False, 0)])
def test_a_save_ends_the_back_off_once_written(pending: bool, failures: int) -> None:
    s = schedule(Every(auto=True))
    s.written(False)
    s.saved(1, 0.2, pending=pending)
    assert s._failures == failures
    s.written(True)
    assert s._failures == 0


def test_a_step_count_is_not_backed_off() -> None:
    s = schedule(Every(steps=5))
    tried = [step for step in range(1, 21) if s.due(step) and (s.failed(step, 0.0) or True)]
    assert tried == [5, 10, 15, 20]


@pytest.mark.parametrize("value, expected", [
    (3000.0, "3000"),
    (10.0, "10"),  # whole from 10
    (9.5, "9.5"),
    (0.01, "0.01"),  # a test's MTBF of 36 s in hours: not 0 h
    (0.45, "0.45"),  # an interval under a second: not 0 s
    (0.0, "0"),
])
def test_the_plan_s_figures(value: float, expected: str) -> None:
    assert shown(value) == expected
