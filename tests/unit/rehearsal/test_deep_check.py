"""check --deep without TensorFlow: the outcomes and the report, the GPU and sum checks, the
proxy hint, the phases against their deadline (a phase that never returns), ranks as threads
of one ThreadWorld for the gathers between phases, and the command line's edge."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time

import pytest

from mpi_resolver.cli import main as cli
from mpi_resolver.cli.args import parse_args
from mpi_resolver.cli.deep import run_deep_check
from mpi_resolver.rehearsal.connect_check import ConnectReport
from mpi_resolver.rehearsal.deep_check import (ALL_REDUCE, FAILED, GPUS, IMPORT, NOT_DONE, OK,
                                               RESOLVE, SIGNALS, STRATEGY, STUCK, DeepFailure,
                                               DeepReport, MainThreadPhase, PhaseRunner, Progress,
                                               RankOutcome, expected_sum, first_line, gpu_problem,
                                               outcome_of, proxy_hint, run_phases, sum_problem)
from mpi_resolver.rehearsal.deep_tf import Gather, TfRehearsal, check_jobs
from mpi_resolver.core.errors import ResolutionError
from mpi_resolver.placement.layout import build_layout_runs
from mpi_resolver.options import make_options
from tests.unit.jobs import ThreadWorld, each_rank

pytestmark = pytest.mark.unit

TIMES = {IMPORT: 3.21, RESOLVE: 3.3, GPUS: 3.31, STRATEGY: 3.8, ALL_REDUCE: 3.94}


def done(rank: int, host: str, **more) -> RankOutcome:
    """Returns the outcome of a rank that got the all-reduce's sum (2 replicas)."""
    return RankOutcome(rank, host, OK, ALL_REDUCE, gpus=0, version="2.21.0", replicas=2,
                       times=dict(TIMES), **more)


# ------------------------------------------------------------------------------ checks
@pytest.mark.parametrize("listed, given, visible, error, fix", [
    pytest.param(0, 0, "", None, None, id="CPU: none given, none listed"),
    pytest.param(2, 2, "0,1", None, None, id="as many as given"),
    pytest.param(0, 1, "3", "TensorFlow lists 0 GPUs, the resolver gave 1 "
                 "(CUDA_VISIBLE_DEVICES=3)", "a CUDA build of TensorFlow",
                 id="fewer: a CPU build or no driver"),
    pytest.param(4, 1, None, "TensorFlow lists 4 GPUs, the resolver gave 1 "
                 "(CUDA_VISIBLE_DEVICES=(unset))", "CUDA started before CUDA_VISIBLE_DEVICES",
                 id="more: CUDA started before the variable was set"),
])
def test_gpu_problem(listed, given, visible, error, fix):
    problem = gpu_problem(listed, given, visible)
    if error is None:
        assert problem is None
    else:
        assert problem is not None and problem.error == error and fix in problem.fix


@pytest.mark.parametrize("replicas, total", [(1, 1), (2, 3), (4, 10), (8, 36)])
def test_expected_sum_of_ids_plus_one(replicas, total):
    assert expected_sum(replicas) == total == sum(r + 1 for r in range(replicas))


@pytest.mark.parametrize("values, replicas, wrong", [
    pytest.param([3.0], 2, None, id="one local replica, right"),
    pytest.param([10.0, 10.0], 4, None, id="two local replicas, right"),
    pytest.param([2.0], 2, "the all-reduce gave [2.0], expected 3 (2 replicas)", id="wrong"),
    pytest.param([10.0, 6.0], 4, "gave [6.0], expected 10", id="one local replica wrong"),
    pytest.param([], 2, "gave nothing, expected 3", id="no local results"),
])
def test_sum_problem(values, replicas, wrong):
    problem = sum_problem(values, replicas)
    assert (problem is None) == (wrong is None)
    if wrong is not None:
        assert wrong in problem.error and "same number of GPUs" in problem.fix


