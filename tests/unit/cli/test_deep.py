"""check --deep's command line (cli/deep.py, cli/args.py): --framework and its errors, which
rehearsal runs, and how a rank ends after a failed one (MPI_Finalize or not, os._exit or a
return). The rehearsals for real: tests/cluster/test_deep.py (TensorFlow),
tests/jax/test_deep.py (JAX)."""

from __future__ import annotations

import sys
import types

import pytest

from mpi_resolver.cli import deep as cli_deep
from mpi_resolver.cli.args import parse_args
from mpi_resolver.rehearsal.deep_check import DeepReport, RankOutcome

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("argv, error", [
    pytest.param(["check", "--framework", "jax"], "mpi-resolver: error: --framework jax chooses "
                 "the framework --deep rehearses: add --deep", id="without --deep"),
    pytest.param(["check", "--framework", "tensorflow"], "--framework tensorflow chooses the "
                 "framework --deep rehearses: add --deep", id="the default, without --deep"),
    pytest.param(["check", "--deep", "--framework", "mxnet"], "argument --framework: invalid "
                 "choice: 'mxnet' (choose from 'tensorflow', 'jax')", id="unknown framework"),
    pytest.param(["check", "--deep", "--framework", "jax", "--signal", "USR1"], "--signal is "
                 "checked by TensorFlow's rehearsal only (--framework tensorflow)",
                 id="--signal with jax"),
])
def test_framework_errors_name_the_option_and_the_fix(capsys, argv, error):
    with pytest.raises(SystemExit) as e:
        parse_args(argv)
    assert e.value.code == 2
    assert error in capsys.readouterr().err


@pytest.mark.parametrize("argv, framework", [
    pytest.param(["check", "--deep"], "tensorflow", id="default: TensorFlow, as before"),
    pytest.param(["check", "--deep", "--framework", "jax"], "jax", id="jax"),
    pytest.param(["check", "--deep", "--framework", "tensorflow", "--signal", "USR1"],
                 "tensorflow", id="tensorflow with --signal"),
    pytest.param(["check"], "tensorflow", id="check alone"),
])
def test_framework_with_deep(argv, framework):
    args = parse_args(argv)
    assert args.framework == framework
    assert args.connect == args.deep


def _args(framework, deep=True):
    return types.SimpleNamespace(deep=deep, framework=framework, collective="ring",
                                 signal=None, timeout=5.0)


@pytest.mark.parametrize("framework, module, name, called", [
    pytest.param("jax", "mpi_resolver.rehearsal.jax_deep", "run_jax_deep", "jax", id="jax"),
    pytest.param("tensorflow", "mpi_resolver.rehearsal.deep_tf", "run_deep", "tf",
                 id="tensorflow"),
])
def test_the_framework_s_rehearsal_runs(monkeypatch, framework, module, name, called):
    __import__(module)
    given = []
    monkeypatch.setattr(sys.modules[module], name, lambda *a: given.append(a) or called)
    connect = types.SimpleNamespace(failures=[], gathered=True)
    res, opts = types.SimpleNamespace(num_tasks=2), object()
    args = _args(framework)
    args.signal = "USR1"
    assert cli_deep.run_deep_check(args, res, opts, connect) == called
    assert given == [(res, opts) if framework == "jax" else (res, opts, "ring", "USR1")]
    assert cli_deep.run_deep_check(_args(framework, deep=False), res, None, connect) is None


@pytest.mark.parametrize("framework, words, collective", [
    ("jax", "JAX's processes would wait for them", "jax"),
    ("tensorflow", "TensorFlow's workers would wait for them", "ring"),
])
def test_failed_connections_skip_the_rehearsal_in_the_framework_s_words(framework, words,
                                                                        collective):
    connect = types.SimpleNamespace(failures=["a pair"], gathered=True)
    report = cli_deep.run_deep_check(_args(framework), types.SimpleNamespace(num_tasks=2),
                                     None, connect)
    assert report.note == f"the connections above failed, and {words} for ever."
    assert (report.ok, report.collective) == (False, collective)
    assert (report.outcomes, report.ranks, report.timeout, report.seconds, report.gathered) \
        == ([], 2, 5.0, 0.0, True)


OK = RankOutcome(0, "node1", "ok", "all-reduce", times={"all-reduce": 1.0})
STUCK = RankOutcome(0, "node1", "stuck", "import jax", "did not finish within 8 s")


def _report(outcome, **kw):
    return DeepReport([outcome], 2, "jax", 8.0, 9.0, gathered=True, **kw)


@pytest.mark.parametrize("report, mpi, ends, finalized", [
    pytest.param(None, True, False, False, id="no --deep: returns"),
    pytest.param(_report(OK), True, False, False, id="deep OK: returns, as before"),
    pytest.param(_report(STUCK), False, False, False, id="failed, no MPI, no thread: returns"),
    pytest.param(_report(STUCK, left_running=True), False, True, False,
                 id="no MPI, a stuck thread: exits at once"),
    pytest.param(_report(STUCK), True, True, True,
                 id="failed under MPI: MPI_Finalize as the others, then exits"),
    pytest.param(_report(STUCK, left_running=True), True, True, True,
                 id="a stuck thread under MPI: MPI_Finalize too, then exits"),
    pytest.param(_report(STUCK, lost=True), True, True, False,
                 id="a rank lost at a gather: exits without MPI_Finalize, which waits for it"),
])
def test_how_a_rank_ends_after_deep(monkeypatch, report, mpi, ends, finalized):
    from mpi_resolver.exchange import transport

    calls = []
    monkeypatch.setattr(transport, "mpi_initialized", lambda: mpi)
    monkeypatch.setattr(transport, "finalize", lambda: calls.append("finalize"))
    monkeypatch.setattr(cli_deep.faulthandler, "dump_traceback_later",
                        lambda seconds, exit: calls.append(("watchdog", seconds, exit)))
    monkeypatch.setattr(cli_deep.faulthandler, "enable",
                        lambda all_threads: calls.append(("stacks on a crash", all_threads)))

    def exit_(status):
        calls.append(("exit", status))
        raise SystemExit(status)

    monkeypatch.setattr(cli_deep.os, "_exit", exit_)
    if ends:
        with pytest.raises(SystemExit):
            cli_deep.end_after_deep(report, 1)
    else:
        assert cli_deep.end_after_deep(report, 1) == 1
    watched = [("stacks on a crash", True), ("watchdog", cli_deep.FINALIZE_WAIT, True),
               "finalize"] if finalized else []
    assert calls == watched + ([("exit", 1)] if ends else [])


@pytest.mark.parametrize("mpi, ends", [(True, True), (False, False)])
def test_after_an_exchange_timeout_a_rank_under_mpi_exits_at_once(monkeypatch, mpi, ends):
    from mpi_resolver.exchange import transport

    monkeypatch.setattr(transport, "mpi_initialized", lambda: mpi)
    monkeypatch.setattr(cli_deep.os, "_exit", lambda status: (_ for _ in ()).throw(
        SystemExit(status)))
    if ends:
        with pytest.raises(SystemExit) as e:
            cli_deep.end_lost(2)
        assert e.value.code == 2
    else:
        assert cli_deep.end_lost(2) == 2
