"""long_jobs.interval: --checkpoint-every's forms and errors, --keep, Young's interval, the
overhead, the job's failure rate, and a duration in steps."""

from __future__ import annotations

import math

import pytest

from mpi_resolver.core.errors import FormatError
from mpi_resolver.long_jobs.interval import (DEFAULT_KEEP, DEFAULT_NODE_MTBF_HOURS, Every,
                                              job_mtbf, overhead, parse_every, parse_keep,
                                              steps_for, young_interval)

pytestmark = pytest.mark.unit

FORMS = ("a number of steps (e.g. 100), a duration ('90s', '10m', '2h', '1h30m'), or 'auto' "
         "(Young's interval from the measured save time and the job's failure rate)")


@pytest.mark.parametrize("text, expected", [
    (None, None),
    ("1", Every(steps=1)),
    ("100", Every(steps=100)),
    (250, Every(steps=250)),
    (" 7 ", Every(steps=7)),
    ("90s", Every(seconds=90.0)),
    ("10m", Every(seconds=600.0)),
    ("2h", Every(seconds=7200.0)),
    ("1h30m", Every(seconds=5400.0)),
    ("1.5h", Every(seconds=5400.0)),
    ("0.5s", Every(seconds=0.5)),
    ("2H", Every(seconds=7200.0)),
    ("auto", Every(auto=True)),
    ("AUTO", Every(auto=True)),
])
def test_the_forms(text, expected):
    assert parse_every(text) == expected


@pytest.mark.parametrize("text, why", [
    ("0", "at least 1 step; "),
    (0, "at least 1 step; "),
    ("0s", "a duration longer than 0; "),
    ("0m0s", "a duration longer than 0; "),
    ("-5", ""),
    (-5, ""),
    ("10x", ""),
    ("10 m", ""),
    ("m", ""),
    ("", ""),
    ("1h 30m", ""),
    ("s10", ""),
    ("١٢", ""),
    (1.5, ""),
    (True, ""),
])
def test_bad_forms_name_the_argument_and_the_accepted_forms(text, why):
    with pytest.raises(FormatError) as e:
        parse_every(text, "--checkpoint-every")
    assert str(e.value) == f"--checkpoint-every={text!r}: {why}expected {FORMS}."


@pytest.mark.parametrize("every, said", [(Every(steps=100), "100 steps"),
                                         (Every(seconds=600.0), "600 s"),
                                         (Every(seconds=0.5), "0.5 s"),
                                         (Every(auto=True), "auto")])
def test_describe(every, said):
    assert every.describe() == said


@pytest.mark.parametrize("value, kept", [(1, 1), ("2", 2), (DEFAULT_KEEP, 2), (" 5 ", 5)])
def test_keep(value, kept):
    assert parse_keep(value) == kept


@pytest.mark.parametrize("value", [0, "0", -1, "-1", "two", 1.0, True, None, ""])
def test_a_keep_below_1_or_not_whole_is_refused(value):
    with pytest.raises(FormatError) as e:
        parse_keep(value, "--keep")
    assert str(e.value) == (
        f"--keep={value!r}: expected a whole number of checkpoints to keep, at least 1 "
        "(default 2: a torn newest one still leaves one to resume from).")


@pytest.mark.parametrize("nodes, hours, seconds", [
    (1, 6000.0, 6000 * 3600.0),
    (2, 6000.0, 3000 * 3600.0),
    (4, 100.0, 25 * 3600.0),
    (0, 10.0, 36000.0),  # no node known: one
])
def test_the_job_s_mtbf_is_a_node_s_over_its_nodes(nodes, hours, seconds):
    assert job_mtbf(nodes, hours) == seconds


def test_the_default_node_mtbf_is_llama_3_s_rounded_down():
    assert DEFAULT_NODE_MTBF_HOURS == 6000.0 <= 54 * 24 * 2048 / 419 < 6400


@pytest.mark.parametrize("hours", [0, -1.0, 0.0, math.inf, math.nan, "5", True, None])
def test_a_bad_node_mtbf_is_refused(hours):
    with pytest.raises(FormatError, match=r"node_mtbf_hours=.*a number > 0 \(default 6000\)"):
        job_mtbf(2, hours)


@pytest.mark.parametrize("c, m, t", [(0.5, 3600.0, 60.0), (2.0, 10000.0, 200.0),
                                     (0.0, 100.0, 0.0), (-1.0, 100.0, 0.0)])
def test_young(c, m, t):
    assert young_interval(c, m) == pytest.approx(t)


@pytest.mark.parametrize("c, t, m, fraction", [
    (1.0, 100.0, 10000.0, 0.01 + 0.005),
    (0.0, 100.0, 10000.0, 0.005),
    (1.0, 0.0, 10000.0, 0.0),
    (1.0, -1.0, 10000.0, 0.0),
])
def test_overhead(c, t, m, fraction):
    assert overhead(c, t, m) == pytest.approx(fraction)


def test_young_s_interval_is_where_the_overhead_is_least():
    c, m = 0.3, 3000 * 3600.0
    best = young_interval(c, m)
    assert overhead(c, best, m) < overhead(c, best * 0.9, m)
    assert overhead(c, best, m) < overhead(c, best * 1.1, m)


@pytest.mark.parametrize("seconds, step, steps", [
    (10.0, 1.0, 10), (10.0, 3.0, 3), (10.0, 4.0, 2), (1.0, 5.0, 1), (0.0, 1.0, 1),
    (10.0, 0.0, 1), (10.0, -1.0, 1), (10.4, 1.0, 10), (10.6, 1.0, 11),
])
def test_steps_for(seconds, step, steps):
    assert steps_for(seconds, step) == steps


def test_the_default_argument_names_are_the_keywords():
    with pytest.raises(FormatError, match=r"^checkpoint_every='0': "):
        parse_every("0")
    with pytest.raises(FormatError, match=r"^keep=0: "):
        parse_keep(0)


@pytest.mark.parametrize("hours", [0.5, 1.0, 1e-3])
def test_a_node_mtbf_below_an_hour_is_still_a_rate(hours):
    assert job_mtbf(1, hours) == hours * 3600.0


def test_an_interval_under_a_second_still_costs_its_saves():
    assert overhead(0.1, 0.5, 1000.0) == pytest.approx(0.2 + 0.00025)