@pytest.mark.parametrize("env, hosts, hint", [
    pytest.param({}, ["node1"], None, id="no proxy"),
    pytest.param({"HTTP_PROXY": "http://p:3128"}, ["node1"], None,
                 id="upper case: gRPC does not read it"),
    pytest.param({"http_proxy": "http://p:3128"}, ["node1", "node2"],
                 "gRPC sends node1, node2 through http_proxy=http://p:3128: add them to "
                 "no_proxy", id="lower case: every host through it"),
    pytest.param({"https_proxy": "http://s:1", "http_proxy": "http://p:2"}, ["n1"],
                 "through https_proxy=http://s:1", id="https_proxy before http_proxy"),
    pytest.param({"grpc_proxy": "http://g:1", "https_proxy": "http://s:1"}, ["n1"],
                 "through grpc_proxy=http://g:1", id="grpc_proxy first"),
    pytest.param({"http_proxy": "http://p:1", "no_proxy": "node1,node2"}, ["node1", "node2"],
                 None, id="no_proxy names them"),
    pytest.param({"http_proxy": "http://p:1", "no_proxy": "node1"}, ["node1", "node2"],
                 "gRPC sends node2 through", id="no_proxy names one of them"),
    pytest.param({"http_proxy": "http://p:1", "no_proxy": ".cluster"}, ["n1.cluster"], None,
                 id="a domain in no_proxy"),
    pytest.param({"http_proxy": "http://p:1", "no_proxy": "*"}, ["n1"], "gRPC sends n1",
                 id="no_proxy=*: not a wildcard for gRPC (_proxies)"),
    pytest.param({"http_proxy": "http://p:1", "no_proxy": "n1", "no_grpc_proxy": "n2"}, ["n1"],
                 "gRPC sends n1 through", id="no_grpc_proxy before no_proxy"),
    pytest.param({"http_proxy": "http://p:1"}, [f"n{i}" for i in range(6)],
                 "n0, n1, n2, n3 ... through", id="many hosts: the first four"),
])
def test_proxy_hint(env, hosts, hint):
    found = proxy_hint(env, hosts)
    assert (found is None) == (hint is None), found
    if hint is not None:
        assert hint in found


def test_first_line_keeps_one_short_line():
    assert first_line(RuntimeError("one\ntwo")) == "one"
    assert first_line(RuntimeError("x" * 200), limit=10) == "xxxxxxx..."
    assert first_line(RuntimeError("")) == ""


# ------------------------------------------------------------------------------ outcomes
class DeadlineExceededError(Exception):
    """Named as TensorFlow's timeout (waiting for the other workers)."""


def progress_at(stage: str) -> Progress:
    p = Progress(0.0, stage=stage, times={IMPORT: 3.0}, gpus=0, version="2.21.0")
    return p


@pytest.mark.parametrize("result, stage, state, error, fix", [
    pytest.param(None, GPUS, OK, None, None, id="done"),
    pytest.param(NOT_DONE, IMPORT, STUCK, "did not finish within 30 s", "raise --timeout",
                 id="not done by the deadline"),
    pytest.param(DeepFailure("TensorFlow lists 0 GPUs", "a CUDA build"), GPUS, FAILED,
                 "TensorFlow lists 0 GPUs", "a CUDA build", id="a check that failed"),
    pytest.param(ImportError("No module named 'tensorflow'\nmore"), IMPORT, FAILED,
                 "ImportError: No module named 'tensorflow'", "install TensorFlow",
                 id="an exception: its first line and the stage's fix"),
    pytest.param(DeadlineExceededError("Barrier timed out"), STRATEGY, STUCK,
                 "DeadlineExceededError: Barrier timed out", "waits for every worker",
                 id="TensorFlow's timeout: stuck waiting for the others"),
])
def test_outcome_of(result, stage, state, error, fix):
    o = outcome_of(result, progress_at(stage), 1, "node2", 30.0)
    assert (o.rank, o.host, o.state, o.stage, o.error) == (1, "node2", state, stage, error)
    assert (o.fix is None) if fix is None else (fix in o.fix)
    assert (o.gpus, o.version, o.times) == (0, "2.21.0", {IMPORT: 3.0})


@pytest.mark.parametrize("stage, result, added", [
    (STRATEGY, NOT_DONE, True), (ALL_REDUCE, RuntimeError("x"), True),
    (IMPORT, NOT_DONE, False), (STRATEGY, None, False)])
