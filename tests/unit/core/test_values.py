"""_values: whole numbers, ports and GPU counts, one rule each, on both sides of every limit."""

from __future__ import annotations

import pytest

from mpi_resolver.core.errors import FormatError, ResolutionError
from mpi_resolver.core.values import (MAX_DIGITS, MAX_GPUS, check_whole, gpu_count, is_port,
                                  require_whole, switch, whole_number)
from mpi_resolver.core.values import require_whole as parse_int

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("value, minimum, expected", [
    pytest.param("0", 0, 0, id="zero is a whole number"),
    pytest.param(" 12 ", 0, 12, id="spaces around the number are ignored"),
    pytest.param("007", 1, 7, id="leading zeros are decimal"),
])
def test_parse_int_accepts(value, minimum, expected):
    assert parse_int(value, name="X_VAR", minimum=minimum) == expected


@pytest.mark.parametrize("text, number", [
    pytest.param("7", 7, id="a number"),
    pytest.param(" 7\n", 7, id="blanks around it"),
    pytest.param("9" * MAX_DIGITS, int("9" * MAX_DIGITS), id="18 digits: the most"),
    pytest.param("9" * (MAX_DIGITS + 1), None, id="19 digits: a typo"),
    pytest.param(None, None, id="unset"),
    pytest.param("", None, id="empty"),
    pytest.param("-1", None, id="negative"),
    pytest.param("1.0", None, id="a fraction"),
    pytest.param("²", None, id="a superscript digit is not decimal"),
    pytest.param("١٢", None, id="Arabic-Indic digits are not ASCII"),
])
def test_whole_number(text, number):
    assert whole_number(text) == number


def test_require_whole_messages_name_the_variable_what_was_expected_and_the_fix():
    with pytest.raises(ResolutionError) as unset:
        require_whole(None, name="SLURM_PROCID", fix="Start it with srun.")
    assert str(unset.value) == "SLURM_PROCID is not set. Start it with srun."
    assert not isinstance(unset.value, FormatError)
    with pytest.raises(FormatError) as bad:
        require_whole("x1", name="SLURM_PROCID", minimum=1)
    assert str(bad.value) == ("SLURM_PROCID='x1' is not a whole number; expected an integer "
                              ">= 1.")
    with pytest.raises(FormatError) as low:
        require_whole("0", name="SLURM_STEP_NUM_TASKS", minimum=1, fix="Fix it.")
    assert str(low.value) == "SLURM_STEP_NUM_TASKS='0': expected an integer >= 1. Fix it."
    assert require_whole("1", name="SLURM_STEP_NUM_TASKS", minimum=1) == 1
    assert require_whole("0", name="SLURM_PROCID") == 0  # the default minimum: 0


@pytest.mark.parametrize("value, minimum, message", [
    pytest.param(2, 1, None, id="above the minimum"),
    pytest.param(1, 1, None, id="at the minimum"),
    pytest.param(0, 1, "gpus_per_task=0: expected a number >= 1.", id="below it"),
    pytest.param(True, 0, "gpus_per_task=True: expected a whole number (int), got bool.",
                 id="a bool is not a number"),
    pytest.param(1.0, 0, "gpus_per_task=1.0: expected a whole number (int), got float.",
                 id="a float is not a whole number"),
    pytest.param("2", 0, "gpus_per_task='2': expected a whole number (int), got str.",
                 id="text is not a number"),
])
def test_check_whole(value, minimum, message):
    if message is None:
        assert check_whole(value, "gpus_per_task", minimum) == value
        return
    with pytest.raises(ResolutionError) as caught:
        check_whole(value, "gpus_per_task", minimum)
    assert str(caught.value) == message


@pytest.mark.parametrize("number, port", [(0, False), (1, True), (65535, True), (65536, False)])
def test_is_port(number, port):
    assert is_port(number) is port


def test_gpu_count_on_both_sides_of_the_limit():
    assert gpu_count(str(MAX_GPUS), "SLURM_GPUS_ON_NODE") == MAX_GPUS
    assert gpu_count(None, "SLURM_GPUS_ON_NODE") is None
    assert gpu_count("four", "SLURM_GPUS_ON_NODE") is None
    with pytest.raises(FormatError) as caught:
        gpu_count(str(MAX_GPUS + 1), "SLURM_GPUS_ON_NODE")
    assert str(caught.value) == ("SLURM_GPUS_ON_NODE='4097': more GPUs than a node can have "
                                 "(at most 4096); is the variable mistyped?")


@pytest.mark.parametrize("value, expected", [
    (True, True), (False, False),
    ("1", True), ("true", True), ("Yes", True), (" ON ", True),
    ("0", False), ("FALSE", False), ("no", False), ("off", False),
])
def test_switch(value, expected) -> None:
    assert switch(value, "checkpoint_async") is expected


@pytest.mark.parametrize("value", ["2", "", "y", "enabled", None, 1.0])
def test_switch_refuses_what_is_no_switch(value) -> None:
    with pytest.raises(FormatError) as e:
        switch(value, "--checkpoint-async")
    assert str(e.value) == (f"--checkpoint-async={value!r}: expected 1 or 0 (true/false, "
                            "yes/no, on/off).")
