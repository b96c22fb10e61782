"""The command line's reports from Slurm's variables alone (no MPI): GPUs and how they were
given. Launches under real srun and mpirun are in tests/cluster and tests/test_mpirun.py."""

from __future__ import annotations

import json
import re

import pytest

from mpi_resolver.cli import main as cli
from mpi_resolver.exchange.records import RankRecord

pytestmark = pytest.mark.unit

STEP = {"SLURM_PROCID": "0", "SLURM_STEP_NUM_TASKS": "2", "SLURM_STEP_NODELIST": "node1",
        "SLURM_STEP_TASKS_PER_NODE": "2", "SLURMD_NODENAME": "node1", "SLURM_LOCALID": "0",
        "SLURM_GTIDS": "0,1", "PATH": "/nonexistent"}


def run(monkeypatch, capsys, env, command, *args):
    """Returns (exit status, stdout) of `mpi-resolver COMMAND --source slurm ARGS` in ``env``
    (and nothing else)."""
    for key in list(__import__("os").environ):
        monkeypatch.delenv(key)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    status = cli.main([command, "--source", "slurm", *args])
    return status, capsys.readouterr().out


def show(monkeypatch, capsys, env, *args):
    """Returns (exit status, stdout) of `mpi-resolver show --source slurm ARGS` in ``env``."""
    return run(monkeypatch, capsys, env, "show", *args)


@pytest.mark.parametrize("extra, gpus, kinds, binding", [
    pytest.param({"CUDA_VISIBLE_DEVICES": "2,3", "SLURMD_TRES_BIND": "gpu:per_task:2"},
                 ["2,3", "?"], ["own", "unknown"], "SLURMD_TRES_BIND=gpu:per_task:2",
                 id="per-task binding: this rank's own, the other rank's unknown"),
    pytest.param({"CUDA_VISIBLE_DEVICES": "0,1,2,3", "SLURM_GPUS_ON_NODE": "4"},
                 ["0,1", "2,3"], ["divided", "divided"], "divided among its tasks",
                 id="the node's list divided in rank order"),
    pytest.param({"CUDA_VISIBLE_DEVICES": "0"}, ["0", "0"], ["shared", "shared"],
                 "tasks share GPUs", id="one GPU for two tasks: shared"),
    pytest.param({}, ["", ""], ["none", "none"], "no GPUs", id="CPU-only node"),
])
def test_show_json_names_every_ranks_gpus_and_how(monkeypatch, capsys, extra, gpus, kinds,
                                                  binding):
    status, out = show(monkeypatch, capsys, {**STEP, **extra}, "--json")
    report = json.loads(out)
    assert status == 0
    assert [r["gpus"] for r in report["ranks"]] == gpus
    assert [r["gpu_binding"] for r in report["ranks"]] == kinds
    assert binding in report["gpu_binding"]


def test_show_text_has_a_gpu_line_and_column(monkeypatch, capsys):
    env = {**STEP, "CUDA_VISIBLE_DEVICES": "0", "SLURMD_TRES_BIND": "gpu:single:1"}
    status, out = show(monkeypatch, capsys, env)
    assert status == 0
    assert "GPUs: each task keeps the GPUs Slurm bound to it" in out
    assert "SLURMD_TRES_BIND=gpu:single:1" in out
    rows = [line.split() for line in out.splitlines() if line.startswith(("0 ", "1 "))]
    assert rows == [["0", "node1", "worker", "0", "node1:8888", "0", "own"],
                    ["1", "node1", "worker", "1", "node1:8889", "?", "unknown"]]


def test_show_on_a_cpu_only_node_needs_no_gpus_per_node(monkeypatch, capsys):
    status, out = show(monkeypatch, capsys, STEP, "--json")
    assert status == 0
    assert any("running on CPU" in n for n in json.loads(out)["notes"])


def a_record(**fields):
    """A record of rank 0 of 1 on n1, with ``fields``."""
    return RankRecord(rank=0, size=1, host="n1", launcher=None, **fields)


