"""long_jobs.watchdog: the step watchdog's rule, every limit from both sides, and its
settings (arguments, variables, 'off', bad input)."""

from __future__ import annotations

import math

import pytest

from mpi_resolver.core.errors import FormatError, ResolutionError
from mpi_resolver.long_jobs.watchdog import (DEFAULT_FACTOR, DEFAULT_MINIMUM, DEFAULT_START,
                                             DEFAULT_WARMUP, DEFAULT_WINDOW, EXIT_STATUS,
                                             FACTOR_VARIABLE, MINIMUM_VARIABLE, START_VARIABLE,
                                             StepRule, median, parse_factor, parse_minimum,
                                             parse_start, step_rule)

pytestmark = pytest.mark.unit

#: k = 4, T = 3 s, 2 warm-up steps, the median over the last 3 counted steps, S = 30 s
RULE = StepRule(factor=4.0, minimum=3.0, warmup=2, window=3, start=30.0)


@pytest.mark.parametrize("counted, limit", [
    pytest.param([], 30.0, id="no-counted-step-the-start-bound"),
    pytest.param([0.5], 3.0, id="T-above-k-x-median"),
    pytest.param([0.75], 3.0, id="k-x-median-equals-T"),
    pytest.param([1.0], 4.0, id="k-x-median-above-T"),
    pytest.param([1.0, 2.0], 6.0, id="even-count-mean-of-middle-two"),
    pytest.param([2.0, 1.0, 9.0], 8.0, id="odd-count-middle-one"),
    pytest.param([100.0, 1.0, 1.0, 1.0], 4.0, id="window-keeps-the-last-3"),
    pytest.param([1.0, 1.0, 1.0, 100.0], 4.0, id="one-long-step-moves-no-median"),
    pytest.param([1.0, 100.0, 100.0, 100.0], 400.0, id="steps-slowed-down"),
])
def test_limit(counted, limit):
    assert RULE.limit(counted) == limit


@pytest.mark.parametrize("counted, elapsed, stuck", [
    pytest.param([1.0], 4.0, False, id="exactly-k-x-median"),
    pytest.param([1.0], 4.0 + 1e-9, True, id="just-over-k-x-median"),
    pytest.param([0.5], 3.0, False, id="exactly-T"),
    pytest.param([0.5], 3.0 + 1e-9, True, id="just-over-T"),
    pytest.param([0.5], 2.0, False, id="over-k-x-median-under-T"),
    pytest.param([2.0], 5.0, False, id="over-T-under-k-x-median"),
    pytest.param([], 30.0, False, id="nothing-counted-exactly-S"),
    pytest.param([], 30.0 + 1e-9, True, id="nothing-counted-just-over-S"),
    pytest.param([1.0], 0.0, False, id="just-started"),
])
def test_is_stuck(counted, elapsed, stuck):
    assert RULE.is_stuck(counted, elapsed) is stuck


@pytest.mark.parametrize("warmup, step, counts", [
    (2, 1, False), (2, 2, False), (2, 3, True), (2, 100, True),
    (0, 1, True), (1, 1, False), (1, 2, True),
])
def test_warm_up_steps_do_not_count(warmup, step, counts):
    assert StepRule(warmup=warmup).counts(step) is counts


def test_the_defaults():
    assert StepRule() == StepRule(factor=10.0, minimum=300.0, warmup=2, window=100,
                                  start=1800.0)
    assert (DEFAULT_FACTOR, DEFAULT_MINIMUM, DEFAULT_WARMUP, DEFAULT_WINDOW) == (10, 300, 2, 100)
    assert (FACTOR_VARIABLE, MINIMUM_VARIABLE) == ("MPI_RESOLVER_STEP_TIMEOUT_FACTOR",
                                                   "MPI_RESOLVER_STEP_TIMEOUT_MIN")


def test_the_exit_status_is_a_failure_that_is_neither_the_requeue_nor_a_signal():
    assert EXIT_STATUS == 124  # GNU timeout's: the step timed out
    assert 0 < EXIT_STATUS < 128 and EXIT_STATUS not in (1, 75)


