"""long_jobs.signals: the names Slurm's --signal takes, read back, and every refusal's
message (it names the argument, what was wrong and what to pass)."""

from __future__ import annotations

import signal

import pytest

from mpi_resolver.core.errors import FormatError, ResolutionError
from mpi_resolver.long_jobs.signals import (DEFAULT_SIGNAL, SIGTERM, WarningSignal, grace_seconds,
                                             parse_signal)

pytestmark = pytest.mark.unit

HINT = "name a signal Slurm's --signal takes, e.g. 'USR1', 'USR2' or 'USR1@120'."
RTMAX = int(signal.SIGRTMAX)


@pytest.mark.parametrize("text, number, name, seconds", [
    pytest.param("USR1", 10, "USR1", None, id="Slurm's name"),
    pytest.param("SIGUSR2", 12, "USR2", None, id="with SIG"),
    pytest.param(" usr1 ", 10, "USR1", None, id="lower case, blanks around"),
    pytest.param("10", 10, "USR1", None, id="a number"),
    pytest.param("010", 10, "USR1", None, id="three digits: the most a number has"),
    pytest.param(10, 10, "USR1", None, id="an int"),
    pytest.param(signal.SIGURG, 23, "URG", None, id="signal.Signals"),
    pytest.param("TERM", 15, "TERM", None, id="SIGTERM may be the warning"),
    pytest.param("USR1@120", 10, "USR1", 120, id="@SECONDS: the grace period"),
    pytest.param("USR1@0", 10, "USR1", 0, id="@0: the least"),
    pytest.param("USR1@65535", 10, "USR1", 65535, id="@65535: Slurm's most"),
    pytest.param("R:URG@60", 23, "URG", 60, id="R: (a reservation's end) is kept"),
    pytest.param("1", 1, "HUP", None, id="1: the lowest number"),
    pytest.param(str(RTMAX), RTMAX, f"RTMIN+{RTMAX - int(signal.SIGRTMIN)}", None,
                 id="the highest real-time signal"),
    pytest.param(str(int(signal.SIGRTMIN)), int(signal.SIGRTMIN), "RTMIN", None,
                 id="SIGRTMIN itself"),
])
def test_accepts(text, number, name, seconds):
    assert parse_signal(text) == WarningSignal(number, name, seconds)


def test_full_name_and_defaults():
    assert parse_signal(DEFAULT_SIGNAL).full_name == "SIGUSR1"
    assert SIGTERM == 15


