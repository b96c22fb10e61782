"""Whole numbers, ports, GPU counts and switches: the one rule for each, wherever input is read
(pure)."""

from __future__ import annotations

from typing import Any, Optional

from mpi_resolver.core.errors import FormatError, ResolutionError

#: Digits a whole number may have: longer ones are typos, and int() refuses > 4300 digits.
MAX_DIGITS = 18
PORT_MIN, PORT_MAX = 1, 65535
#: GPUs a node may have (a count, or a list): more is a typo that would build a huge list.
MAX_GPUS = 4096


def whole_number(text: Optional[str]) -> Optional[int]:
    """Returns ``text`` (blanks around it allowed) as an int >= 0, or None where it is unset,
    not ASCII digits only, or longer than MAX_DIGITS digits."""
    if text is None:
        return None
    value = text.strip()
    if not value.isascii() or not value.isdigit() or len(value) > MAX_DIGITS:
        return None
    return int(value)


def require_whole(text: Optional[str], *, name: str, minimum: int = 0, fix: str = "") -> int:
    """Returns variable ``name``'s value ``text`` as an int >= minimum.

    Raises:
      ResolutionError: ``text`` is None (the variable is not set).
      FormatError: not a whole number, or below ``minimum``.
    """
    if text is None:
        raise ResolutionError(f"{name} is not set. {fix}".strip())
    number = whole_number(text)
    if number is None:
        raise FormatError(
            f"{name}={text!r} is not a whole number; expected an integer >= {minimum}. "
            f"{fix}".strip())
    if number < minimum:
        raise FormatError(f"{name}={text!r}: expected an integer >= {minimum}. {fix}".strip())
    return number


def check_whole(value: Any, name: str, minimum: int) -> int:
    """Returns the argument ``value`` when it is an int >= minimum (not a bool).

    Raises:
      ResolutionError: naming the argument ``name``.
    """
    if isinstance(value, bool) or not isinstance(value, int):
        raise ResolutionError(
            f"{name}={value!r}: expected a whole number (int), got {type(value).__name__}.")
    if value < minimum:
        raise ResolutionError(f"{name}={value!r}: expected a number >= {minimum}.")
    return value


def is_port(number: int) -> bool:
    """Returns True for a TCP port number (1..65535)."""
    return PORT_MIN <= number <= PORT_MAX


def gpu_count(text: Optional[str], name: str) -> Optional[int]:
    """Returns a GPU count from variable ``name`` (None where unset or not a number).

    Raises:
      FormatError: more than MAX_GPUS.
    """
    count = whole_number(text)
    if count is not None and count > MAX_GPUS:
        raise FormatError(f"{name}={text!r}: more GPUs than a node can have (at most "
                          f"{MAX_GPUS}); is the variable mistyped?")
    return count


_SWITCH = {"1": True, "true": True, "yes": True, "on": True,
           "0": False, "false": False, "no": False, "off": False}


def switch(value: Any, name: str) -> bool:
    """Returns ``value`` (a bool, or '1'/'0', 'true'/'false', 'yes'/'no', 'on'/'off', any
    case) as a bool.

    Raises:
      FormatError: naming ``name``: anything else.
    """
    if isinstance(value, bool):
        return value
    found = _SWITCH.get(str(value).strip().lower())
    if found is None:
        raise FormatError(f"{name}={value!r}: expected 1 or 0 (true/false, yes/no, on/off).")
    return found
