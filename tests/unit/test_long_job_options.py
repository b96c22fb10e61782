"""examples/long_jobs.py: the long jobs' options that examples/train.py and train_ps.py share,
and their checks (argparse's usage error, exit 2, naming the option); the examples' port
taken from MPI_RESOLVER_PORT_BASE by default, and the JAX examples' last line."""

from __future__ import annotations

import argparse
import importlib.util
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location(
    "long_jobs", Path(__file__).resolve().parents[2] / "examples" / "long_jobs.py")
long_jobs = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(long_jobs)


def parse(argv):
    """Returns the parsed options, or raises SystemExit as argparse does."""
    p = argparse.ArgumentParser(prog="train.py")
    long_jobs.add_long_job_options(p, "where the checkpoints go")
    args = p.parse_args(argv)
    long_jobs.check_long_job_options(p, args)
    return args


@pytest.mark.parametrize("argv, signal, grace, requeue, on_time_limit", [
    ([], "USR1", None, True, False),
    (["--signal", "USR2@300"], "USR2@300", None, True, False),
    (["--signal", "USR1@120", "--grace-period", "120"], "USR1@120", 120.0, True, False),
    (["--grace-period", "0"], "USR1", 0.0, True, False),
    (["--no-requeue", "--requeue-on-time-limit"], "USR1", None, False, True),
])
def test_options_accepted(argv, signal, grace, requeue, on_time_limit):
    args = parse(["--checkpoint-dir", "/shared/ckpt", *argv])
    assert (args.checkpoint_dir, args.signal, args.grace_period, args.requeue,
            args.requeue_on_time_limit) == ("/shared/ckpt", signal, grace, requeue,
                                            on_time_limit)


@pytest.mark.parametrize("argv, said", [
    (["--signal", "FOO"], "--signal='FOO': not a signal name"),
    (["--signal", "USR1@x"], "--signal"),
    (["--grace-period", "-1"], "--grace-period=-1.0: expected seconds (a number >= 0)"),
    (["--grace-period", "nan"], "--grace-period=nan: expected seconds (a number >= 0)"),
    (["--signal", "USR1@120", "--grace-period", "119"],
     "--grace-period=119.0 and --signal='USR1@120' say different things: give the seconds "
     "once."),
    (["--signal", "USR1@120", "--grace-period", "121"], "say different things"),
    (["--checkpoint-every", "100"], "--checkpoint-every saves into --checkpoint-dir, which is "
     "not given, and MPI_RESOLVER_CHECKPOINT_DIR is not set: give the directory"),
])
def test_bad_options_are_a_usage_error_naming_the_option(argv, said, capsys, monkeypatch):
    monkeypatch.delenv("MPI_RESOLVER_CHECKPOINT_DIR", raising=False)
    with pytest.raises(SystemExit) as stop:
        parse(argv)
    assert stop.value.code == 2
    assert said in capsys.readouterr().err


@pytest.mark.parametrize("argv, variable, expected", [
    pytest.param(["--checkpoint-dir", "/shared/a"], "/shared/b", "/shared/a", id="the flag wins"),
    pytest.param([], " /shared/b ", "/shared/b", id="else the variable, stripped"),
    pytest.param([], "", None, id="an empty variable is not set"),
    pytest.param([], None, None, id="neither: no checkpoints"),
])
def test_the_checkpoint_dir_is_the_package_s(argv, variable, expected, monkeypatch):
    monkeypatch.delenv("MPI_RESOLVER_CHECKPOINT_DIR", raising=False)
    if variable is not None:
        monkeypatch.setenv("MPI_RESOLVER_CHECKPOINT_DIR", variable)
    assert parse(argv).checkpoint_dir == expected


def test_both_examples_use_the_shared_options():
    """One definition: neither script defines the options or the check itself."""
    root = Path(__file__).resolve().parents[2] / "examples"
    for script in ("train.py", "train_ps.py"):
        text = (root / script).read_text()
        assert "add_long_job_options(p, " in text and "check_long_job_options(p, args)" in text
        assert '"--no-requeue"' not in text and "def check_" not in text, script