@pytest.mark.parametrize("record, text", [
    pytest.param(a_record(visible=("0", "1")), "0,1", id="its list"),
    pytest.param(a_record(visible=()), "''", id="an empty list"),
    pytest.param(a_record(gpus_on_node=4), "4 (SLURM_GPUS_ON_NODE)",
                 id="Slurm's count"),
    pytest.param(a_record(probed=2), "2 (nvidia-smi)", id="nvidia-smi"),
    pytest.param(a_record(probed=("MIG-a", "MIG-b")), "MIG-a,MIG-b (nvidia-smi)",
                 id="nvidia-smi's MIG devices"),
    pytest.param(a_record(probed=0, cpu_only=True), "none (CPU-only)",
                 id="CPU-only"),
    pytest.param(a_record(), "-", id="nothing: '-'"),
])
def test_check_table_says_what_each_rank_saw_of_its_gpus(record, text):
    assert cli._gpu_text(record) == text


@pytest.mark.parametrize("value, ports", [
    pytest.param("auto", "auto", id="auto: the step's ports"),
    pytest.param("30000", [30000, 30001], id="a number"),
])
def test_port_base_takes_a_number_or_auto(monkeypatch, capsys, value, ports):
    from mpi_resolver.network.ports import auto_base
    env = {**STEP, "SLURM_JOB_ID": "51", "SLURM_STEP_ID": "2"}
    status, out = show(monkeypatch, capsys, env, "--json", "--port-base", value)
    assert status == 0
    if ports == "auto":
        ports = [auto_base("51.2", 2), auto_base("51.2", 2) + 1]
    assert json.loads(out)["cluster"]["worker"] == [f"node1:{p}" for p in ports]


@pytest.mark.parametrize("value", ["Auto", "0", "65536", "88x"])
def test_port_base_refuses_anything_else_naming_the_option(monkeypatch, capsys, value):
    with pytest.raises(SystemExit) as e:
        show(monkeypatch, capsys, STEP, "--port-base", value)
    assert e.value.code == 2
    assert f"--port-base: {value!r} is not a port (1..65535) or 'auto'" in capsys.readouterr().err


def test_check_json_reports_record_fields_only():
    """A record's serialised form, cached on it by the exchange, is not a field of the report."""
    record = a_record(visible=("0",))
    assert record.wire == record.wire  # made and cached
    report = json.loads(cli._report_check(None, [record], None, True, None))
    assert set(report["records"][0]) == {f.name for f in __import__("dataclasses").fields(record)}
    assert "wire" not in report["records"][0]


