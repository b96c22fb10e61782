"""mpi-resolver exec: what the program's environment holds, what it says, and how it replaces
the process (os.execvpe faked here; real runs under srun in tests/cluster/test_exec.py
and under mpirun in tests/test_mpirun.py)."""

from __future__ import annotations

import json

import pytest

from mpi_resolver.cli import main as cli
from mpi_resolver.cli import exec as _exec
from mpi_resolver.core.errors import ResolutionError
from mpi_resolver.options import make_options
from mpi_resolver.resolve.resolution import resolve_job

pytestmark = pytest.mark.unit


STEP = {"SLURM_PROCID": "1", "SLURM_STEP_NUM_TASKS": "2", "SLURM_STEP_NODELIST": "node1",
        "SLURM_STEP_TASKS_PER_NODE": "2", "SLURMD_NODENAME": "node1", "SLURM_LOCALID": "1",
        "SLURM_GTIDS": "0,1", "CUDA_VISIBLE_DEVICES": "0,1,2,3", "SLURM_GPUS_ON_NODE": "4"}
CONFIG = {"cluster": {"worker": ["node1:8888", "node1:8889"]},
          "task": {"type": "worker", "index": 1}}


@pytest.mark.parametrize("auto_set_gpu, gpus", [(True, "2,3"), (False, "0,1,2,3")])
def test_program_env_adds_tf_config_and_this_rank_s_gpus(auto_set_gpu, gpus):
    res = resolve_job(make_options(source="slurm"), STEP)
    env = _exec.program_env({**STEP, "HOME": "/root"}, res, auto_set_gpu)
    assert env["TF_CONFIG"] == json.dumps(CONFIG, separators=(",", ":"))  # compact, one line
    assert env["CUDA_VISIBLE_DEVICES"] == gpus  # unchanged without auto_set_gpu
    assert env["HOME"] == "/root" and env["SLURM_PROCID"] == "1"


class FakeExec:
    """Stands for os.execvpe: records the call, or fails as a missing program does."""

    def __init__(self, error=None):
        self.calls, self.error = [], error

    def __call__(self, file, args, env):
        self.calls.append((file, args, env))
        if self.error:
            raise self.error
        raise SystemExit(0)  # exec never returns


def _cli_exec(monkeypatch, env, *args, error=None):
    for key in list(__import__("os").environ):
        monkeypatch.delenv(key)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    fake = FakeExec(error)
    monkeypatch.setattr(_exec.os, "execvpe", fake)
    finalized = []
    monkeypatch.setattr("mpi_resolver.exchange.transport.finalize", lambda: finalized.append(True))
    try:
        status = cli.main(["exec", *args])
    except SystemExit as e:
        status = e.code
    return status, fake.calls, finalized


@pytest.mark.parametrize("args, program", [
    pytest.param(["--", "python", "train.py", "--epochs", "3"],
                 ["python", "train.py", "--epochs", "3"], id="after --"),
    pytest.param(["python", "train.py"], ["python", "train.py"], id="without --"),
    pytest.param(["--gpus-per-task", "1", "--", "python", "-c", "--"],
                 ["python", "-c", "--"], id="options first, a later -- is the program's"),
])
def test_cli_exec_replaces_itself_with_the_program(monkeypatch, args, program):
    status, calls, finalized = _cli_exec(monkeypatch, STEP, *args)
    assert status == 0 and finalized == [True]
    (file, argv, env), = calls
    assert (file, argv) == (program[0], program)
    assert json.loads(env["TF_CONFIG"]) == CONFIG
    expected = "1" if "--gpus-per-task" in args else "2,3"
    assert env["CUDA_VISIBLE_DEVICES"] == expected


def test_cli_exec_no_auto_set_gpu_leaves_the_gpus(monkeypatch):
    _, calls, _ = _cli_exec(monkeypatch, STEP, "--no-auto-set-gpu", "--", "python")
    assert calls[0][2]["CUDA_VISIBLE_DEVICES"] == "0,1,2,3"


@pytest.mark.parametrize("args", [[], ["--"], ["--gpus-per-task", "1", "--"]])
def test_cli_exec_without_a_program_is_a_usage_error(monkeypatch, capsys, args):
    status, calls, _ = _cli_exec(monkeypatch, STEP, *args)
    assert status == 2 and calls == []
    assert "exec needs a program: mpi-resolver exec -- python train.py" in capsys.readouterr().err


def test_cli_exec_of_a_missing_program_names_it(monkeypatch, capsys):
    error = FileNotFoundError(2, "No such file or directory")
    status, calls, _ = _cli_exec(monkeypatch, STEP, "--", "trian.py", error=error)
    assert status == 2 and len(calls) == 1
    assert ("rank 1: exec could not run 'trian.py': No such file or directory; check the program's "
            "name and PATH.") in capsys.readouterr().err


def test_run_program_raises_a_resolution_error_where_exec_fails(monkeypatch):
    monkeypatch.setattr(_exec.os, "execvpe", FakeExec(PermissionError(13, "Permission denied")))
    monkeypatch.setattr("mpi_resolver.exchange.transport.finalize", lambda: None)
    with pytest.raises(ResolutionError, match="exec could not run './x': Permission denied"):
        _exec.run_program(["./x"], {})


def test_cli_exec_prints_the_resolution_s_notes_on_rank_0(monkeypatch, capsys):
    """Two nodes from Slurm's variables alone: the note that other nodes' GPUs are unchecked."""
    two = {**STEP, "SLURM_PROCID": "0", "SLURM_LOCALID": "0", "SLURM_STEP_NODELIST": "node[1-2]",
           "SLURM_STEP_TASKS_PER_NODE": "1(x2)", "SLURM_STEP_NUM_TASKS": "2", "SLURM_GTIDS": "0"}
    status, calls, _ = _cli_exec(monkeypatch, two, "--source", "slurm", "--", "python")
    assert status == 0 and len(calls) == 1
    err = capsys.readouterr().err
    assert err.startswith("mpi-resolver: note: the other nodes' GPUs are not checked without MPI")
    assert "warning" not in err  # no MPI started: nothing to warn of
    _cli_exec(monkeypatch, {**two, "SLURM_PROCID": "1", "SLURMD_NODENAME": "node2"},
              "--source", "slurm", "--", "python")
    assert capsys.readouterr().err == ""  # rank 1 says nothing