def test_the_proxy_hint_goes_with_failures_that_talk_to_the_workers(stage, result, added):
    o = outcome_of(result, progress_at(stage), 0, "n1", 5.0, hint="add them to no_proxy")
    assert ("add them to no_proxy" in (o.fix or "")) == added


def test_an_outcome_travels_as_json():
    o = done(3, "node2", error=None)
    assert RankOutcome.from_json(json.loads(json.dumps(o.as_json()))) == o
    assert o.finished and not RankOutcome(0, "n", OK, GPUS).finished
    assert not RankOutcome(0, "n", FAILED, ALL_REDUCE, times={ALL_REDUCE: 1.0}).finished


# ------------------------------------------------------------------------------ report
def test_a_good_report_gives_each_rank_s_time_to_the_first_all_reduce():
    report = DeepReport([done(0, "node1"), done(1, "node2")], 2, "ring", 30.0, 4.06, True)
    assert report.ok and report.missing == []
    text = report.text()
    assert text.startswith("DEEP OK: MultiWorkerMirroredStrategy (TensorFlow 2.21.0, "
                           "collective ring) on the job's 2 rank(s), 2 replica(s): the first "
                           "all-reduce gave 3, as expected, in 4.1 s.")
    rows = text.splitlines()[1:]
    assert rows[0].split() == ["rank", "host", "GPUs", "TensorFlow", "imported", "strategy",
                               "built", "first", "all-reduce"]
    assert rows[1].split() == ["0", "node1", "0", "3.2", "3.8", "3.9"]
    assert rows[2].split() == ["1", "node2", "0", "3.2", "3.8", "3.9"]
    found = report.as_json()
    assert found["ok"] is True and found["missing"] == [] and found["seconds"] == 4.06
    assert found["outcomes"][1]["times"][ALL_REDUCE] == 3.94 and json.dumps(found)


def test_a_rank_that_failed_is_named_and_the_others_shown_as_waiting():
    failed = RankOutcome(1, "node2", FAILED, IMPORT, "ImportError: broken", "install TensorFlow")
    waiting = RankOutcome(0, "node1", OK, IMPORT, times={IMPORT: 3.0})
    report = DeepReport([waiting, failed], 2, "auto", 30.0, 3.5, True)
    assert not report.ok and report.missing == [1]
    lines = report.text().splitlines()
    assert lines[0] == ("DEEP FAILED: rank(s) 1 did not get to the first all-reduce "
                        "(--timeout 30 s):")
    assert lines[1].split()[:4] == ["ranks", "hosts", "state", "stage"]
    assert lines[2].split()[:3] == ["1", "node2", "failed"]  # who could not join first
    assert "ImportError: broken" in lines[2] and "install TensorFlow" in lines[2]
    assert lines[3].split()[:6] == ["0", "node1", "ok", "done:", "import", "tensorflow"]
    assert report.as_json()["missing"] == [1]


def test_stuck_ranks_are_named_where_none_failed_and_alike_ranks_share_a_row():
    stuck = [RankOutcome(r, f"node{r // 2 + 1}", STUCK, STRATEGY, "DeadlineExceededError: x",
                         "a gRPC proxy") for r in range(4)]
    report = DeepReport(stuck, 4, "ring", 20.0, 19.0, True)
    assert report.missing == [0, 1, 2, 3]
    text = report.text()
    assert "rank(s) 0-3 did not get to the first all-reduce" in text
    assert text.splitlines()[2].split()[:5] == ["0-3", "node1", "+1", "more", "stuck"]
    with_failed = DeepReport(stuck[:3] + [RankOutcome(3, "node2", FAILED, STRATEGY, "e", "f")],
                             4, "ring", 20.0, 19.0, True)
    assert with_failed.missing == [3]  # the one that failed; the stuck ones waited for it


