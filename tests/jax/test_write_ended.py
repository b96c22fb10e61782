"""How a JAX save's write ends, recorded: a script that ends without LongJob.complete() while a
periodic save is written in the background (the write thread is a daemon, cut at the exit):
the exit waits for the write and records it, so the next run resumes from it (the clean
clone's Keras resume once restored the step before: the last save's write, slow under load,
was cut at the exit); a write whose manifest then fails (the directory made read-only
meanwhile) is a failed save, at once or in the background, and the training goes on; writes
that fail in the background back the saves off as saves that fail at once do."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from mpi_resolver.long_jobs import ledger
from tests.jax.test_edge import run

pytestmark = pytest.mark.jax

#: Three steps, a periodic save in the background at step 3 whose write takes 3 s more
#: (Orbax's wait held back), the script's end at once after it.
SLOW_END = '''
import sys, time
from mpi_resolver.jax import initialize
initialize(port_base="auto")
import jax.numpy as jnp
from mpi_resolver.jax import LongJob
from mpi_resolver.jax.orbax_checkpoints import OrbaxCheckpoints
committed = OrbaxCheckpoints._committed
def slow(self, step):
    time.sleep(3.0)
    return committed(self, step)
OrbaxCheckpoints._committed = slow
job = LongJob(sys.argv[1], checkpoint_every=3)
step, state = job.restore({"w": jnp.zeros(2)})
print("start", step, flush=True)
for step in range(step + 1, 4):
    state = {"w": state["w"] + 1}
    job.step_done(step, state)
print("ends", flush=True)
'''


def test_the_exit_waits_for_the_write_in_flight_and_records_it(jax_python: str,
                                                               tmp_path: Path) -> None:
    ck = str(tmp_path / "ck")
    p = run(jax_python, SLOW_END.replace("sys.argv[1]", repr(ck)))
    assert p.returncode == 0 and "start 0\n" in p.stdout, p.stderr[-3000:]
    with open(os.path.join(ck, "mpi_resolver.json")) as f:
        assert json.load(f)["step"] == 3
    saves = [(r["step"], r["kind"]) for r in ledger.read(ck) if r["event"] == "save"]
    assert saves == [(3, "periodic")], saves
    p = run(jax_python, SLOW_END.replace("sys.argv[1]", repr(ck)))
    assert p.returncode == 0 and "start 3\n" in p.stdout, p.stderr[-3000:]


def test_the_wait_for_the_write_in_flight_is_the_next_save_s_cost(jax_python: str,
                                                                  tmp_path: Path) -> None:
    """Saves at steps 2 and 4, each write 3 s, the steps fast: the save at 4 waits for the
    write of 2, and that wait is what the training paid for it (the ledger's seconds, the
    schedule's stall), not step time."""
    ck = str(tmp_path / "ck")
    p = run(jax_python, SLOW_END.replace("sys.argv[1]", repr(ck))
            .replace("checkpoint_every=3", "checkpoint_every=2").replace(", 4)", ", 6)"))
    assert p.returncode == 0 and "ends\n" in p.stdout, p.stderr[-3000:]
    saves = [(r["step"], r["seconds"]) for r in ledger.read(ck) if r["event"] == "save"]
    assert [step for step, _ in saves] == [2, 4] and saves[1][1] >= 2.0, saves


MANIFEST_FAILS = '''
import sys
from mpi_resolver.jax import initialize
initialize(port_base="auto")
import jax.numpy as jnp
from mpi_resolver.jax import LongJob, long_jobs
write = long_jobs.write_manifest
def once(directory, manifest):
    if manifest["step"] == 3:
        raise OSError(30, "Read-only file system")
    return write(directory, manifest)
long_jobs.write_manifest = once
job = LongJob(sys.argv[1], checkpoint_every=3, checkpoint_async=sys.argv[2] == "1")
step, state = job.restore({"w": jnp.zeros(2)})
for step in range(1, 8):
    state = {"w": state["w"] + 1}
    job.step_done(step, state)
print("trained", step, flush=True)
'''


@pytest.mark.parametrize("background", ["0", "1"])
def test_a_write_whose_manifest_fails_is_a_failed_save(jax_python: str, tmp_path: Path,
                                                       background: str) -> None:
    ck = str(tmp_path / "ck")
    p = run(jax_python, MANIFEST_FAILS.replace("sys.argv[1]", repr(ck))
            .replace("sys.argv[2]", repr(background)))
    assert p.returncode == 0 and "trained 7\n" in p.stdout, p.stderr[-3000:]
    assert "the checkpoint at step 3 was not saved ([Errno 30] Read-only file system); the " \
        "last one that restores is kept" in p.stderr, p.stderr[-3000:]
    records = [(r["event"], r["step"]) for r in ledger.read(ck) if r["event"] != "restore"]
    assert records == [("save_failed", 3), ("save", 6)], records


#: Saves every 0.3 s in the background, each write failing in Orbax's thread where argv[2]
#: says so; the plans' intervals once there are four.
WRITES_FAIL = '''
import sys, time
from mpi_resolver.jax import initialize
initialize(port_base="auto")
import jax.numpy as jnp
from mpi_resolver.jax import LongJob
from mpi_resolver.jax.orbax_checkpoints import OrbaxCheckpoints
def refused(self, step):
    raise OSError(122, "Disk quota exceeded")
if sys.argv[2] == "1":
    OrbaxCheckpoints._committed = refused
job = LongJob(sys.argv[1], checkpoint_every="0.3s")
step, state = job.restore({"w": jnp.zeros(2)})
while job.schedule is None or len(job.schedule.plans) < 4:
    step += 1
    state = {"w": state["w"] + 1}
    job.step_done(step, state)
    time.sleep(0.005)
print("plans", [round(p.seconds, 2) for p in job.schedule.plans], flush=True)
'''


@pytest.mark.parametrize("fails, plans", [("1", "[0.3, 0.3, 0.6, 1.2]"),
                                          ("0", "[0.3, 0.3, 0.3, 0.3]")])
def test_writes_that_fail_in_the_background_back_the_saves_off(jax_python: str,
                                                               tmp_path: Path, fails: str,
                                                               plans: str) -> None:
    ck = str(tmp_path / "ck")
    p = run(jax_python, WRITES_FAIL.replace("sys.argv[1]", repr(ck))
            .replace("sys.argv[2]", repr(fails)))
    assert p.returncode == 0, p.stderr[-3000:]
    assert f"plans {plans}\n" in p.stdout, p.stdout + p.stderr[-3000:]
