"""Missing dependencies, and what the package may touch, watched while it runs: no shell, no
file written, one environment variable."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

import pytest

from mpi_resolver.core.errors import MissingDependencyError, ResolutionError
from tests.conftest import own_network, write_fake_nvidia_smi

pytestmark = pytest.mark.unit
ROOT = pathlib.Path(__file__).resolve().parents[2]


def test_import_starts_neither_tensorflow_nor_mpi():
    code = ("import sys, mpi_resolver; from mpi_resolver import ResolutionError; "
            "print('tensorflow' in sys.modules, 'mpi4py' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=dict(os.environ, PYTHONPATH=str(ROOT)), check=True).stdout
    assert out.split() == ["False", "False"]


def test_missing_mpi4py_says_what_to_install(monkeypatch):
    from mpi_resolver.exchange import transport as mpi

    monkeypatch.setitem(sys.modules, "mpi4py", None)  # makes `from mpi4py import MPI` fail
    with pytest.raises(MissingDependencyError, match="pip install mpi4py") as info:
        mpi.import_mpi()
    assert isinstance(info.value, ResolutionError) and isinstance(info.value, ImportError)


def test_missing_tensorflow_says_what_to_install(tmp_path):
    fake = tmp_path / "tensorflow"
    fake.mkdir()
    (fake / "__init__.py").write_text("raise ImportError('No module named tensorflow')")
    code = ("from mpi_resolver import MPIClusterResolver, MissingDependencyError\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=dict(os.environ, PYTHONPATH=f"{tmp_path}{os.pathsep}{ROOT}"))
    assert proc.returncode != 0
    assert "MissingDependencyError" in proc.stderr and "pip install tensorflow" in proc.stderr


# A whole resolution under audit hooks (sys.addaudithook): what the package really does.
AUDITED = r"""
import json, os, sys
import mpi_resolver.cli.main, mpi_resolver.exchange.transport  # before auditing
import mpi_resolver.resolve.tf_resolver
from mpi_resolver import MPIClusterResolver

events = []
WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC

def hook(event, args):
    if event == "subprocess.Popen":
        events.append(["run", [os.fsdecode(a) for a in args[1]]])
    elif event in ("os.putenv", "os.unsetenv"):
        events.append([event, os.fsdecode(args[0])])
    elif event == "socket.bind":
        events.append([event, list(args[1]) if isinstance(args[1], tuple) else repr(args[1])])
    elif event in ("os.system", "os.exec", "os.posix_spawn", "os.spawn", "os.fork", "os.remove",
                   "os.rename", "os.mkdir", "shutil.rmtree", "socket.connect"):
        events.append([event, repr(args)[:200]])
    elif event == "open":
        path, mode, flags = args
        if (mode and any(c in mode for c in "wax+")) or (flags or 0) & WRITE_FLAGS:
            events.append(["write", os.fsdecode(path) if path is not None else None])

before = dict(os.environ)
sys.addaudithook(hook)
resolver = MPIClusterResolver()
spec = resolver.cluster_spec().as_dict()
resolver.master(); resolver.tf_config(); resolver.num_accelerators()
status = mpi_resolver.cli.main.main(["show", "--source", "slurm", "--json"])
changed = sorted(k for k in set(before) | set(os.environ) if before.get(k) != os.environ.get(k))
print("AUDIT " + json.dumps({"events": events, "changed": changed, "status": status,
                             "spec": spec}))
"""


def _audited(tmp_path, extra_env):
    bin_dir = write_fake_nvidia_smi(tmp_path / "bin", 4)
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "PYTHONPATH": str(ROOT),
           "PYTHONDONTWRITEBYTECODE": "1", "TF_CPP_MIN_LOG_LEVEL": "3",
           "SLURM_PROCID": "1", "SLURM_STEP_NUM_TASKS": "2", "SLURM_STEP_NODELIST": "n1",
           "SLURM_STEP_TASKS_PER_NODE": "2", **extra_env}
    proc = subprocess.run(own_network([sys.executable, "-c", AUDITED]), capture_output=True,
                          text=True, env=env, cwd=tmp_path, timeout=120)
    line = [x for x in proc.stdout.splitlines() if x.startswith("AUDIT ")]
    assert proc.returncode == 0 and line, proc.stdout[-2000:] + proc.stderr[-3000:]
    return json.loads(line[0][len("AUDIT "):])


@pytest.mark.parametrize("extra_env, runs", [
    pytest.param({}, [["nvidia-smi", "--list-gpus"]],
                 id="nothing says how many GPUs: nvidia-smi once (the CLI after it sees the "
                    "CUDA_VISIBLE_DEVICES the resolver set)"),
    pytest.param({"CUDA_VISIBLE_DEVICES": "0,1,2,3"}, [],
                 id="CUDA_VISIBLE_DEVICES says: no process at all"),
])
def test_a_whole_resolution_runs_no_shell_writes_no_file_and_sets_one_variable(
        tmp_path, extra_env, runs):
    audit = _audited(tmp_path, extra_env)
    assert audit["spec"] == {"worker": ["n1:8888", "n1:8889"]}
    events = audit["events"]
    assert [e[1] for e in events if e[0] == "run"] == runs  # an argument list, not a shell
    assert {e[1] for e in events if e[0] == "os.putenv"} == {"CUDA_VISIBLE_DEVICES"}
    # The rank's own port is checked (a listen, closed at once), by the resolver and the CLI.
    assert [e[1] for e in events if e[0] == "socket.bind"] == [["", 8889], ["", 8889]]
    assert [e for e in events if e[0] not in ("run", "os.putenv", "socket.bind")] == []
    assert audit["changed"] == ["CUDA_VISIBLE_DEVICES"]
    assert list(tmp_path.iterdir()) == [tmp_path / "bin"]


def test_the_audit_sees_what_it_guards(tmp_path):
    """The hook is not blind: a write, a shell and an environment change are all caught."""
    bad = AUDITED.replace("status = mpi_resolver.cli.main.main(",
                          "open('x', 'w').close(); os.system('true'); os.environ['Z'] = '1'\n"
                          "status = mpi_resolver.cli.main.main(")
    bin_dir = write_fake_nvidia_smi(tmp_path / "bin", 4)
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "PYTHONPATH": str(ROOT),
           "PYTHONDONTWRITEBYTECODE": "1", "TF_CPP_MIN_LOG_LEVEL": "3", "SLURM_PROCID": "0",
           "SLURM_STEP_NUM_TASKS": "1", "SLURM_STEP_NODELIST": "n1",
           "SLURM_STEP_TASKS_PER_NODE": "1", "CUDA_VISIBLE_DEVICES": ""}
    proc = subprocess.run(own_network([sys.executable, "-c", bad]), capture_output=True,
                          text=True, env=env, cwd=tmp_path, timeout=120)
    audit = json.loads([x for x in proc.stdout.splitlines() if x.startswith("AUDIT ")][0][6:])
    kinds = {e[0] for e in audit["events"]}
    assert {"write", "os.system", "os.putenv"} <= kinds, audit
    assert "Z" in audit["changed"]