def test_without_mpi_a_rank_reports_its_own():
    own = RankOutcome(1, "node2", STUCK, STRATEGY, "did not finish within 5 s", "a proxy")
    report = DeepReport([own], 2, "ring", 5.0, 5.2, False)
    assert report.text().startswith("DEEP FAILED: this rank's own outcome (without MPI each "
                                    "rank reports its own):")
    good = DeepReport([done(0, "node1")], 2, "ring", 5.0, 4.0, False)
    assert good.ok and "on this rank, 2 replica(s)" in good.text()


def test_not_run_and_a_note():
    skipped = DeepReport([], 4, "auto", 30.0, 0.0, True, note="the connections failed.")
    assert not skipped.ok and skipped.text() == "DEEP NOT RUN: the connections failed."
    assert skipped.as_json()["note"] == "the connections failed." and not skipped.missing
    noted = DeepReport([done(0, "n1")], 2, "ring", 30.0, 9.0, False, note="gather timed out")
    assert not noted.ok and noted.text().endswith("\nnote: gather timed out")


# ------------------------------------------------------------------------------ phases
def test_a_phase_that_never_returns_is_left_running_at_the_deadline():
    never = threading.Event()
    runner = PhaseRunner(Progress(0.0))
    answer = []
    start = time.monotonic()
    waiter = threading.Thread(target=lambda: answer.append(
        runner.run(lambda progress: never.wait(), start + 0.3)), daemon=True)
    waiter.start()
    waiter.join(5.0)  # a runner that waited for the phase would hang the suite
    took = time.monotonic() - start
    never.set()
    assert answer == [NOT_DONE] and runner.left_running
    assert 0.3 <= took < 1.0, took


def test_phases_run_in_their_thread_in_order_and_stop_at_the_first_that_fails():
    ran, threads = [], set()

    def phase(name, fail=False):
        def run(progress):
            ran.append(name)
            threads.add(threading.current_thread().name)
            progress.begin(name)
            if fail:
                raise RuntimeError(f"{name} broke")
            progress.done()
        return run

    progress = Progress(time.monotonic())
    runner = PhaseRunner(progress)
    everyone = run_phases([phase(IMPORT), phase(RESOLVE, fail=True), phase(STRATEGY)], runner,
                          time.monotonic() + 5, lambda own: [own],
                          lambda r: outcome_of(r, progress, 0, "n1", 5.0))
    assert ran == [IMPORT, RESOLVE] and threads == {"mpi-resolver-deep"}
    assert [(o.state, o.stage, o.error) for o in everyone] == [
        (FAILED, RESOLVE, "RuntimeError: MPIClusterResolver broke")]
    assert not runner.left_running


def _world_phases(world, stuck_rank=None, failing_rank=None, seconds=0.5):
    """Runs two phases on each rank of ``world`` with Gather between them; returns every
    rank's (outcomes, second phase ran, seconds taken)."""
    never = threading.Event()

    def one(rank):
        progress, second = Progress(time.monotonic()), []

        def first(p):
            p.begin(IMPORT)
            if rank == stuck_rank:
                never.wait()
            if rank == failing_rank:
                raise ImportError("broken")
            p.done()

        runner = PhaseRunner(progress)
        start = time.monotonic()
        everyone = run_phases([first, lambda p: second.append(rank)], runner,
                              start + seconds, Gather(world.transport(rank)),
                              lambda r: outcome_of(r, progress, rank, f"n{rank}", seconds))
        return everyone, second, time.monotonic() - start

    release = threading.Timer(5.0, never.set)  # a runner that waited would hang the suite
    release.start()
    try:
        return each_rank(world.size, one)
    finally:
        release.cancel()
        never.set()


def test_every_rank_gets_every_outcome_between_phases():
    results = _world_phases(ThreadWorld(3))
    for everyone, second, _ in results:
        assert [(o.rank, o.state) for o in everyone] == [(0, OK), (1, OK), (2, OK)]
        assert len(second) == 1  # every rank went on to the second phase


def test_a_rank_that_fails_stops_every_rank_before_the_next_phase():
    results = _world_phases(ThreadWorld(3), failing_rank=1, seconds=5.0)
    for everyone, second, took in results:
        assert [(o.rank, o.state) for o in everyone] == [(0, OK), (1, FAILED), (2, OK)]
        assert second == [] and took < 2.0  # at once, not at the deadline
        assert DeepReport(everyone, 3, "ring", 5.0, took, True).missing == [1]


