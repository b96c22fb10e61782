"""The docs' Python blocks: the smallest use runs for real on two MPI ranks; the long-job
snippets (a model and a loop left to the reader: `...`) compile and call the public names
with parameters those names take (tests/tf/test_preemption.py and examples/train.py run the
same calls for real)."""

from __future__ import annotations

import ast
import inspect
import json
import subprocess
import sys
from typing import List

import pytest

import mpi_resolver
from tests.conftest import own_network
from tests.docs.blocks import block
from tests.test_mpirun import mpirun_env


def imported_names(source: str) -> List[str]:
    """Returns the names the snippet imports from mpi_resolver."""
    return [alias.name for node in ast.walk(ast.parse(source))
            if isinstance(node, ast.ImportFrom) and node.module == "mpi_resolver"
            for alias in node.names]


@pytest.mark.mpirun
def test_the_smallest_use_runs_on_two_ranks():
    """README.md's and getting-started's snippet under `mpirun -n 2` (no Slurm: rank, size
    and hosts from MPI), in a network namespace of its own (the default ports 8888, 8889)."""
    snippet = block("smallest-use")
    assert block("readme-smallest-use") == snippet
    # One write per rank's line: print() writes the text and the newline apart, and mpirun
    # forwards each write as it comes, so two ranks' lines could interleave on one line (seen
    # under load: "Extra data" from json).
    script = snippet + ("\nimport json, sys\nsys.stdout.write(json.dumps([resolver.task_id, "
                        "resolver.cluster_spec().as_dict(), strategy.num_replicas_in_sync]) "
                        "+ '\\n')\nsys.stdout.flush()\n")
    proc = subprocess.run(own_network(["mpirun", "-n", "2", sys.executable, "-c", script]),
                          capture_output=True, text=True, timeout=300, env=mpirun_env())
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    lines = [json.loads(ln) for ln in proc.stdout.splitlines() if ln.startswith("[")]
    assert sorted(task for task, _, _ in lines) == [0, 1], proc.stdout
    assert all(len(spec["worker"]) == 2 and replicas == 2 for _, spec, replicas in lines)


@pytest.mark.tf
@pytest.mark.parametrize("name", ["long-jobs-custom-loop", "long-jobs-fit"])
def test_the_long_job_snippets_compile_and_use_public_names(name):
    source = block(name)
    compile(source, name, "exec")
    names = imported_names(source)
    assert names, name
    for imported in names:
        assert imported in mpi_resolver.__all__, imported
        assert getattr(mpi_resolver, imported) is not None  # the lazy name imports


@pytest.mark.tf
def test_the_long_job_snippets_pass_parameters_the_names_take():
    config = inspect.signature(mpi_resolver.SlurmTerminationConfig)
    assert "signal" in config.parameters
    handler = inspect.signature(mpi_resolver.SlurmTerminationConfig.handler)
    assert list(handler.parameters)[1:] == ["cluster_resolver", "checkpoint", "checkpoint_dir"]
    assert 'config.handler(resolver, checkpoint, "/shared/ckpt")' in block(
        "long-jobs-custom-loop")
    callback = inspect.signature(mpi_resolver.SlurmBackupAndRestore)
    assert "signal" in callback.parameters
    assert 'SlurmBackupAndRestore("/shared/ckpt", signal="USR1@120")' in block("long-jobs-fit")
