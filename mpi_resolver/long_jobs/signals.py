"""Slurm's warning signal as a name: what ``--signal`` takes, read back into a signal number
and the seconds it comes before the end (pure)."""

from __future__ import annotations

import signal
from dataclasses import dataclass
from typing import Optional

from mpi_resolver.core.errors import FormatError, ResolutionError

__all__ = ["WarningSignal", "parse_signal", "DEFAULT_SIGNAL", "SIGTERM"]

#: Slurm's warning signal unless the caller names another (``#SBATCH --signal=USR1@120``).
DEFAULT_SIGNAL = "USR1"
#: What Slurm sends at the time limit, on scancel, requeue and preemption (then SIGKILL).
SIGTERM = int(signal.SIGTERM)

#: Signals that cannot be caught, or that the runtime needs for itself: faults (Python's
#: faulthandler), child processes (CHLD), job control (STOP, TSTP, TTIN, TTOU, CONT: Slurm
#: sends SIGCONT with every signal), and PIPE (Python ignores it).
_REFUSED = {"KILL": "cannot be caught", "STOP": "cannot be caught",
            "CONT": "comes with every signal Slurm sends", "CHLD": "reports child processes",
            "PIPE": "Python ignores it", "SEGV": "is a fault", "BUS": "is a fault",
            "FPE": "is a fault", "ILL": "is a fault", "ABRT": "is a fault",
            "TRAP": "is a fault", "SYS": "is a fault", "TSTP": "is job control",
            "TTIN": "is job control", "TTOU": "is job control"}
_HINT = "name a signal Slurm's --signal takes, e.g. 'USR1', 'USR2' or 'USR1@120'"


@dataclass(frozen=True)
class WarningSignal:
    """A signal to watch: its number, its name without 'SIG' ('USR1', 'RTMIN+2'), and the
    seconds before the end that ``@SECONDS`` gave (None where not given)."""

    number: int
    name: str
    seconds: Optional[int] = None

    @property
    def full_name(self) -> str:
        """Returns 'SIGUSR1'."""
        return "SIG" + self.name


def parse_signal(text: object, argument: str = "signal") -> WarningSignal:
    """Returns ``text`` ('USR1', 'SIGUSR1', 'usr1', '10', 'USR2@120', 'R:URG@60', a signal
    number or signal.Signals) as a WarningSignal: what ``--signal`` takes without 'B:'.

    Raises:
      FormatError: naming ``argument``: not a signal, one that cannot be watched, 'B:' (the
        batch shell's signal, which the tasks never get), or a bad '@SECONDS'.
    """
    if isinstance(text, int) and not isinstance(text, bool):
        text = str(int(text))
    if not isinstance(text, str):
        raise FormatError(f"{argument}={text!r}: expected a signal name or number; {_HINT}.")
    spec, _, seconds = text.strip().partition("@")
    flags, colon, name = spec.rpartition(":")
    if colon and flags.upper() != "R":  # 'R:' (no reservation) only; 'B:' has its own message
        raise FormatError(_flag_message(argument, text, flags, name + _ + seconds))
    number = _number(name, argument, text)
    return WarningSignal(number, _name(number), _seconds(seconds, argument, text) if _ else None)


def _flag_message(argument: str, text: str, flags: str, rest: str) -> str:
    """Returns the message for ``flags`` before ':' (``rest`` after it)."""
    if "B" in flags.upper():
        return (f"{argument}={text!r}: 'B:' sends the signal to the batch shell only, and "
                "mpi_resolver watches for it in the tasks; pass "
                f"{rest!r} and either submit with --signal={rest} (no 'B:': every task gets "
                "it) or forward it from the batch shell to the tasks, as "
                "examples/train.sbatch does.")
    return f"{argument}={text!r}: unknown flag {flags + ':'!r}; {_HINT}."


def _number(name: str, argument: str, text: str) -> int:
    """Returns the signal number of ``name`` (a name with or without SIG, or a number)."""
    word = name.strip().upper()
    if word.isascii() and word.isdigit():
        number = int(word) if len(word) <= 3 else 0
        if not 1 <= number <= int(signal.SIGRTMAX):
            raise FormatError(f"{argument}={text!r}: signal numbers are 1 to "
                              f"{int(signal.SIGRTMAX)}; {_HINT}.")
    else:
        word = word[3:] if word.startswith("SIG") else word
        member = signal.Signals.__members__.get("SIG" + word)
        if member is None:
            raise FormatError(f"{argument}={text!r}: not a signal name; {_HINT}.")
        number = int(member)
    called = _name(number)
    if called.isdigit():  # 32 and 33: no name, the C library's own (threads)
        raise FormatError(f"{argument}={text!r}: signal {number} is the C library's own (its "
                          f"threads use it), not one a program can watch; {_HINT}.")
    refused = _REFUSED.get(called)
    if refused:
        raise FormatError(f"{argument}={text!r}: SIG{called} {refused}, so it cannot "
                          f"warn of the end; {_HINT}.")
    return number


def _name(number: int) -> str:
    """Returns a signal's name without SIG: 'USR1', or 'RTMIN+2' for real-time signals."""
    if int(signal.SIGRTMIN) < number <= int(signal.SIGRTMAX):
        return f"RTMIN+{number - int(signal.SIGRTMIN)}"
    try:
        return signal.Signals(number).name[3:]
    except ValueError:
        return str(number)


def _seconds(text: str, argument: str, whole: str) -> int:
    """Returns '@SECONDS' as an int in 0..65535 (Slurm's limit)."""
    value = text.strip()
    if not (value.isascii() and value.isdigit()) or len(value) > 5 or int(value) > 65535:
        raise FormatError(f"{argument}={whole!r}: '@{text}' is not a number of seconds "
                          "(0-65535, as Slurm's --signal=SIG@SECONDS takes)")
    return int(value)


def grace_seconds(grace_period: object, warning: WarningSignal, argument: str = "grace_period",
                  signal_argument: str = "signal") -> Optional[float]:
    """Returns the grace period in seconds: ``grace_period``, else the signal's '@SECONDS',
    else None (``argument`` and ``signal_argument`` name the two in messages).

    Raises:
      ResolutionError: not a number >= 0, or different from the signal's '@SECONDS'.
    """
    if grace_period is None:
        return None if warning.seconds is None else float(warning.seconds)
    if isinstance(grace_period, bool) or not isinstance(grace_period, (int, float)) \
            or not grace_period >= 0:
        raise ResolutionError(f"{argument}={grace_period!r}: expected seconds (a number "
                              ">= 0), as #SBATCH --signal=USR1@SECONDS gives.")
    if warning.seconds is not None and warning.seconds != grace_period:
        raise ResolutionError(
            f"{argument}={grace_period!r} and {signal_argument}='{warning.name}@"
            f"{warning.seconds}' say different things: give the seconds once.")
    return float(grace_period)