@pytest.mark.parametrize("script", ["train.py", "train_jax.py", "train_jax_loop.py"])
def test_the_examples_take_the_port_from_the_variable_by_default(script, monkeypatch):
    """No --port-base: None, which the resolver reads as MPI_RESOLVER_PORT_BASE, else 8888
    (a default of 8888 here would override MPI_RESOLVER_PORT_BASE=auto)."""
    monkeypatch.syspath_prepend(str(ROOT / "examples"))
    spec = importlib.util.spec_from_file_location(f"_example_{script[:-3]}",
                                                  ROOT / "examples" / script)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.parse_args([]).port_base is None
    assert module.parse_args(["--port-base", "auto"]).port_base == "auto"
    assert "$MPI_RESOLVER_PORT_BASE" in (ROOT / "examples" / script).read_text()


@pytest.mark.parametrize("script", ["train_jax.py", "train_jax_loop.py"])
def test_the_jax_examples_always_say_the_steps_done(script):
    text = (ROOT / "examples" / script).read_text()
    said = [ln for ln in text.splitlines() if 'say(f"steps done: ' in ln]
    assert len(said) == 2 and all(ln.startswith("        say(") or ln.startswith("    say(")
                                  for ln in said), said
    assert said[-1].startswith("    say("), said  # the end's line, outside any if


def train_py():
    """Returns examples/train.py as a module (its parse_args)."""
    spec = importlib.util.spec_from_file_location("_example_train", ROOT / "examples" /
                                                  "train.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("argv, variable, expected", [
    pytest.param([], None, True, id="in the background by default"),
    pytest.param(["--no-checkpoint-async"], None, False, id="the flag"),
    pytest.param([], "0", False, id="the variable"),
    pytest.param(["--checkpoint-async"], "0", True, id="the flag wins"),
])
def test_train_py_s_background_saves(argv, variable, expected, monkeypatch):
    monkeypatch.syspath_prepend(str(ROOT / "examples"))
    monkeypatch.delenv("MPI_RESOLVER_CHECKPOINT_ASYNC", raising=False)
    if variable is not None:
        monkeypatch.setenv("MPI_RESOLVER_CHECKPOINT_ASYNC", variable)
    args = train_py().parse_args(["--checkpoint-dir", "/shared/c", *argv])
    assert args.checkpoint_async is expected


@pytest.mark.parametrize("argv, said", [
    (["--extra-state-mib", "1.5", "--checkpoint-dir", "/c"],
     "--extra-state-mib: '1.5': expected a whole number of MiB (0 or more), e.g. 100"),
    (["--extra-state-mib", "-1", "--checkpoint-dir", "/c"], "expected a whole number of MiB"),
    (["--extra-state-mib", "10"], "--extra-state-mib 10: it is saved into --checkpoint-dir, "
     "which is not given, and MPI_RESOLVER_CHECKPOINT_DIR is not set"),
    (["--extra-state-mib", "10", "--fit", "--checkpoint-dir", "/c"],
     "--extra-state-mib 10: the custom loop's checkpoints hold it, not --fit's backup"),
    (["--checkpoint-dir", "/c", "--no-checkpoint-async", "--checkpoint-async=x"],
     "argument --checkpoint-async/--no-checkpoint-async: ignored explicit argument 'x'"),
])
def test_train_py_refuses_bad_state_sizes(argv, said, capsys, monkeypatch):
    monkeypatch.syspath_prepend(str(ROOT / "examples"))
    monkeypatch.delenv("MPI_RESOLVER_CHECKPOINT_DIR", raising=False)
    with pytest.raises(SystemExit) as stop:
        train_py().parse_args(argv)
    assert stop.value.code == 2
    assert said in capsys.readouterr().err


@pytest.mark.parametrize("argv, mib", [([], 0), (["--extra-state-mib", "0"], 0),
                                       (["--extra-state-mib", " 100"], 100)])
def test_train_py_takes_whole_mib(argv, mib, monkeypatch):
    monkeypatch.syspath_prepend(str(ROOT / "examples"))
    assert train_py().parse_args(["--checkpoint-dir", "/c", *argv]).extra_state_mib == mib