@pytest.mark.parametrize("text, message", [
    pytest.param("B:USR1@120", (
        "signal='B:USR1@120': 'B:' sends the signal to the batch shell only, and mpi_resolver "
        "watches for it in the tasks; pass 'USR1@120' and either submit with "
        "--signal=USR1@120 (no 'B:': every task gets it) or forward it from the batch shell to "
        "the tasks, as examples/train.sbatch does."), id="B: the batch shell's"),
    pytest.param("RB:USR1", (
        "signal='RB:USR1': 'B:' sends the signal to the batch shell only, and mpi_resolver "
        "watches for it in the tasks; pass 'USR1' and either submit with --signal=USR1 (no "
        "'B:': every task gets it) or forward it from the batch shell to the tasks, as "
        "examples/train.sbatch does."), id="RB: still the batch shell's"),
    pytest.param("X:USR1", f"signal='X:USR1': unknown flag 'X:'; {HINT}", id="other flags"),
    pytest.param("KILL", "signal='KILL': SIGKILL cannot be caught, so it cannot warn of the "
                         f"end; {HINT}", id="KILL"),
    pytest.param("STOP", "signal='STOP': SIGSTOP cannot be caught, so it cannot warn of the "
                         f"end; {HINT}", id="STOP"),
    pytest.param("CONT", "signal='CONT': SIGCONT comes with every signal Slurm sends, so it "
                         f"cannot warn of the end; {HINT}", id="CONT"),
    pytest.param("SEGV", f"signal='SEGV': SIGSEGV is a fault, so it cannot warn of the end; "
                         f"{HINT}", id="a fault"),
    pytest.param("17", f"signal='17': SIGCHLD reports child processes, so it cannot warn of "
                       f"the end; {HINT}", id="CHLD by number"),
    pytest.param("0", f"signal='0': signal numbers are 1 to {RTMAX}; {HINT}", id="0"),
    pytest.param(str(RTMAX + 1), f"signal='{RTMAX + 1}': signal numbers are 1 to {RTMAX}; "
                                 f"{HINT}", id="one past the last"),
    pytest.param("0010", f"signal='0010': signal numbers are 1 to {RTMAX}; {HINT}",
                 id="four digits"),
    pytest.param("32", "signal='32': signal 32 is the C library's own (its threads use it), "
                       f"not one a program can watch; {HINT}", id="32: no name"),
    pytest.param("33", "signal='33': signal 33 is the C library's own (its threads use it), "
                       f"not one a program can watch; {HINT}", id="33: no name"),
    pytest.param("USR3", f"signal='USR3': not a signal name; {HINT}", id="unknown name"),
    pytest.param("US R1", f"signal='US R1': not a signal name; {HINT}", id="a blank inside"),
    pytest.param("SIG_BLOCK", f"signal='SIG_BLOCK': not a signal name; {HINT}",
                 id="signal's other constants"),
    pytest.param("", f"signal='': not a signal name; {HINT}", id="empty"),
    pytest.param("@5", f"signal='@5': not a signal name; {HINT}", id="seconds alone"),
    pytest.param("SIG", f"signal='SIG': not a signal name; {HINT}", id="SIG alone"),
    pytest.param("1e3", f"signal='1e3': not a signal name; {HINT}", id="not a number"),
    pytest.param("USR1@", "signal='USR1@': '@' is not a number of seconds (0-65535, as "
                          "Slurm's --signal=SIG@SECONDS takes)", id="@ without seconds"),
    pytest.param("USR1@-3", "signal='USR1@-3': '@-3' is not a number of seconds (0-65535, "
                            "as Slurm's --signal=SIG@SECONDS takes)", id="negative seconds"),
    pytest.param("USR1@65536", "signal='USR1@65536': '@65536' is not a number of seconds "
                               "(0-65535, as Slurm's --signal=SIG@SECONDS takes)",
                 id="one past Slurm's most"),
    pytest.param("USR1@100000", "signal='USR1@100000': '@100000' is not a number of seconds "
                                "(0-65535, as Slurm's --signal=SIG@SECONDS takes)",
                 id="six digits"),
    pytest.param(None, f"signal=None: expected a signal name or number; {HINT}", id="None"),
    pytest.param(True, f"signal=True: expected a signal name or number; {HINT}",
                 id="a bool is not a number"),
])
def test_refuses_with_a_message_naming_the_argument(text, message):
    with pytest.raises(FormatError) as e:
        parse_signal(text)
    assert str(e.value) == message
    assert isinstance(e.value, ValueError) and isinstance(e.value, ResolutionError)


def test_the_argument_named_is_the_caller_s():
    with pytest.raises(FormatError, match=r"^--signal='x': "):
        parse_signal("x", argument="--signal")


USR1 = parse_signal("USR1")
USR1_120 = parse_signal("USR1@120")


@pytest.mark.parametrize("given, warning, seconds", [
    (None, USR1, None),            # neither: no grace period known
    (None, USR1_120, 120.0),       # the signal's @SECONDS
    (0, USR1, 0.0),                # the limit: 0 is seconds
    (0.5, USR1, 0.5),
    (120, USR1_120, 120.0),        # both, the same
    (120.0, USR1_120, 120.0),
])
def test_grace_seconds(given, warning, seconds):
    got = grace_seconds(given, warning)
    assert got == seconds and (got is None or type(got) is float)


@pytest.mark.parametrize("given, warning, message", [
    (-0.001, USR1, "grace_period=-0.001: expected seconds (a number >= 0), as #SBATCH "
                   "--signal=USR1@SECONDS gives."),
    (float("nan"), USR1, "grace_period=nan: expected seconds"),
    (True, USR1, "grace_period=True: expected seconds"),
    ("60", USR1, "grace_period='60': expected seconds"),
    (119, USR1_120, "grace_period=119 and signal='USR1@120' say different things: give the "
                    "seconds once."),
    (121.0, USR1_120, "grace_period=121.0 and signal='USR1@120' say different things"),
])
def test_grace_seconds_refused(given, warning, message):
    with pytest.raises(ResolutionError) as caught:
        grace_seconds(given, warning)
    assert message in str(caught.value) and not isinstance(caught.value, FormatError)


def test_grace_seconds_names_the_arguments_given():
    with pytest.raises(ResolutionError, match=r"^--grace-period=119 and --signal='USR1@120' "):
        grace_seconds(119, USR1_120, "--grace-period", "--signal")
    with pytest.raises(ResolutionError, match=r"^--grace-period=-1: "):
        grace_seconds(-1, USR1, "--grace-period", "--signal")
