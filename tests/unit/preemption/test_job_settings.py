"""preemption.job_settings and core.settings: each long-job setting from the script's argument,
else the batch script's MPI_RESOLVER_* variable, else the default; a bad variable named."""

from __future__ import annotations

from pathlib import Path

import pytest

from mpi_resolver.core.errors import FormatError, ResolutionError
from mpi_resolver.core.settings import VARIABLES, number_text, setting
from mpi_resolver.preemption.interval import DEFAULT_KEEP, DEFAULT_NODE_MTBF_HOURS
from mpi_resolver.preemption.job_settings import JobSettings, checkpoint_dir, job_settings

pytestmark = pytest.mark.unit

DEFAULTS = JobSettings("USR1", None, DEFAULT_KEEP, DEFAULT_NODE_MTBF_HOURS)
ALL = {"MPI_RESOLVER_SIGNAL": "USR2@300", "MPI_RESOLVER_CHECKPOINT_EVERY": "auto",
       "MPI_RESOLVER_KEEP": "3", "MPI_RESOLVER_NODE_MTBF_HOURS": "500"}


@pytest.mark.parametrize("env, given, expected", [
    pytest.param({}, {}, DEFAULTS, id="nothing: the defaults"),
    pytest.param(ALL, {}, JobSettings("USR2@300", "auto", 3, 500.0), id="the variables"),
    pytest.param({k: "  " for k in ALL}, {}, DEFAULTS, id="blank: not set"),
    pytest.param(ALL, {"signal": "URG@60", "checkpoint_every": 100, "keep": 1,
                       "node_mtbf_hours": 20.0},
                 JobSettings("URG@60", 100, 1, 20.0), id="the script's arguments win"),
    pytest.param({"MPI_RESOLVER_CHECKPOINT_EVERY": " 10m "}, {},
                 JobSettings("USR1", "10m", DEFAULT_KEEP, DEFAULT_NODE_MTBF_HOURS),
                 id="stripped"),
])
def test_job_settings(env, given, expected):
    assert job_settings(env, **given) == expected


@pytest.mark.parametrize("name, text", [
    ("MPI_RESOLVER_SIGNAL", "USR9"),
    ("MPI_RESOLVER_CHECKPOINT_EVERY", "0"),
    ("MPI_RESOLVER_CHECKPOINT_EVERY", "10 parsecs"),
    ("MPI_RESOLVER_KEEP", "0"),
    ("MPI_RESOLVER_KEEP", "two"),
    ("MPI_RESOLVER_NODE_MTBF_HOURS", "0"),
    ("MPI_RESOLVER_NODE_MTBF_HOURS", "many"),
])
def test_a_bad_variable_is_named_first(name, text):
    with pytest.raises(ResolutionError) as e:
        job_settings({name: text})
    assert str(e.value).startswith(f"{name}={text!r}: "), e.value


@pytest.mark.parametrize("given, env, expected", [
    ("/shared/a", {"MPI_RESOLVER_CHECKPOINT_DIR": "/shared/b"}, "/shared/a"),
    (None, {"MPI_RESOLVER_CHECKPOINT_DIR": " /shared/b "}, "/shared/b"),
    ("", {"MPI_RESOLVER_CHECKPOINT_DIR": "/shared/b"}, "/shared/b"),
])
def test_checkpoint_dir(given, env, expected):
    assert checkpoint_dir(given, env, "backup_dir") == expected


@pytest.mark.parametrize("env", [{}, {"MPI_RESOLVER_CHECKPOINT_DIR": ""}])
def test_no_checkpoint_dir_names_the_argument_and_the_variable(env):
    with pytest.raises(FormatError) as e:
        checkpoint_dir(None, env, "backup_dir")
    assert str(e.value).startswith("backup_dir is not given and MPI_RESOLVER_CHECKPOINT_DIR "
                                   "is not set: "), e.value
    assert "export MPI_RESOLVER_CHECKPOINT_DIR=DIR" in str(e.value)


@pytest.mark.parametrize("text, expected", [
    ("8888", 8888), ("+3", 3), ("-1", -1), ("auto", "auto"), ("1.5", "1.5"), ("", ""),
    ("-", "-"), ("٣", "٣"),
])
def test_number_text(text, expected):
    assert number_text(text) == expected


def test_setting_keeps_the_error_s_kind():
    def bad_format(_):
        raise FormatError("expected X")

    def bad_value(_):
        raise ResolutionError("expected Y")

    with pytest.raises(FormatError, match=r"^V='a': expected X$"):
        setting(None, "V", {"V": "a"}, bad_format)
    with pytest.raises(ResolutionError, match=r"^V='b': expected Y$") as e:
        setting(None, "V", {"V": "b"}, bad_value)
    assert not isinstance(e.value, FormatError)
    assert setting(0, "V", {"V": "b"}, bad_value) == 0  # a falsy argument is still given


def test_every_variable_is_the_package_s_own():
    assert all(name.startswith("MPI_RESOLVER_") for name in VARIABLES)
    assert len(VARIABLES) == 7


def test_the_api_page_lists_every_variable_and_no_other():
    text = (Path(__file__).resolve().parents[3] / "docs" / "api.md").read_text()
    table = text.split("## Settings from the environment", 1)[1].split("\n## ", 1)[0]
    rows = [ln.split("|")[1].strip().strip("`") for ln in table.splitlines()
            if ln.startswith("| `")]
    assert rows == list(VARIABLES)
