"""How often to save a checkpoint without a signal: ``--checkpoint-every N|DURATION|auto`` read
into a rule, Young's interval for 'auto', the expected overhead, and a duration turned into a
number of steps (pure)."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Optional, Union

from mpi_resolver.core.errors import FormatError

__all__ = ["Every", "parse_every", "parse_keep", "young_interval", "overhead",
           "steps_for", "job_mtbf", "DEFAULT_NODE_MTBF_HOURS", "DEFAULT_KEEP", "AUTO"]

AUTO = "auto"
#: Checkpoints kept in the directory: one torn file never leaves nothing to resume from.
DEFAULT_KEEP = 2
#: A node's mean time between failures nobody announces, in hours, where the caller says
#: nothing: Meta's Llama 3 report counts 419 unexpected interruptions in 54 days on 16,384
#: GPUs (2,048 nodes of 8): 54 x 24 x 2,048 / 419 = 6,335 node-hours, rounded down. A job's
#: is this divided by its nodes.
DEFAULT_NODE_MTBF_HOURS = 6000.0
_UNITS = {"s": 1.0, "m": 60.0, "h": 3600.0}
_DURATION = re.compile(r"(\d+(?:\.\d+)?)([smh])")
_FORMS = ("a number of steps (e.g. 100), a duration ('90s', '10m', '2h', '1h30m'), or 'auto' "
          "(Young's interval from the measured save time and the job's failure rate)")


@dataclass(frozen=True)
class Every:
    """A periodic-save rule: every ``steps`` steps, every ``seconds`` of the chief's clock, or
    ``auto`` (Young's interval, once the first save's time is known)."""

    steps: Optional[int] = None
    seconds: Optional[float] = None
    auto: bool = False

    def describe(self) -> str:
        """Returns the rule as a user wrote it: '100 steps', '600 s', 'auto'."""
        if self.auto:
            return AUTO
        return f"{self.steps} steps" if self.steps is not None else f"{self.seconds:g} s"


def parse_every(text: Union[str, int, None], argument: str = "checkpoint_every") -> \
        Optional[Every]:
    """Returns ``text`` ('100', '90s', '10m', '2h', '1h30m', 'auto', an int, None) as a rule,
    None for None (no periodic saves).

    Raises:
      FormatError: naming ``argument``: zero, negative, an unknown unit, not a number.
    """
    if text is None:
        return None
    word = str(text).strip().lower()  # anything else (True, 1.5) is no form below
    if word == AUTO:
        return Every(auto=True)
    if word.isascii() and word.isdigit():
        if int(word) < 1:
            raise FormatError(f"{argument}={text!r}: at least 1 step; expected {_FORMS}.")
        return Every(steps=int(word))
    seconds = _duration(word)
    if seconds is None:
        raise FormatError(f"{argument}={text!r}: expected {_FORMS}.")
    if seconds <= 0:
        raise FormatError(f"{argument}={text!r}: a duration longer than 0; expected {_FORMS}.")
    return Every(seconds=seconds)


def _duration(word: str) -> Optional[float]:
    """Returns '1h30m' in seconds, or None where it is not numbers each with s, m or h."""
    parts = _DURATION.findall(word)
    if not parts or "".join(n + u for n, u in parts) != word:
        return None
    return sum(float(n) * _UNITS[u] for n, u in parts)


def parse_keep(value: object, argument: str = "keep") -> int:
    """Returns how many checkpoints to keep (a whole number >= 1).

    Raises:
      FormatError: naming ``argument``: 0, negative, not a whole number.
    """
    text = str(value).strip()  # True, 1.0, None: not digits
    if not (text.isascii() and text.isdigit()) or int(text) < 1:
        raise FormatError(f"{argument}={value!r}: expected a whole number of checkpoints to "
                          f"keep, at least 1 (default {DEFAULT_KEEP}: a torn newest one still "
                          "leaves one to resume from).")
    return int(text)


def job_mtbf(nodes: int, node_mtbf_hours: float = DEFAULT_NODE_MTBF_HOURS) -> float:
    """Returns the job's mean time between failures in seconds: a node's, divided by the
    job's ``nodes`` (each node's failure ends the job).

    Raises:
      FormatError: ``node_mtbf_hours`` not a number > 0.
    """
    if isinstance(node_mtbf_hours, bool) or not isinstance(node_mtbf_hours, (int, float)) \
            or not node_mtbf_hours > 0 or math.isinf(node_mtbf_hours):
        raise FormatError(f"node_mtbf_hours={node_mtbf_hours!r}: expected a node's mean time "
                          "between failures in hours, a number > 0 (default "
                          f"{DEFAULT_NODE_MTBF_HOURS:g}).")
    return node_mtbf_hours * 3600.0 / max(int(nodes), 1)


def young_interval(save_seconds: float, mtbf_seconds: float) -> float:
    """Returns Young's checkpoint interval sqrt(2 C M) in seconds (Young 1974), C the time one
    save takes and M the job's mean time between failures; Daly (2006) refines it, by less
    than C for C much shorter than M, the case here."""
    return math.sqrt(2.0 * max(save_seconds, 0.0) * mtbf_seconds)


def overhead(save_seconds: float, interval_seconds: float, mtbf_seconds: float) -> float:
    """Returns the expected fraction of the run lost to periodic saving: the saves (C / T) and
    the work redone after a failure (half an interval per failure: T / 2M)."""
    if interval_seconds <= 0:
        return 0.0
    return save_seconds / interval_seconds + interval_seconds / (2.0 * mtbf_seconds)


def steps_for(seconds: float, step_seconds: float) -> int:
    """Returns how many steps of ``step_seconds`` make ``seconds``: at least 1."""
    if step_seconds <= 0:
        return 1
    return max(1, int(round(seconds / step_seconds)))