def test_help_explains_every_option_the_readme_names(capsys):
    """README: `mpi-resolver --help` explains each of these options and the three commands."""
    with pytest.raises(SystemExit) as done:
        cli.main(["--help"])
    assert done.value.code == 0
    top = capsys.readouterr().out
    for command in ("show", "check", "tf-config", "exec"):
        assert command in top
    with pytest.raises(SystemExit):
        cli.main(["show", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    for option in ("--json", "--jobs", "--port-base", "--gpus-per-node", "--gpus-per-task",
                   "--uneven-gpus", "--source", "--timeout"):
        assert re.search(rf"{option}\b[^-]*\S", text), f"{option} not explained"
    assert "GPUs for each task" in text and "'auto'" in text


@pytest.mark.parametrize("per_task, gpus", [
    pytest.param("1", ["0", "1"], id="rank i takes entry i (TensorFlow's rule)"),
    pytest.param("2", ["0,1", "2,3"], id="rank i takes entries 2i, 2i+1"),
])
def test_gpus_per_task_takes_that_many_in_rank_order(monkeypatch, capsys, per_task, gpus):
    env = {**STEP, "CUDA_VISIBLE_DEVICES": "0,1,2,3", "SLURM_GPUS_ON_NODE": "4"}
    status, out = show(monkeypatch, capsys, env, "--json", "--gpus-per-task", per_task)
    assert status == 0
    assert [r["gpus"] for r in json.loads(out)["ranks"]] == gpus


def test_gpus_per_task_more_than_a_share_is_an_error(monkeypatch, capsys):
    env = {**STEP, "CUDA_VISIBLE_DEVICES": "0,1"}
    for key in list(__import__("os").environ):
        monkeypatch.delenv(key)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    assert cli.main(["show", "--source", "slurm", "--gpus-per-task", "2"]) == 2
    assert "gpus_per_task=2" in capsys.readouterr().err


TASK_1 = {**STEP, "SLURM_PROCID": "1", "SLURM_LOCALID": "1", "CUDA_VISIBLE_DEVICES": "0,1,2,3",
          "SLURM_GPUS_ON_NODE": "4"}
CONFIG_1 = {"cluster": {"worker": ["node1:8888", "node1:8889"]},
            "task": {"type": "worker", "index": 1}}


@pytest.mark.parametrize("env, args, line", [
    pytest.param(TASK_1, ["--export"], "export TF_CONFIG='" + json.dumps(
        CONFIG_1, separators=(",", ":")) + "' CUDA_VISIBLE_DEVICES=2,3",
        id="export: TF_CONFIG and this rank's GPUs, as cluster_spec() sets them"),
    pytest.param({**STEP, "SLURM_PROCID": "1", "SLURM_LOCALID": "1"}, ["--export"],
                 "export TF_CONFIG='" + json.dumps(CONFIG_1, separators=(",", ":")) +
                 "' CUDA_VISIBLE_DEVICES=''", id="export on a CPU-only node: no GPUs, as "
                 "cluster_spec() sets"),
    pytest.param(TASK_1, ["--export", "--no-auto-set-gpu"],
                 "export TF_CONFIG='" + json.dumps(CONFIG_1, separators=(",", ":")) + "'",
                 id="export without the GPUs, as auto_set_gpu=False"),
    pytest.param(TASK_1, ["--json"],
                 json.dumps({"TF_CONFIG": CONFIG_1, "CUDA_VISIBLE_DEVICES": "2,3"}),
                 id="json: both"),
    pytest.param(TASK_1, ["--json", "--no-auto-set-gpu"],
                 json.dumps({"TF_CONFIG": CONFIG_1, "CUDA_VISIBLE_DEVICES": None}),
                 id="json without the GPUs: null"),
    pytest.param(TASK_1, [], json.dumps(CONFIG_1, separators=(",", ":")),
                 id="plain: TF_CONFIG's JSON alone, as before"),
])
def test_tf_config_carries_this_rank_s_gpus(monkeypatch, capsys, env, args, line):
    status, out = run(monkeypatch, capsys, env, "tf-config", *args)
    assert status == 0
    assert out == line + "\n"


@pytest.mark.parametrize("argv, source, slurm, verify", [
    pytest.param(["show"], "auto", True, "auto", id="show: no cross-check asked for"),
    pytest.param(["check"], "auto", True, True, id="check: the cross-check"),
    pytest.param(["check"], "auto", False, True, id="check without Slurm: still asked for"),
    pytest.param(["check", "--connect"], "auto", True, True, id="--connect in a step: both"),
    pytest.param(["check", "--connect"], "auto", False, "auto",
                 id="--connect under mpirun: the connections alone"),
    pytest.param(["check", "--connect"], "slurm", True, "auto",
                 id="--connect without MPI: the connections alone"),
    pytest.param(["check", "--checkpoint-dir", "d"], "auto", True, True,
                 id="--checkpoint-dir in a step: both"),
    pytest.param(["check", "--checkpoint-dir", "d"], "auto", False, "auto",
                 id="--checkpoint-dir under mpirun: the directory alone"),
    pytest.param(["check", "--checkpoint-dir", "d"], "slurm", True, "auto",
                 id="--checkpoint-dir without MPI: the directory alone"),
])
def test_what_check_verifies(argv, source, slurm, verify):
    from mpi_resolver.cli.args import parse_args

    env = dict(STEP) if slurm else {}
    assert cli._verify(parse_args(argv), source, env) == verify


@pytest.mark.parametrize("argv, error", [
    pytest.param(["check", "--signal", "USR1"], "mpi-resolver: error: --signal is checked by "
                 "--deep's rehearsal, after TensorFlow's first all-reduce: add --deep",
                 id="without --deep"),
    pytest.param(["check", "--deep", "--signal", "B:USR1@60"], "argument --signal: "
                 "--signal='B:USR1@60': 'B:' sends the signal to the batch shell only",
                 id="the batch shell's"),
    pytest.param(["check", "--deep", "--signal", "KILL"], "argument --signal: --signal='KILL': "
                 "SIGKILL cannot be caught", id="a signal that cannot be watched"),
])
def test_signal_is_for_deep_and_a_name_slurm_takes(capsys, argv, error):
    from mpi_resolver.cli.args import parse_args

    with pytest.raises(SystemExit) as e:
        parse_args(argv)
    assert e.value.code == 2
    assert error in capsys.readouterr().err


def test_signal_with_deep_is_the_parsed_signal():
    from mpi_resolver.cli.args import parse_args

    args = parse_args(["check", "--deep", "--signal", "usr2"])
    assert (args.signal.name, args.connect) == ("USR2", True)
    assert parse_args(["check", "--deep"]).signal is None