@pytest.mark.parametrize("values, expected", [
    ([3.0], 3.0), ([1.0, 3.0], 2.0), ([3.0, 1.0, 2.0], 2.0), ([4.0, 1.0, 3.0, 2.0], 2.5),
    ([5.0, 5.0, 1.0], 5.0), ([0.25, 0.75], 0.5),
])
def test_median(values, expected):
    assert median(values) == expected


def test_the_median_of_nothing_is_an_error():
    with pytest.raises(ValueError, match="the median of no values"):
        median([])


@pytest.mark.parametrize("value, expected", [
    (10, 10.0), (2.5, 2.5), (1, 1.0), ("10", 10.0), (" 2.5 ", 2.5), ("1", 1.0), ("1.", 1.0),
    ("1.5", 1.5), ("off", None), (" OFF ", None), ("Off", None),
])
def test_parse_factor(value, expected):
    assert parse_factor(value) == expected


@pytest.mark.parametrize("value", [
    0.99, "0.99", 0, "0", -1, "-1", "", " ", "abc", "10s", "1e3", "nan", math.nan, math.inf,
    "inf", "9" * 400, True, None, [10], "10 10", "of",
])
def test_parse_factor_refuses(value):
    with pytest.raises(FormatError) as e:
        parse_factor(value, "k")
    assert str(e.value) == (f"k={value!r}: expected a number of at least 1 (a step may take "
                            "this many times the median step), or 'off'; e.g. k=10.")
    assert isinstance(e.value, (ResolutionError, ValueError))


@pytest.mark.parametrize("value, expected", [
    (300, 300.0), (0.5, 0.5), (1e-3, 1e-3), ("300", 300.0), ("300s", 300.0), (" 300 S ", 300.0),
    ("5m", 300.0), ("5 m", 300.0), ("1.5h", 5400.0), (".5s", 0.5), ("2.", 2.0), ("0.1", 0.1),
    ("off", None), (" Off ", None),
])
def test_parse_minimum(value, expected):
    assert parse_minimum(value) == expected


@pytest.mark.parametrize("value", [
    0, "0", "0s", "0m", -1, "-5", "5d", "5ms", "m", "s5", "abc", "", math.nan, math.inf,
    "9" * 400, "9" * 400 + "h", True, None, [5], "5 5", "1e3",
])
def test_parse_minimum_refuses(value):
    with pytest.raises(FormatError) as e:
        parse_minimum(value, "T")
    assert str(e.value) == (f"T={value!r}: expected a duration above 0: seconds ('300', "
                            "'300s'), minutes ('5m') or hours ('1h'), or 'off'; e.g. T=5m.")


def test_the_default_arguments_names_in_messages():
    with pytest.raises(FormatError, match=r"^factor='x': .* e\.g\. factor=10\.$"):
        parse_factor("x")
    with pytest.raises(FormatError, match=r"^minimum='x': .* e\.g\. minimum=5m\.$"):
        parse_minimum("x")


@pytest.mark.parametrize("factor, minimum, environ, expected", [
    pytest.param(None, None, {}, StepRule(), id="defaults"),
    pytest.param(None, None, None, StepRule(), id="no-environ"),
    pytest.param(None, None, {FACTOR_VARIABLE: "4", MINIMUM_VARIABLE: "3s"},
                 StepRule(factor=4.0, minimum=3.0), id="variables"),
    pytest.param(5, "1m", {FACTOR_VARIABLE: "4", MINIMUM_VARIABLE: "3s"},
                 StepRule(factor=5.0, minimum=60.0), id="arguments-before-variables"),
    pytest.param(None, None, {FACTOR_VARIABLE: " ", MINIMUM_VARIABLE: ""}, StepRule(),
                 id="blank-variables-are-unset"),
    pytest.param(None, None, {FACTOR_VARIABLE: "off"}, None, id="factor-variable-off"),
    pytest.param(None, None, {MINIMUM_VARIABLE: "OFF"}, None, id="minimum-variable-off"),
    pytest.param("off", None, {}, None, id="factor-argument-off"),
    pytest.param(None, "off", {}, None, id="minimum-argument-off"),
    pytest.param(2, None, {FACTOR_VARIABLE: "off"}, StepRule(factor=2.0),
                 id="argument-overrides-variable-off"),
])
def test_step_rule(factor, minimum, environ, expected):
    assert step_rule(factor, minimum, environ=environ) == expected


