"""long_jobs.job_settings: each long-job setting from the script's argument, else the batch
script's MPI_RESOLVER_* variable, else the default; a bad variable named; the public
long_job_settings with the script's own argument names."""

from __future__ import annotations

import pytest

from mpi_resolver.core.errors import FormatError, ResolutionError
from mpi_resolver.long_jobs.interval import DEFAULT_KEEP, DEFAULT_NODE_MTBF_HOURS
from mpi_resolver.long_jobs.job_settings import (JobSettings, check_every_steps, checkpoint_dir,
                                                 job_settings)

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
    pytest.param({"MPI_RESOLVER_CHECKPOINT_ASYNC": "0"}, {},
                 JobSettings("USR1", None, DEFAULT_KEEP, DEFAULT_NODE_MTBF_HOURS,
                             checkpoint_async=False), id="saves at once: the variable"),
    pytest.param({"MPI_RESOLVER_CHECKPOINT_ASYNC": "Off"}, {"checkpoint_async": True},
                 DEFAULTS, id="the argument wins over the variable"),
    pytest.param({"MPI_RESOLVER_CHECKPOINT_ASYNC": "yes"}, {"checkpoint_async": "no"},
                 JobSettings("USR1", None, DEFAULT_KEEP, DEFAULT_NODE_MTBF_HOURS,
                             checkpoint_async=False), id="an argument's text is read alike"),
    pytest.param({"MPI_RESOLVER_CHECKPOINT_ASYNC": "TRUE"}, {}, DEFAULTS,
                 id="background: the variable, any case"),
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
    ("MPI_RESOLVER_CHECKPOINT_ASYNC", "maybe"),
    ("MPI_RESOLVER_CHECKPOINT_ASYNC", "2"),
])
def test_a_bad_variable_is_named_first(name, text):
    with pytest.raises(ResolutionError) as e:
        job_settings({name: text})
    assert str(e.value).startswith(f"{name}={text!r}: "), e.value
    assert "expected" in str(e.value) or "e.g." in str(e.value), e.value  # what it should be


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


@pytest.mark.parametrize("given, env, expected", [
    ({}, {}, DEFAULTS),
    ({"signal": "USR2@60"}, {}, JobSettings("USR2@60", None, 2, DEFAULT_NODE_MTBF_HOURS, 60.0)),
    ({}, {"MPI_RESOLVER_SIGNAL": "URG@90"},
     JobSettings("URG@90", None, 2, DEFAULT_NODE_MTBF_HOURS, 90.0)),
    ({"grace_period": 30}, {}, JobSettings("USR1", None, 2, DEFAULT_NODE_MTBF_HOURS, 30.0)),
])
def test_long_job_settings(given, env, expected):
    from mpi_resolver import long_job_settings

    assert long_job_settings(env=env, **given) == expected


@pytest.mark.parametrize("given, env, start", [
    ({"signal": "USR9"}, {}, "--signal="),
    ({"signal": "USR1@60", "grace_period": 30}, {}, "--grace-period=30"),
    ({"checkpoint_every": "0"}, {}, "--checkpoint-every="),
    ({"keep": 0}, {}, "--keep=0"),
    ({}, {"MPI_RESOLVER_KEEP": "0"}, "MPI_RESOLVER_KEEP='0'"),
    ({"node_mtbf_hours": 0}, {}, "node_mtbf_hours=0: "),
    ({"checkpoint_async": "sometimes"}, {}, "--checkpoint-async='sometimes': expected 1 or 0"),
    ({}, {"MPI_RESOLVER_CHECKPOINT_ASYNC": "x"}, "MPI_RESOLVER_CHECKPOINT_ASYNC='x': "),
])
def test_long_job_settings_names_the_script_s_own_arguments(given, env, start):
    from mpi_resolver import long_job_settings

    names = {"signal": "--signal", "grace_period": "--grace-period",
             "checkpoint_every": "--checkpoint-every", "keep": "--keep",
             "checkpoint_async": "--checkpoint-async"}
    with pytest.raises(ResolutionError) as e:
        long_job_settings(env=env, names=names, **given)
    assert str(e.value).startswith(start), e.value


@pytest.mark.parametrize("given, env, expected", [
    pytest.param("/shared/a", {"MPI_RESOLVER_CHECKPOINT_DIR": "/shared/b"}, "/shared/a",
                 id="the argument wins"),
    pytest.param(None, {"MPI_RESOLVER_CHECKPOINT_DIR": " /shared/b "}, "/shared/b",
                 id="else the variable, stripped"),
    pytest.param("", {"MPI_RESOLVER_CHECKPOINT_DIR": "/shared/b"}, "/shared/b",
                 id="an empty argument is not given"),
    pytest.param(None, {"MPI_RESOLVER_CHECKPOINT_DIR": "  "}, None,
                 id="an empty variable is not set"),
    pytest.param(None, {}, None, id="neither: None"),
])
def test_long_job_settings_says_the_checkpoint_dir(given, env, expected):
    from mpi_resolver import long_job_settings

    assert long_job_settings(checkpoint_dir=given, env=env).checkpoint_dir == expected


def test_long_job_settings_reads_this_process_s_environment(monkeypatch):
    from mpi_resolver import long_job_settings

    monkeypatch.setenv("MPI_RESOLVER_KEEP", "5")
    monkeypatch.setenv("MPI_RESOLVER_CHECKPOINT_DIR", "/shared/c")
    assert (long_job_settings().keep, long_job_settings().checkpoint_dir) == (5, "/shared/c")


@pytest.mark.parametrize("call, said", [
    (lambda: job_settings({"MPI_RESOLVER_CHECKPOINT_ASYNC": "maybe"}),
     "MPI_RESOLVER_CHECKPOINT_ASYNC='maybe': checkpoint_async='maybe': expected 1 or 0 "
     "(true/false, yes/no, on/off)."),
    (lambda: job_settings({}, checkpoint_async="often"),
     "checkpoint_async='often': expected 1 or 0 (true/false, yes/no, on/off)."),
    (lambda: __import__("mpi_resolver").long_job_settings(env={}, checkpoint_async="x"),
     "checkpoint_async='x': expected 1 or 0 (true/false, yes/no, on/off)."),
])
def test_a_bad_switch_says_what_it_takes(call, said):
    with pytest.raises(ResolutionError) as e:
        call()
    assert str(e.value) == said


@pytest.mark.parametrize("value, fine", [
    (1, True), (7, True), (0, False), (-1, False), (True, False), (2.0, False), ("2", False),
    (None, False)])
def test_check_every_steps(value, fine: bool) -> None:
    if fine:
        assert check_every_steps(value) == value
        return
    with pytest.raises(FormatError) as e:
        check_every_steps(value)
    assert str(e.value) == f"check_every={value!r}: expected a whole number of steps >= 1."
