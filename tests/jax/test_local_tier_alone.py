"""JAX's node-local tier in one process (no partner): a save that does not fit in what is free
or cannot be written goes to the checkpoint directory instead, said in one line, and the
training goes on; a local part that cannot be read is passed over for the checkpoint
directory's newest, with one warning; with the local directory's steps gone, the restore
takes the checkpoint directory's. The same with the tier's writes in the background
(jax/tier_saves), where a save the tier could not take sends the next one to the checkpoint
directory too. Two nodes and the partner's copy: test_local_tier.py."""

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
#: (the local directory's step 4 a file), or nothing; argv[3] "async": the tier's writes in the
#: background.
ALONE = """import json, os, sys
from mpi_resolver.jax import initialize
initialize(port_base="auto")
import jax.numpy as jnp
from mpi_resolver.jax import LongJob
from mpi_resolver.long_jobs import local_tier
job = LongJob("ck", checkpoint_every=2, shared_every=3, local_dir=os.path.abspath("local"),
              checkpoint_async=sys.argv[3] == "async")
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


@pytest.mark.parametrize("trouble, expected", [
    ("full", [(2, "2 (node-local)"), (6, "6"), (8, "8")]),  # every local save from 4 on fails
    ("unwritable", [(2, "2 (node-local)"), (6, "6"), (8, "8 (node-local)")]),
])
def test_in_the_background_a_save_the_tier_cannot_take_sends_the_next_to_the_directory(
        jax_python: str, tmp_path: Path, trouble: str, expected: list) -> None:
    """Step 4's local write fails in the background: 4 is lost, the next save (6, the third,
    shared anyway) goes to ck; with every later one failing too, 8 goes to ck as well."""
    p = _run(jax_python, tmp_path, "9", trouble, "async")
    assert p.returncode == 0, p.stderr[-3000:]
    assert "mpi_resolver: the node-local save at step 4 is not whole (process 0: " in p.stderr
    assert "): the next save goes to ck too" in p.stderr, p.stderr[-3000:]
    assert sorted(saves(tmp_path / "ck")) == expected  # in the order the writes ended


def test_a_background_write_is_recorded_with_its_stall_and_write(jax_python: str,
                                                                 tmp_path: Path) -> None:
    """The last one (step 8) still in flight when the script ends: written at the exit."""
    p = _run(jax_python, tmp_path, "8", "", "async")
    assert p.returncode == 0, p.stderr[-3000:]
    records = [r for r in ledger.read(str(tmp_path / "ck")) if r["event"] == "save"]
    assert sorted((r["step"], r["checkpoint"]) for r in records) == [
        (2, "2 (node-local)"), (4, "4 (node-local)"), (6, "6"), (8, "8 (node-local)")]
    local = [r for r in records if "node-local" in r["checkpoint"]]
    assert all(r["write"] > 0 and r["seconds"] > 0 for r in local), local
    assert sorted(p.name for p in (tmp_path / "local").iterdir() if p.name.isdigit()) == \
        ["8"]  # the newest whole local step alone kept


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_the_restore_passes_over_what_the_tier_cannot_give(jax_python: str, tmp_path: Path,
                                                            mode: str) -> None:
    p = _run(jax_python, tmp_path, "8", "", mode)  # local 2, 4, 6 (and shared), 8
    assert p.returncode == 0, p.stderr[-3000:]
    assert sorted(saves(tmp_path / "ck")) == [(2, "2 (node-local)"), (4, "4 (node-local)"),
                                              (6, "6"), (8, "8 (node-local)")]
    (tmp_path / "local" / "8" / "part-0").write_bytes(b"torn")
    p = _run(jax_python, tmp_path, "8", "", mode)
    assert p.returncode == 0, p.stderr[-3000:]
    assert json.loads(p.stdout.splitlines()[0]) == {"start": 6, "w": 6.0}, p.stdout
    assert "mpi_resolver: the local tier's step 8 could not be read (process 0: " in p.stderr
    assert "restoring from the shared directory" in p.stderr, p.stderr[-3000:]


def test_without_the_local_steps_the_checkpoint_directory_s_newest(jax_python: str,
                                                                    tmp_path: Path) -> None:
    p = _run(jax_python, tmp_path, "8", "")
    assert p.returncode == 0, p.stderr[-3000:]
    assert not (tmp_path / "local" / "6").exists()  # the newest local step alone is kept
    (tmp_path / "local" / "8" / "part-0").unlink()
    p = _run(jax_python, tmp_path, "8", "")
    assert json.loads(p.stdout.splitlines()[0]) == {"start": 6, "w": 6.0}, p.stderr[-3000:]
    assert "node-local tier" not in p.stderr, p.stderr[-3000:]


def _run(python: str, tmp_path: Path, steps: str, trouble: str, mode: str = "sync"):
    return subprocess.run([python, "-c", ALONE, steps, trouble, mode], capture_output=True,
                          text=True, timeout=120, env=clean_env(), cwd=tmp_path)