@pytest.mark.parametrize("kwargs, message", [
    ({"environ": {FACTOR_VARIABLE: "x"}}, "MPI_RESOLVER_STEP_TIMEOUT_FACTOR='x': expected a "
     "number of at least 1"),
    ({"environ": {MINIMUM_VARIABLE: "5d"}}, "MPI_RESOLVER_STEP_TIMEOUT_MIN='5d': expected a "
     "duration above 0"),
    ({"factor": 0.5}, "factor=0.5: expected a number of at least 1"),
    ({"minimum": -1}, "minimum=-1: expected a duration above 0"),
    ({"warmup": -1}, "warmup=-1: expected a whole number of at least 0 (int); e.g. warmup=2."),
    ({"warmup": 1.0}, "warmup=1.0: expected a whole number of at least 0"),
    ({"warmup": True}, "warmup=True: expected a whole number of at least 0"),
    ({"window": 0}, "window=0: expected a whole number of at least 1 (int); e.g. window=2."),
    ({"window": "5"}, "window='5': expected a whole number of at least 1"),
    ({"factor": "off", "window": 0}, "window=0: expected"),
])
def test_step_rule_refuses(kwargs, message):
    with pytest.raises(FormatError) as e:
        step_rule(**kwargs)
    assert str(e.value).startswith(message)


@pytest.mark.parametrize("warmup, window", [(0, 1), (5, 7)])
def test_step_rule_keeps_the_counts(warmup, window):
    assert step_rule(warmup=warmup, window=window) == StepRule(warmup=warmup, window=window)


@pytest.mark.parametrize("value, seconds", [
    ("1800", 1800.0), ("30m", 1800.0), ("1h", 3600.0), ("0.5", 0.5), (" 45m ", 2700.0),
    (120, 120.0), (0.001, 0.001),
])
def test_parse_start(value, seconds):
    assert parse_start(value) == seconds


@pytest.mark.parametrize("value", ["0", "-1", "off", "", "5d", "1e9s", float("inf"), True, None,
                                   0])
def test_parse_start_refuses_naming_the_argument_and_the_forms(value):
    with pytest.raises(FormatError) as e:
        parse_start(value, "MPI_RESOLVER_START_TIMEOUT")
    assert str(e.value).startswith(f"MPI_RESOLVER_START_TIMEOUT={value!r}: expected the seconds "
                                   "the first step may take, a duration above 0: seconds "
                                   "('1800', '1800s'), minutes ('30m') or hours ('1h')")


@pytest.mark.parametrize("start, environ, expected", [
    (None, {}, DEFAULT_START),
    (None, {START_VARIABLE: "45m"}, 2700.0),
    (None, {START_VARIABLE: " "}, DEFAULT_START),
    ("10", {START_VARIABLE: "45m"}, 10.0),  # the argument wins
])
def test_the_start_bound_from_the_argument_or_the_variable(start, environ, expected):
    assert step_rule(start=start, environ=environ).start == expected


def test_a_bad_start_argument_is_named():
    for call in (lambda: parse_start("0"), lambda: step_rule(start="0")):
        with pytest.raises(FormatError) as e:
            call()
        assert str(e.value).startswith("start_timeout='0': expected the seconds")


def test_a_bad_start_variable_is_a_configuration_error_naming_it():
    from mpi_resolver.core.errors import ConfigurationError

    with pytest.raises(ConfigurationError) as e:
        step_rule(environ={START_VARIABLE: "soon"})
    assert str(e.value).startswith("MPI_RESOLVER_START_TIMEOUT='soon': expected the seconds")


def test_the_start_default_and_its_variable():
    assert DEFAULT_START == 1800.0 and START_VARIABLE == "MPI_RESOLVER_START_TIMEOUT"
    assert StepRule().start == DEFAULT_START
