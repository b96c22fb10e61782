"""JAX's node-local tier in one process (no partner): a save that does not fit in what is free
or cannot be written goes to the checkpoint directory instead, said in one line, and the
training goes on; a local part that cannot be read is passed over for the checkpoint
directory's newest, with one warning; with the local directory's steps gone, the restore
takes the checkpoint directory's. Two nodes and the partner's copy: test_local_tier.py."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from mpi_resolver.long_jobs import ledger
from tests.jax.test_edge import clean_env

pytestmark = pytest.mark.jax

#: Steps to argv[1], a local save every 2 steps, every third to the checkpoint directory;
#: argv[2] says what goes wrong: "full" (10 bytes free from the second save on), "unwritable"
#: (the local directory's step 4 a file), or nothing.
ALONE = """import json, os, sys
from mpi_resolver.jax import initialize
initialize(port_base="auto")
import jax.numpy as jnp
from mpi_resolver.jax import LongJob
from mpi_resolver.long_jobs import local_tier
job = LongJob("ck", checkpoint_every=2, shared_every=3, local_dir=os.path.abspath("local"),
              checkpoint_async=False)
if sys.argv[2] == "full":
    local_tier.LocalTier.free = lambda self: 10
if sys.argv[2] == "unwritable":
    os.makedirs("local", exist_ok=True)
    open("local/4", "w").close()
step, state = job.restore({"w": jnp.zeros(2)})
print(json.dumps({"start": step, "w": float(state["w"][0])}), flush=True)
while step < int(sys.argv[1]):
    step += 1
    state = {"w": state["w"] + 1}
    job.step_done(step, state)
"""


def saves(ck: Path) -> list:
    return [(r["step"], r["checkpoint"]) for r in ledger.read(str(ck)) if r["event"] == "save"]


@pytest.mark.parametrize("trouble, said", [
    ("full", "mpi_resolver: the node-local save at step 4 is not whole (process 0: {local} "
             "has 10 bytes free, too few for "),
    ("unwritable", "mpi_resolver: the node-local save at step 4 is not whole (process 0: "),
])
def test_a_save_the_tier_cannot_take_goes_to_the_checkpoint_directory(
        jax_python: str, tmp_path: Path, trouble: str, said: str) -> None:
    p = _run(jax_python, tmp_path, "5", trouble)
    assert p.returncode == 0, p.stderr[-3000:]
    assert said.format(local=tmp_path / "local") in p.stderr, p.stderr[-3000:]
    assert "): saved to ck instead" in p.stderr, p.stderr[-3000:]
    assert saves(tmp_path / "ck") == [(2, "2 (node-local)"), (4, "4")]  # the training goes on


def test_the_restore_passes_over_what_the_tier_cannot_give(jax_python: str,
                                                            tmp_path: Path) -> None:
    p = _run(jax_python, tmp_path, "8", "")  # local 2, 4, 6 (and shared), 8
    assert p.returncode == 0, p.stderr[-3000:]
    assert saves(tmp_path / "ck") == [(2, "2 (node-local)"), (4, "4 (node-local)"), (6, "6"),
                                      (8, "8 (node-local)")]
    (tmp_path / "local" / "8" / "part-0").write_bytes(b"torn")
    p = _run(jax_python, tmp_path, "8", "")
    assert p.returncode == 0, p.stderr[-3000:]
    assert json.loads(p.stdout.splitlines()[0]) == {"start": 6, "w": 6.0}, p.stdout
    assert "mpi_resolver: the local tier's step 8 could not be read (process 0: " in p.stderr
    assert "restoring from the shared directory" in p.stderr, p.stderr[-3000:]


def test_without_the_local_steps_the_checkpoint_directory_s_newest(jax_python: str,
                                                                    tmp_path: Path) -> None:
    p = _run(jax_python, tmp_path, "8", "")
    assert p.returncode == 0, p.stderr[-3000:]
    for step in (6, 8):
        (tmp_path / "local" / str(step) / "part-0").unlink()
    p = _run(jax_python, tmp_path, "8", "")
    assert json.loads(p.stdout.splitlines()[0]) == {"start": 6, "w": 6.0}, p.stderr[-3000:]
    assert "node-local tier" not in p.stderr, p.stderr[-3000:]


def _run(python: str, tmp_path: Path, steps: str, trouble: str):
    return subprocess.run([python, "-c", ALONE, steps, trouble], capture_output=True,
                          text=True, timeout=120, env=clean_env(), cwd=tmp_path)