def test_a_rank_stuck_in_a_phase_is_named_by_every_rank_at_the_deadline():
    results = _world_phases(ThreadWorld(2), stuck_rank=1, seconds=0.5)
    for everyone, second, took in results:
        assert [(o.rank, o.state) for o in everyone] == [(0, OK), (1, STUCK)]
        assert second == [] and took < 1.5
        assert everyone[1].error == "did not finish within 0.5 s"


# ------------------------------------------------------------------------------ edges
class FakeResolution:
    def __init__(self, own):
        self.own_gpus = own


class FakeResolver:
    def __init__(self, own):
        self.resolution = FakeResolution(own)


@pytest.mark.parametrize("own, listed, fails", [
    pytest.param(("0",), 0, True, id="TensorFlow lists none of the one given"),
    pytest.param(("0", "1"), 2, False, id="as many as given"),
    pytest.param((), 1, True, id="more than given"),
])
def test_the_rehearsal_checks_the_gpus_tensorflow_lists(monkeypatch, own, listed, fails):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", ",".join(own))
    rehearsal = TfRehearsal(make_options(), "ring", time.monotonic() + 5, None,
                            make_resolver=lambda: FakeResolver(own), list_gpus=lambda: listed)
    progress = Progress(time.monotonic())
    if fails:
        with pytest.raises(DeepFailure, match=f"TensorFlow lists {listed} GPUs, the resolver "
                                              f"gave {len(own)} "):
            rehearsal.resolve(progress)
        assert progress.stage == GPUS and GPUS not in progress.times
    else:
        rehearsal.resolve(progress)
        assert progress.gpus == 2 and GPUS in progress.times


def test_jobs_the_strategy_does_not_take_are_an_error():
    check_jobs(build_layout_runs([("n1", 2)], jobs={"chief": 1, "worker": 1}, port_base=9000))
    with pytest.raises(ResolutionError, match="has 'ps'"):
        check_jobs(build_layout_runs([("n1", 2)], jobs={"ps": 1, "worker": 1}, port_base=9000))


def test_deep_implies_connect_and_belongs_to_check():
    args = parse_args(["check", "--deep"])
    assert args.deep and args.connect and args.collective == "auto"
    assert parse_args(["check", "--collective", "nccl"]).collective == "nccl"
    assert not parse_args(["check"]).connect
    with pytest.raises(SystemExit):
        parse_args(["show", "--deep"])
    with pytest.raises(SystemExit):
        parse_args(["check", "--collective", "mpi"])


def test_deep_is_not_run_after_failed_connections():
    args = parse_args(["check", "--deep"])
    failed = ConnectReport([object()], 2, 2, "every pair of nodes", 1.0, True)  # type: ignore

    class Res:
        num_tasks = 2

    report = run_deep_check(args, Res(), "auto", failed)  # type: ignore[arg-type]
    assert report is not None and report.text().startswith("DEEP NOT RUN: the connections")
    assert run_deep_check(parse_args(["check", "--connect"]), Res(), "auto",
                          failed) is None  # type: ignore[arg-type]


def test_a_thread_left_in_tensorflow_ends_the_process_at_once(monkeypatch):
    exits = []
    monkeypatch.setattr(cli.os, "_exit", exits.append)
    stuck = DeepReport([RankOutcome(0, "n1", STUCK, STRATEGY)], 1, "ring", 1.0, 1.0, False,
                       left_running=True)
    assert cli._status(deep=stuck) == 1 and exits == [1]
    failed = DeepReport([RankOutcome(0, "n1", FAILED, IMPORT)], 1, "ring", 1.0, 1.0, False)
    assert cli._status(deep=failed) == 1 and exits == [1]  # no thread left: a normal return
    assert cli._status() == 0
    assert cli._status(deep=DeepReport([done(0, "n1")], 1, "ring", 1.0, 1.0, False)) == 0


