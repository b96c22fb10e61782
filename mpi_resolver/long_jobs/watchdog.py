"""The step watchdog's rule: when a training step has taken so long that its worker, or a
peer it waits for, is stuck (pure: numbers in, a verdict out; step_watchdog is the edge).

A step is stuck when it has run longer than ``factor`` times the median of the last
``window`` counted steps and longer than ``minimum`` seconds. The first ``warmup`` steps
(tracing the step function, building the collectives' groups, the first all-reduce) do not
count. Until a counted step is done there is no median: every step then has ``start``
seconds (MPI_RESOLVER_START_TIMEOUT), so that a rendezvous that never completes, or a first
step that never comes, is seen too.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Callable, Mapping, Optional, Sequence, TypeVar, Union

from mpi_resolver.core import settings
from mpi_resolver.core.errors import FormatError, VariableError
from mpi_resolver.long_jobs import exits

__all__ = ["StepRule", "median", "parse_factor", "parse_minimum", "parse_start", "step_rule",
           "DEFAULT_FACTOR", "DEFAULT_MINIMUM", "DEFAULT_WARMUP", "DEFAULT_WINDOW",
           "DEFAULT_START", "FACTOR_VARIABLE", "MINIMUM_VARIABLE", "START_VARIABLE",
           "EXIT_STATUS", "OFF"]

#: k: a step may take this many times the median step. Healthy jitter (garbage collection,
#: a slow node, a periodic save folded into a step) stays within a few times the median.
DEFAULT_FACTOR = 10.0
#: T: and never less than this many seconds, whatever the median (tiny steps jitter more).
DEFAULT_MINIMUM = 300.0
#: Steps at the start whose times neither count nor trigger (tracing, the first all-reduce).
DEFAULT_WARMUP = 2
#: The median is over this many of the latest counted steps.
DEFAULT_WINDOW = 100
#: S: the seconds each step has before a median exists (the first step included). A large
#: model's first step compiles it (XLA: minutes to tens of minutes), builds NCCL's
#: communicators across thousands of GPUs (minutes) and reads its first batches; 30 minutes
#: is above what those take and far below the hours a hung rendezvous would hold the job.
DEFAULT_START = 1800.0
#: The variables read where the caller passes nothing.
FACTOR_VARIABLE = settings.STEP_TIMEOUT_FACTOR
MINIMUM_VARIABLE = settings.STEP_TIMEOUT_MIN
START_VARIABLE = settings.START_TIMEOUT
#: The value of either that turns the watchdog off.
OFF = "off"
#: A stuck step's exit status: GNU timeout's "timed out" (a failure that `supervise` reruns;
#: not 75, the requeue's, nor 143 = 128 + SIGTERM, nor any 128 + signal): exits.HUNG.
EXIT_STATUS = exits.HUNG

T = TypeVar("T")

_UNITS = {"": 1.0, "s": 1.0, "m": 60.0, "h": 3600.0}
_DECIMAL = r"(\d+(?:\.\d*)?|\.\d+)"
_DURATION = re.compile(_DECIMAL + r"\s*([smh]?)")


@dataclass(frozen=True)
class StepRule:
    """The rule's settings (checked by ``step_rule``): factor k, minimum T in seconds, the
    warm-up steps, the median's window, and the start bound S in seconds."""

    factor: float = DEFAULT_FACTOR
    minimum: float = DEFAULT_MINIMUM
    warmup: int = DEFAULT_WARMUP
    window: int = DEFAULT_WINDOW
    start: float = DEFAULT_START

    def counts(self, step: int) -> bool:
        """Returns whether the duration of ``step`` (the first is 1) counts for the median."""
        return step > self.warmup

    def limit(self, counted: Sequence[float]) -> float:
        """Returns the seconds the current step may take, given the durations of the counted
        steps so far (oldest first): the start bound where none is counted yet."""
        if not counted:
            return self.start
        return max(self.minimum, self.factor * median(counted[-self.window:]))

    def is_stuck(self, counted: Sequence[float], elapsed: float) -> bool:
        """Returns whether a step that has run ``elapsed`` seconds is past its limit."""
        return elapsed > self.limit(counted)


def median(values: Sequence[float]) -> float:
    """Returns the median of ``values`` (the mean of the middle two for an even count).

    Raises:
      ValueError: ``values`` is empty.
    """
    if not values:
        raise ValueError("the median of no values")
    ordered = sorted(values)
    middle = len(ordered) // 2
    if len(ordered) % 2:
        return ordered[middle]
    return (ordered[middle - 1] + ordered[middle]) / 2


