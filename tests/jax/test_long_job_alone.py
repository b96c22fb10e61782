"""mpi_resolver.jax.long_jobs (LongJob), its Orbax files (orbax_checkpoints), the choice of the
checkpoint to resume from (restoring) and keras_job in .venv-jax's Python, one process, no
cluster: periodic saves at the rule's steps with the last K kept, at once and in the
background, the save on the warning signal and its exit code, the resume at the saved step
with the state, a torn newest checkpoint skipped, one of another model refused (78), the
earlier format restored once, the MPI_RESOLVER_* variables, a failing save and a failed
background write, the refusals, and Keras 3's optimizer state through a resume. The same on
two nodes, a state sharded across processes too: tests/jax/test_long_jobs.py."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest

from mpi_resolver.long_jobs import ledger
from tests.docs.blocks import block
from tests.jax.test_edge import clean_env, run

pytestmark = pytest.mark.jax

LOOP = '''
import json, os, signal, sys
from mpi_resolver.jax import initialize
initialize(port_base="auto")
import jax.numpy as jnp
from mpi_resolver.jax import LongJob
job = LongJob({args})
state = {"w": jnp.zeros(3), "n": 0}
def full_disk():  # the state read for a save that then fails, as on a full disk
    raise OSError(28, "No space left on device")
step, state = job.restore(state)
print(json.dumps({"start": step, "w": float(state["w"][0]), "n": state["n"]}), flush=True)
try:
    while step < 20:
        state = {"w": state["w"] + 1, "n": state["n"] + 1}
        step += 1
        if step == {stop_at}:
            os.kill(os.getpid(), signal.{sig})
        job.step_done(step, full_disk if step in {fail_at} else state)
except SystemExit as e:
    print(json.dumps({"exit": e.code, "files": sorted(os.listdir(job.directory))}))
    raise
print(json.dumps({"done": step, "files": sorted(os.listdir(job.directory))}))
job.complete(remove={remove})
print(json.dumps({"left": sorted(os.listdir(job.directory))}))
'''


def loop(python: str, args: str, stop_at: int = 0, sig: str = "SIGUSR1", remove: bool = False,
         fail_at: tuple = (), **env: str):
    code = (LOOP.replace("{args}", args).replace("{stop_at}", str(stop_at))
            .replace("{fail_at}", repr(tuple(fail_at)))
            .replace("{sig}", sig).replace("{remove}", str(remove)))
    p = run(python, code, **env)
    lines = [json.loads(x) for x in p.stdout.splitlines() if x.startswith("{")]
    return p, lines


#: What stays in a job's directory beside its checkpoints, and after them: the manifest, the
#: ledger and worker 0's progress file.
KEPT = ["mpi_resolver.json", "mpi_resolver.ledger.jsonl", "mpi_resolver.progress.json"]


def test_periodic_saves_the_signal_and_the_resume(jax_python: str, tmp_path: Path) -> None:
    ck = str(tmp_path / "ck")
    at_once = "checkpoint_async=False"  # each save on disk before the next step: listed
    p, lines = loop(jax_python, f"{ck!r}, checkpoint_every=3, keep=2, {at_once}", stop_at=8)
    assert p.returncode == 75, p.stderr[-3000:]
    assert lines == [{"start": 0, "w": 0.0, "n": 0},
                     {"exit": 75, "files": ["6", "8", *KEPT]}], lines
    assert "checkpoint saved on SIGUSR1; " in p.stderr and "exit code 75" in p.stderr
    p, lines = loop(jax_python, f"{ck!r}, checkpoint_every=3, keep=2, {at_once}",
                    remove=True)
    assert p.returncode == 0, p.stderr[-3000:]
    assert lines == [{"start": 8, "w": 8.0, "n": 8},  # the state at the signal's step
                     {"done": 20, "files": ["15", "18", *KEPT]},
                     {"left": KEPT}], lines  # the manifest says: completed; the ledger stays
    records = ledger.read(ck)
    assert [(r["event"], r["step"], r.get("kind")) for r in records] == [
        ("restore", 0, None), ("save", 3, "periodic"), ("save", 6, "periodic"),
        ("save", 8, "signal"), ("restore", 8, None), ("save", 9, "periodic"),
        ("save", 12, "periodic"), ("save", 15, "periodic"), ("save", 18, "periodic"),
        ("save", 20, "final"), ("completed", 20, None)], records


def test_the_signal_waits_for_the_tier_s_write_in_flight_then_saves_shared(
        jax_python: str, tmp_path: Path) -> None:
    """The node-local tier written in the background: on the signal its write in flight is
    finished and recorded first, then the signal's save goes to the checkpoint directory,
    where the next run resumes (newer than the tier's step 6)."""
    ck, local = str(tmp_path / "ck"), str(tmp_path / "local")
    args = f"{ck!r}, checkpoint_every=2, local_dir={local!r}, shared_every=100"
    p, lines = loop(jax_python, args, stop_at=7)
    assert p.returncode == 75, p.stderr[-3000:]
    assert lines[-1] == {"exit": 75, "files": ["7", *KEPT]}, lines
    saves = [(r["step"], r["checkpoint"], r["kind"]) for r in ledger.read(ck)
             if r["event"] == "save"]
    assert saves == [(2, "2 (node-local)", "periodic"), (4, "4 (node-local)", "periodic"),
                     (6, "6 (node-local)", "periodic"), (7, "7", "signal")], saves
    p, lines = loop(jax_python, args, stop_at=0)
    assert p.returncode == 0, p.stderr[-3000:]
    assert lines[0] == {"start": 7, "w": 7.0, "n": 7}, lines


def test_sigterm_ends_with_143_and_a_torn_newest_is_skipped(jax_python: str,
                                                            tmp_path: Path) -> None:
    ck = tmp_path / "ck"
    p, lines = loop(jax_python, f"{str(ck)!r}, checkpoint_every=4", stop_at=10,
                    sig="SIGTERM")
    assert p.returncode == 143 and lines[-1]["exit"] == 143, p.stderr[-3000:]
    assert "not requeued: SIGTERM ends the job" in p.stderr
    for data in (ck / "10").glob("default/**/d/*"):  # torn: a node lost during the write
        data.write_bytes(data.read_bytes()[:10])
    p, lines = loop(jax_python, f"{str(ck)!r}, checkpoint_every=4")
    assert p.returncode == 0, p.stderr[-3000:]
    assert lines[0] == {"start": 8, "w": 8.0, "n": 8}, lines
    assert f"checkpoint 10 in {ck} does not restore (" in p.stderr and \
        "resuming from 8" in p.stderr


def test_the_variables_give_what_the_script_does_not(jax_python: str, tmp_path: Path) -> None:
    """MPI_RESOLVER_CHECKPOINT_DIR, _CHECKPOINT_EVERY, _KEEP and _SIGNAL (USR2: USR1 is then
    not watched, and its default action would end the process: it is not sent)."""
    ck = tmp_path / "from_env"
    p, lines = loop(jax_python, "", stop_at=11, sig="SIGUSR2",
                    MPI_RESOLVER_CHECKPOINT_DIR=str(ck), MPI_RESOLVER_CHECKPOINT_EVERY="5",
                    MPI_RESOLVER_KEEP="1", MPI_RESOLVER_SIGNAL="USR2")
    assert p.returncode == 75, p.stderr[-3000:]
    assert lines[-1] == {"exit": 75, "files": ["11", *KEPT]}
    assert "checkpoint saved on SIGUSR2" in p.stderr
    manifest = json.loads((ck / "mpi_resolver.json").read_text())
    assert manifest["step"] == 11 and manifest["settings"] == {
        "checkpoint_every": "5 steps", "keep": 1, "checkpoint_async": True, "signal": "USR2",
        "requeue": True, "requeue_on_time_limit": False}


def test_a_failing_save_is_a_warning_and_training_goes_on(jax_python: str,
                                                          tmp_path: Path) -> None:
    """Every save fails (the disk is full): training goes on, and
    the signal's failed save ends the job with 74, not requeued (a requeue would loop from
    step 0 for ever)."""
    ck = tmp_path / "ck"
    p, lines = loop(jax_python, f"{str(ck)!r}, checkpoint_every=5", stop_at=12,
                    fail_at=(5, 10, 12))
    assert p.returncode == 74, p.stderr[-3000:]
    assert lines[0]["start"] == 0
    assert "the checkpoint at step 5 was not saved ([Errno 28] No space left on device); " \
        "the last one that restores is kept" in p.stderr
    assert "the save on SIGUSR1 failed (" in p.stderr and "and no checkpoint advanced in " \
        "this run: not requeued" in p.stderr


def test_a_failing_signal_save_after_a_periodic_one_resumes_from_it(jax_python: str,
                                                                    tmp_path: Path) -> None:
    ck = tmp_path / "ck"
    p, lines = loop(jax_python, f"{str(ck)!r}, checkpoint_every=5", stop_at=12,
                    fail_at=(12,))  # only the signal's save fails
    assert p.returncode == 75, p.stderr[-3000:]
    assert "the save on SIGUSR1 failed (" in p.stderr and "the job resumes from the newest " \
        "checkpoint that restores" in p.stderr


REFUSED = '''
import json, os, sys
from mpi_resolver import ResolutionError
from mpi_resolver.jax import initialize, LongJob
initialize(port_base="auto")
open("not_a_dir", "w").close()
for directory, kwargs, env, _ in json.loads(sys.argv[1]):
    os.environ.update(env)
    try:
        LongJob(directory, **kwargs).restore({})
        print("BUILT")
    except ResolutionError as e:
        print("REFUSED", type(e).__name__, e)
    for name in env:
        del os.environ[name]
'''

#: (the directory, LongJob's other arguments, the variables set, what it says): one process
#: runs them in turn (JAX's start costs seconds).
REFUSALS = [
    (None, {}, {}, "checkpoint_dir is not given and MPI_RESOLVER_CHECKPOINT_DIR is not set"),
    ("ck", {"checkpoint_every": "often"}, {}, "checkpoint_every='often'"),
    ("ck", {"keep": 0}, {}, "keep=0"),
    ("ck", {}, {"MPI_RESOLVER_CHECKPOINT_EVERY": "often"}, "MPI_RESOLVER_CHECKPOINT_EVERY"),
    ("ck", {"check_every": 0}, {}, "SettingError check_every=0"),  # exit 78 uncaught
    ("ck", {"checkpoint_every": 2, "keep": 1}, {}, "BUILT"),
    ("not_a_dir/ck", {}, {}, "checkpoint directory not_a_dir/ck cannot be read (Not a "
                             "directory): give a directory"),
]


def test_refusals(jax_python: str, tmp_path: Path) -> None:
    p = subprocess.run([jax_python, "-c", REFUSED, json.dumps(REFUSALS)], capture_output=True,
                       text=True, timeout=120, env=clean_env(), cwd=tmp_path)
    assert p.returncode == 0, p.stderr[-3000:]
    said = [x for x in p.stdout.splitlines() if x.startswith(("BUILT", "REFUSED"))]
    assert len(said) == len(REFUSALS), p.stdout
    for line, (_, _, _, says) in zip(said, REFUSALS, strict=True):
        assert says in line and line.startswith("BUILT" if says == "BUILT" else "REFUSED"), \
            (line, says)


KERAS = '''
import json, os, sys
os.environ["KERAS_BACKEND"] = "jax"
from mpi_resolver.jax import initialize
initialize(port_base="auto")
import keras, numpy as np
from mpi_resolver.jax import LongJob, keras_callback, restore_model
keras.utils.set_random_seed(1)
model = keras.Sequential([keras.Input(shape=(4,)), keras.layers.Dense(2)])
model.compile(optimizer=keras.optimizers.Adam(0.01), loss="mse")
job = LongJob(sys.argv[1], checkpoint_every=5)
step = restore_model(job, model)
opt = {v.path: np.asarray(v.value) for v in model.optimizer.variables}
print(json.dumps({"start": step, "iterations": int(model.optimizer.iterations.numpy()),
                  "moments": float(sum(np.abs(v).sum() for k, v in opt.items()
                                       if "iteration" not in k and "learning" not in k)),
                  "kernel": np.asarray(model.layers[0].kernel.value).ravel().tolist()}))
x, y = np.ones((40, 4), np.float32), np.zeros((40, 2), np.float32)
if int(sys.argv[2]):
    model.fit(x, y, batch_size=4, epochs=1, verbose=0,
              callbacks=[keras_callback(job, first_step=step)])
    print(json.dumps({"kernel": np.asarray(model.layers[0].kernel.value).ravel().tolist()}))
'''


def test_keras_fit_saves_the_optimizer_state_and_resumes_it(jax_python: str,
                                                            tmp_path: Path) -> None:
    ck = str(tmp_path / "ck")
    first = subprocess.run([jax_python, "-c", KERAS, ck, "1"], capture_output=True, text=True,
                           timeout=180, env=clean_env())
    assert first.returncode == 0, first.stderr[-3000:]
    start, end = [json.loads(x) for x in first.stdout.splitlines() if x.startswith("{")]
    assert start["start"] == 0 and start["iterations"] == 0 and start["moments"] == 0.0
    second = subprocess.run([jax_python, "-c", KERAS, ck, "0"], capture_output=True,
                            text=True, timeout=180, env=clean_env())
    assert second.returncode == 0, second.stderr[-3000:]
    (resumed,) = [json.loads(x) for x in second.stdout.splitlines() if x.startswith("{")]
    # 10 steps, saved at 5 and 10: the last one restored, Adam's moments and count with it
    assert resumed["start"] == 10 and resumed["iterations"] == 10, resumed
    assert resumed["moments"] > 0.0 and resumed["kernel"] == end["kernel"], (resumed, end)


BLOCK = '''
from mpi_resolver.jax import initialize
initialize(port_base="auto")
import os
import jax.numpy as jnp
state, total = {"w": jnp.zeros(2)}, 30
def train_step(state, x):
    return {"w": state["w"] + x}
def batch(step):
    return 1.0
'''


def test_the_docs_loop_runs_with_auto_periodic_saves(jax_python: str, tmp_path: Path) -> None:
    """docs/jax.md's loop as it stands: 'auto' times the steps after the warm-up, saves once
    at once (its time is Young's C) and prints the interval it chose; complete() removes the
    checkpoints."""
    code = BLOCK + block("jax-long-job-loop") + '\nprint("W", float(state["w"][0]), ' \
        'sorted(os.listdir("ckpt")))\n'
    p = subprocess.run([jax_python, "-c", code], capture_output=True, text=True, timeout=120,
                       env=clean_env(), cwd=tmp_path)
    assert p.returncode == 0, p.stderr[-3000:]
    assert f"W 30.0 {KEPT}" in p.stdout, p.stdout  # the manifest says: done; the ledger
    assert "periodic checkpoints (auto): every " in p.stderr and "(Young: sqrt(2 x C " in \
        p.stderr, p.stderr


def test_periodic_saves_in_the_background_are_recorded_once_written(jax_python: str,
                                                                    tmp_path: Path) -> None:
    """The default: each periodic save's write runs in the background (the ledger's record
    has the step's stall and the write's time, the line says so); the signal's save and the
    final one are waited for (no write in the record). The resume takes the signal's."""
    ck = str(tmp_path / "ck")
    p, lines = loop(jax_python, f"{ck!r}, checkpoint_every=3, keep=2", stop_at=8)
    assert p.returncode == 75, p.stderr[-3000:]
    assert re.search(r"checkpoint 6 at step 6 \(periodic\) in [\d.]+ s, written in the "
                     r"background in [\d.]+ s", p.stderr), p.stderr
    saves = [r for r in ledger.read(ck) if r["event"] == "save"]
    assert [(r["step"], r["kind"], "write" in r) for r in saves] == [
        (3, "periodic", True), (6, "periodic", True), (8, "signal", False)], saves
    assert all(r["bytes"] > 0 and r["checkpoint"] == str(r["step"]) for r in saves), saves
    p, lines = loop(jax_python, f"{ck!r}, checkpoint_every=3, keep=2")
    assert p.returncode == 0 and lines[0] == {"start": 8, "w": 8.0, "n": 8}, p.stderr[-3000:]


FAILED_WRITE = '''
import json, sys
from mpi_resolver.jax import initialize, LongJob
initialize(port_base="auto")
from mpi_resolver.long_jobs.background import Written
job = LongJob(sys.argv[1], checkpoint_every=5)
job.restore({})
print(json.dumps({"why": job._ended(Written(5, 0.25, 1.5, error="disk quota exceeded")),
                  "newest": job.newest, "whole": job._ended(None)}))
'''


def test_a_background_write_that_failed_is_a_warning_and_a_record(jax_python: str,
                                                                  tmp_path: Path) -> None:
    """How a write in the background that failed is taken (Orbax's error, found at the next
    step): the warning, the ledger's save_failed with the stall, no newer checkpoint."""
    ck = str(tmp_path / "ck")
    p = subprocess.run([jax_python, "-c", FAILED_WRITE, ck], capture_output=True, text=True,
                       timeout=120, env=clean_env())
    assert p.returncode == 0, p.stderr[-3000:]
    said = json.loads(p.stdout.strip().splitlines()[-1])
    assert said == {"why": "disk quota exceeded", "newest": None, "whole": None}, said
    assert "the checkpoint at step 5 was not saved (disk quota exceeded); the last one that " \
        "restores is kept" in p.stderr
    (failed,) = [r for r in ledger.read(ck) if r["event"] == "save_failed"]
    assert (failed["step"], failed["seconds"], failed["kind"], failed["error"]) == (
        5, 0.25, "periodic", "disk quota exceeded"), failed


def test_the_earlier_format_is_restored_once_with_a_warning(jax_python: str,
                                                            tmp_path: Path) -> None:
    """A job started before Orbax (its checkpoints NumPy files): the newest restored, one
    warning; the next saves are Orbax's, and the next run resumes from them."""
    import numpy as np

    ck = tmp_path / "ck"
    ck.mkdir()
    for step in (4, 6):
        with open(ck / f"ckpt-{step:08d}.npz", "wb") as f:  # as the earlier release wrote
            np.savez(f, __step__=np.int64(step), __paths__=np.array(["['n']", "['w']"]),
                     s0=np.int64(step), s1=np.full(3, float(step), np.float32))
    p, lines = loop(jax_python, f"{str(ck)!r}, checkpoint_every=5", stop_at=9)
    assert p.returncode == 75, p.stderr[-3000:]
    assert lines[0] == {"start": 6, "w": 6.0, "n": 6}, lines
    assert f"checkpoint ckpt-00000006.npz in {ck} is in the package's earlier format " \
        "(NumPy): restored this once; the next checkpoints are Orbax's" in p.stderr
    p, lines = loop(jax_python, f"{str(ck)!r}, checkpoint_every=5")
    assert p.returncode == 0 and lines[0] == {"start": 9, "w": 9.0, "n": 9}, p.stderr[-3000:]
    assert "earlier format" not in p.stderr


def test_a_checkpoint_of_another_model_ends_with_78_not_an_older_one(jax_python: str,
                                                                     tmp_path: Path) -> None:
    """The newest checkpoint is whole but was written for another state: the process ends
    with 78 (a configuration error: supervise does not run it again) naming the leaf, and
    never resumes from an older checkpoint instead."""
    ck = str(tmp_path / "ck")
    p, _ = loop(jax_python, f"{ck!r}, checkpoint_every=5, checkpoint_async=False", stop_at=12)
    assert p.returncode == 75, p.stderr[-3000:]
    code = LOOP.replace('state = {"w": jnp.zeros(3), "n": 0}',
                        'state = {"w": jnp.zeros(4), "n": 0}')
    other = subprocess.run([jax_python, "-c", code.replace("{args}", repr(ck))
                            .replace("{stop_at}", "0").replace("{sig}", "SIGUSR1")
                            .replace("{fail_at}", "()").replace("{remove}", "False")],
                           capture_output=True, text=True, timeout=120, env=clean_env())
    assert other.returncode == 78, other.stderr[-3000:]
    assert f"{ck}/12 does not fit this training state (['w'] is float32[3] there, " \
        "float32[4] here)" in other.stderr
    assert "resuming from" not in other.stderr and '"start"' not in other.stdout