def test_check_json_carries_deep():
    deep = DeepReport([done(0, "n1")], 1, "ring", 1.0, 1.0, False)
    found = json.loads(cli._report_check(None, [], None, True, None, None, deep))
    assert found["deep"]["ok"] is True and found["connect"] is None
    assert json.loads(cli._report_check(None, [], None, True, None))["deep"] is None


def test_the_command_line_and_deep_s_modules_do_not_import_tensorflow():
    code = ("import sys, mpi_resolver.cli.main, mpi_resolver.rehearsal.deep_tf\n"
            "import mpi_resolver.rehearsal.deep_check\n"
            "print('tensorflow' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=60, check=True).stdout
    assert out.strip() == "False"


# ------------------------------------------------------------ each line's limit, both sides
from mpi_resolver.rehearsal.deep_check import _groups, _times  # noqa: E402 - the private helpers


@pytest.mark.parametrize("length, shown", [
    pytest.param(160, "x" * 160, id="160 characters: whole"),
    pytest.param(161, "x" * 157 + "...", id="161: cut to 157 and '...'"),
])
def test_first_line_limit(length, shown):
    assert first_line(RuntimeError("x" * length)) == shown


def test_progress_done_notes_the_seconds_since_the_start():
    p = Progress(10.0, stage=IMPORT)
    p.done(clock=lambda: 11.23456)
    assert p.times == {IMPORT: 1.235}


def test_the_proxy_hint_joins_the_stage_s_fix_or_stands_alone():
    stuck = outcome_of(NOT_DONE, progress_at(STRATEGY), 0, "n1", 5.0, hint="HINT")
    assert stuck.fix is not None and stuck.fix.endswith("; HINT") and stuck.fix != "; HINT"
    alone = outcome_of(DeepFailure("broken", None), progress_at(STRATEGY), 0, "n1", 5.0,
                       hint="HINT")
    assert alone.fix == "HINT"


def test_an_outcome_carries_the_replicas_in_sync():
    p = progress_at(ALL_REDUCE)
    p.replicas = 4
    assert outcome_of(None, p, 0, "n1", 5.0).replicas == 4


def test_rows_put_failed_ranks_first_then_stuck_then_the_rest():
    failed = RankOutcome(2, "n3", FAILED, IMPORT, "ImportError: x", "fix it", None, None, None,
                         {})
    stuck = RankOutcome(0, "n1", STUCK, STRATEGY, "late", "wait", None, None, None, {})
    fine = RankOutcome(1, "n2", OK, IMPORT, None, None, None, None, None, {IMPORT: 1.0})
    rows = _groups([stuck, fine, failed])
    assert [(r["ranks"], r["state"], r["stage"]) for r in rows] == [
        ("2", FAILED, IMPORT), ("0", STUCK, STRATEGY), ("1", OK, f"done: {IMPORT}")]


def test_times_of_a_stage_not_reached_are_none():
    o = RankOutcome(0, "n1", OK, IMPORT, None, None, 0, "2.21.0", None, {IMPORT: 2.5})
    assert _times(o) == {"rank": 0, "host": "n1", "GPUs": 0, "TensorFlow imported": "2.5",
                         "strategy built": None, "first all-reduce": None}


def test_no_phases_no_outcomes():
    runner = PhaseRunner(Progress(0.0))
    assert run_phases([], runner, time.monotonic() + 1, lambda o: [o], lambda r: None) == []


def test_report_json_keys_and_a_note_only_where_there_is_one():
    report = DeepReport([done(0, "n1")], 1, "ring", 30.0, 2.34567, True)
    assert report.as_json() == {"ok": True, "ranks": 1, "collective": "ring", "timeout": 30.0,
                                "seconds": 2.346, "gathered": True, "missing": [],
                                "note": None, "signals": None,
                                "outcomes": [done(0, "n1").as_json()]}
    failed = DeepReport([RankOutcome(0, "n1", FAILED, IMPORT, "e", "f", None, None, None, {})],
                        1, "ring", 30.0, 1.0, True)
    assert "note:" not in failed.text()
    assert failed.text().splitlines()[-1].startswith("0      n1")


@pytest.mark.parametrize("ranks, more", [
    pytest.param(100, None, id="100 ranks: every row"),
    pytest.param(101, "... and 1 more rows", id="101: the table says one more"),
])
def test_report_tables_show_at_most_100_rows(ranks, more):
    ok = DeepReport([done(r, f"n{r}") for r in range(ranks)], ranks, "ring", 30.0, 1.0, True)
    bad = DeepReport([RankOutcome(r, f"n{r}", FAILED, IMPORT, f"e{r}", "f", None, None, None,
                                  {}) for r in range(ranks)], ranks, "ring", 30.0, 1.0, True)
    for text in (ok.text(), bad.text()):
        assert (text.splitlines()[-1] == more) if more else ("more rows" not in text), text[-200:]


# ------------------------------------------------------------------------------ signals
def test_a_good_report_says_which_signals_reach_the_watcher():
    report = DeepReport([done(0, "node1")], 1, "ring", 30.0, 4.06, True,
                        signals="SIGUSR1 and SIGTERM")
    assert report.text().startswith(
        "DEEP OK: MultiWorkerMirroredStrategy (TensorFlow 2.21.0, collective ring) on the "
        "job's 1 rank(s), 2 replica(s): the first all-reduce gave 3, as expected, in 4.1 s; "
        "after it, SIGUSR1 and SIGTERM reach mpi_resolver's watcher on every rank. Seconds")
    assert report.as_json()["signals"] == "SIGUSR1 and SIGTERM"


def test_a_signal_that_does_not_reach_fails_the_rank_at_its_stage():
    failure = DeepFailure("SIGUSR1's handler is now libx.so (/l/libx.so)", "use USR2")
    outcome = outcome_of(failure, Progress(0.0, stage=SIGNALS, times=dict(TIMES)), 0, "n1",
                         30.0, hint="a proxy hint")
    assert (outcome.state, outcome.stage, outcome.error, outcome.fix) == (
        FAILED, SIGNALS, "SIGUSR1's handler is now libx.so (/l/libx.so)", "use USR2")
    assert not outcome.finished  # the all-reduce went well, the signal did not
    report = DeepReport([outcome], 1, "ring", 30.0, 1.0, True, signals="SIGUSR1 and SIGTERM")
    assert not report.ok and report.missing == [0]
    assert "Slurm's signals" in report.text() and "use USR2" in report.text()


def test_main_thread_phases_run_here_and_now():
    runner = PhaseRunner(Progress(time.monotonic()))
    where = []
    ok = MainThreadPhase(lambda p: where.append(threading.current_thread().name))
    assert runner.run(ok, time.monotonic() - 1) is None  # no deadline: it runs anyway
    assert where == [threading.main_thread().name]
    error = ValueError("no")
    assert runner.run(MainThreadPhase(lambda p: (_ for _ in ()).throw(error)), 0.0) is error
    runner.close()


@pytest.mark.parametrize("signal, names", [
    pytest.param(None, ["load", "resolve", "strategy", "all_reduce"], id="no --signal"),
    pytest.param("USR1", ["load", "resolve", "strategy", "watch", "all_reduce", "reach"],
                 id="--signal: watch after the strategy, check after the all-reduce"),
])
def test_the_rehearsal_s_phases(signal, names):
    from mpi_resolver.long_jobs.signals import parse_signal

    rehearsal = TfRehearsal(make_options(), "ring", 0.0, None,
                            signal=signal and parse_signal(signal))
    phases = rehearsal.phases()
    assert [getattr(p, "phase", p).__name__ for p in phases] == names
    assert [isinstance(p, MainThreadPhase) for p in phases] == [
        n in ("watch", "reach") for n in names]


def test_every_phase_gets_the_runner_s_progress():
    """Threaded or in the main thread, a phase is handed the rank's one Progress (it writes
    its stage and times there)."""
    progress = Progress(0.0)
    runner = PhaseRunner(progress)
    seen = []
    assert runner.run(seen.append, time.monotonic() + 5) is None
    assert runner.run(MainThreadPhase(seen.append), time.monotonic() + 5) is None
    assert len(seen) == 2 and all(p is progress for p in seen), seen