def parse_factor(value: object, argument: str = "factor") -> Optional[float]:
    """Returns k from a number or text ('10', '2.5'); None for 'off'.

    Raises:
      FormatError: naming ``argument``: not a finite number of at least 1.
    """
    fix = (f"expected a number of at least 1 (a step may take this many times the median "
           f"step), or '{OFF}'; e.g. {argument}=10")
    if _is_off(value):
        return None
    number = _number(value)
    if number is None or not number >= 1:
        raise FormatError(f"{argument}={value!r}: {fix}.")
    return number


def parse_minimum(value: object, argument: str = "minimum") -> Optional[float]:
    """Returns T in seconds from a number of seconds or text ('300', '300s', '5m', '1.5h');
    None for 'off'.

    Raises:
      FormatError: naming ``argument``: not a positive, finite duration.
    """
    fix = (f"expected a duration above 0: seconds ('300', '300s'), minutes ('5m') or hours "
           f"('1h'), or '{OFF}'; e.g. {argument}=5m")
    if _is_off(value):
        return None
    seconds = _seconds(value)
    if seconds is None or not seconds > 0:
        raise FormatError(f"{argument}={value!r}: {fix}.")
    return seconds


def parse_start(value: object, argument: str = "start_timeout") -> float:
    """Returns S in seconds from a number of seconds or text ('1800', '30m', '1h').

    Raises:
      FormatError: naming ``argument``: not a positive, finite duration.
    """
    seconds = _seconds(value)
    if seconds is None or not seconds > 0:
        raise FormatError(f"{argument}={value!r}: expected the seconds the first step may "
                          "take, a duration above 0: seconds ('1800', '1800s'), minutes "
                          f"('30m') or hours ('1h'); e.g. {argument}=45m for a model whose "
                          "first step compiles for long.")
    return seconds


def step_rule(factor: object = None, minimum: object = None, *,
              warmup: int = DEFAULT_WARMUP, window: int = DEFAULT_WINDOW,
              start: object = None,
              environ: Optional[Mapping[str, str]] = None) -> Optional[StepRule]:
    """Returns the rule from the arguments; where one is None, from FACTOR_VARIABLE,
    MINIMUM_VARIABLE or START_VARIABLE in ``environ``, else the default. None where the
    factor or the minimum is 'off'.

    Raises:
      FormatError: naming the argument or the variable, for a bad value.
    """
    environ = environ or {}
    k = _setting(factor, "factor", FACTOR_VARIABLE, environ, DEFAULT_FACTOR, parse_factor)
    t = _setting(minimum, "minimum", MINIMUM_VARIABLE, environ, DEFAULT_MINIMUM,
                 parse_minimum)
    s = _setting(start, "start_timeout", START_VARIABLE, environ, DEFAULT_START, parse_start)
    _check_count(warmup, "warmup", 0)
    _check_count(window, "window", 1)
    if k is None or t is None:
        return None
    return StepRule(factor=k, minimum=t, warmup=warmup, window=window, start=s)


def _setting(value: object, argument: str, variable: str, environ: Mapping[str, str],
             default: float, parse: Callable[[object, str], T]) -> Union[float, T]:
    """Returns ``parse`` of the argument, else of the variable where set, else ``default``."""
    if value is not None:
        return parse(value, argument)
    text = environ.get(variable)
    if text is None or not text.strip():
        return default
    try:
        return parse(text, variable)
    except FormatError as e:  # a variable: a configuration error (exit 78 if uncaught)
        raise VariableError(str(e)) from e


def _check_count(value: object, argument: str, least: int) -> None:
    """Raises FormatError naming ``argument`` unless ``value`` is an int >= ``least``."""
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        raise FormatError(f"{argument}={value!r}: expected a whole number of at least {least} "
                          f"(int); e.g. {argument}={max(least, 2)}.")


def _is_off(value: object) -> bool:
    """Returns whether ``value`` is the text 'off' (any case, blanks around it)."""
    return isinstance(value, str) and value.strip().lower() == OFF


def _number(value: object) -> Optional[float]:
    """Returns ``value`` (an int, a float or decimal text) as a finite float, else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        number = float(value)
    elif isinstance(value, str) and re.fullmatch(_DECIMAL, value.strip()):
        number = float(value.strip())
    else:
        return None
    return number if math.isfinite(number) else None


def _seconds(value: object) -> Optional[float]:
    """Returns ``value`` (a number of seconds, or '300', '300s', '5m', '1.5h') in seconds,
    else None."""
    if not isinstance(value, str):
        return _number(value)
    m = _DURATION.fullmatch(value.strip().lower())
    if m is None:
        return None
    seconds = float(m.group(1)) * _UNITS[m.group(2)]
    return seconds if math.isfinite(seconds) else None
