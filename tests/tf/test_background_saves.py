"""Periodic saves written in the background (tensorflow/saver, tensorflow/snapshot) with the
installed TensorFlow in this process: the checkpoint holds the state of its step while the
training goes on during the write; the signal's save waits for the write in flight; the
ledger has the stall and the write; a state that cannot be read ahead, checkpoint_async=False
and MPI_RESOLVER_CHECKPOINT_ASYNC=0 save at once."""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path
from typing import Any, List

import pytest

from mpi_resolver.long_jobs import ledger
from tests.tf.test_periodic import ckpts, messages
from tests.tf.test_preemption import model_and_step, train

pytestmark = pytest.mark.tf


def slow_writes(monkeypatch, seconds: float, started: List[tuple]) -> threading.Event:
    """Makes each background write wait ``seconds`` (or until the event) before writing;
    notes when each began and ended (time.monotonic)."""
    from mpi_resolver.tensorflow import snapshot

    write = snapshot.write
    go = threading.Event()

    def slow(snap: Any) -> str:
        began = time.monotonic()
        go.wait(seconds)
        try:
            return write(snap)
        finally:
            started.append((began, time.monotonic()))
    monkeypatch.setattr(snapshot, "write", slow)
    return go


def test_the_checkpoint_holds_its_step_while_training_goes_on(slurm_config, tmp_path, caplog,
                                                               monkeypatch) -> None:
    import tensorflow as tf

    caplog.set_level(logging.INFO, "mpi_resolver")
    started: List[tuple] = []
    slow_writes(monkeypatch, 1.0, started)
    checkpoint, step, weight = model_and_step(tf)
    handler = slurm_config(checkpoint_every=10).handler(None, checkpoint, str(tmp_path))
    assert train(handler, step, weight, 15) == 15  # steps 11-15 run during the write
    assert len(started) == 1 and ckpts(tmp_path) == ["ckpt-1"]
    reader = tf.train.load_checkpoint(str(tmp_path / "chief" / "ckpt-1"))
    assert reader.get_tensor("weight/.ATTRIBUTES/VARIABLE_VALUE") == 11.0  # 1 + 10 steps
    assert reader.get_tensor("step/.ATTRIBUTES/VARIABLE_VALUE") == 10
    assert float(weight.numpy()) == 16.0
    save, = [r for r in ledger.read(str(tmp_path)) if r["event"] == "save"]
    assert save["step"] == 10 and save["checkpoint"] == "ckpt-1" and save["bytes"] > 0
    assert save["write"] >= 1.0 > save["seconds"], save  # the training paid the snapshot only
    line, = [m for m in messages(caplog) if "ckpt-1" in m]
    assert line.startswith("mpi_resolver: checkpoint ckpt-1 at step 10 (periodic) in ")
    assert ", written in the background in " in line


def test_the_next_save_waits_for_the_write_in_flight(slurm_config, tmp_path,
                                                     monkeypatch) -> None:
    """A write longer than the interval: each save waits for the one before (one in flight),
    and every checkpoint is whole, the newest last."""
    import tensorflow as tf

    started: List[tuple] = []
    slow_writes(monkeypatch, 0.3, started)
    checkpoint, step, weight = model_and_step(tf)
    handler = slurm_config(checkpoint_every=2, keep=10).handler(None, checkpoint,
                                                                str(tmp_path))
    train(handler, step, weight, 9)  # the save after step 8 comes at step 9's start
    assert ckpts(tmp_path) == ["ckpt-1", "ckpt-2", "ckpt-3", "ckpt-4"]
    for number, at in ((1, 2), (4, 8)):
        reader = tf.train.load_checkpoint(str(tmp_path / "chief" / f"ckpt-{number}"))
        assert reader.get_tensor("step/.ATTRIBUTES/VARIABLE_VALUE") == at
    saves = [r for r in ledger.read(str(tmp_path)) if r["event"] == "save"]
    assert [r["step"] for r in saves] == [2, 4, 6, 8]
    assert all(r["write"] >= 0.3 for r in saves)
    assert min(r["seconds"] for r in saves[1:]) >= 0.15, saves  # the wait is their cost
    assert all(ended <= began for (_, ended), (began, _) in zip(started, started[1:],
                                                               strict=False)), \
        started  # one write in flight: each began after the one before it ended


def test_the_oldest_go_after_the_write_outside_its_time(slurm_config, tmp_path,
                                                       monkeypatch) -> None:
    """keep=2: each write is whole and named first, then the checkpoints beyond the last 2
    go, in the write's thread; the write's time (the ledger's) leaves the removal out: here
    the removal takes 1 s more."""
    import tensorflow as tf

    from mpi_resolver.tensorflow.checkpoints import KeepingManager

    seen: List[tuple] = []  # (the write began, the removal began, it ended)
    write, remove = KeepingManager.write_snapshot, KeepingManager.remove_oldest

    def timed_write(self, snap):
        seen.append((time.monotonic(),))
        return write(self, snap)

    def slow_remove(self):
        began = time.monotonic()
        time.sleep(1.0)
        remove(self)
        seen[-1] += (began, time.monotonic())
    monkeypatch.setattr(KeepingManager, "write_snapshot", timed_write)
    monkeypatch.setattr(KeepingManager, "remove_oldest", slow_remove)
    checkpoint, step, weight = model_and_step(tf)
    handler = slurm_config(checkpoint_every=2, keep=2).handler(None, checkpoint, str(tmp_path))
    train(handler, step, weight, 9)
    assert ckpts(tmp_path) == ["ckpt-3", "ckpt-4"]
    state = tf.train.get_checkpoint_state(str(tmp_path / "chief"))
    assert [Path(p).name for p in state.all_model_checkpoint_paths] == ["ckpt-3", "ckpt-4"]
    writes = [r["write"] for r in ledger.read(str(tmp_path)) if r["event"] == "save"]
    assert len(writes) == len(seen) == 4, (writes, seen)
    for took, (began, removing, removed) in zip(writes, seen, strict=True):
        assert took <= removing - began + 0.1 < removed - began - 0.5, (took, seen)


def test_the_signal_s_save_waits_for_the_write_in_flight(slurm_config, tmp_path,
                                                         monkeypatch) -> None:
    import tensorflow as tf

    from mpi_resolver.tensorflow import termination_config as tf_config

    started: List[tuple] = []
    slow_writes(monkeypatch, 3.0, started)
    monkeypatch.setattr(tf_config, "end_with", lambda code, seconds: None)
    checkpoint, step, weight = model_and_step(tf)
    config = slurm_config(checkpoint_every=5, requeue=False)
    handler = config.handler(None, checkpoint, str(tmp_path))
    with pytest.raises(SystemExit):
        train(handler, step, weight, 100, signal_at=6)
    assert ckpts(tmp_path) == ["ckpt-1", "ckpt-2"]  # the periodic one at 5, the signal's
    events = [(r["event"], r.get("step"), r.get("kind")) for r in ledger.read(str(tmp_path))
              if r["event"] == "save"]
    assert events[0] == ("save", 5, "periodic") and events[1][2] == "signal", events
    reader = tf.train.load_checkpoint(tf.train.latest_checkpoint(str(tmp_path / "chief")))
    assert reader.get_tensor("step/.ATTRIBUTES/VARIABLE_VALUE") == events[1][1]


@pytest.mark.parametrize("how", ["argument", "variable", "unsupported"])
def test_saves_at_once_where_asked_or_where_the_state_cannot_be_read_ahead(
        slurm_config, tmp_path, caplog, monkeypatch, how: str) -> None:
    import tensorflow as tf

    from mpi_resolver.tensorflow import handler_setup

    caplog.set_level(logging.INFO, "mpi_resolver")
    kwargs: dict = {"checkpoint_every": 5}
    if how == "argument":
        kwargs["checkpoint_async"] = False
    elif how == "variable":
        monkeypatch.setenv("MPI_RESOLVER_CHECKPOINT_ASYNC", "0")
    else:
        monkeypatch.setattr(handler_setup, "unsupported", lambda checkpoint: "a reason")
    checkpoint, step, weight = model_and_step(tf)
    handler = slurm_config(**kwargs).handler(None, checkpoint, str(tmp_path))
    assert handler._saver.writes is None
    train(handler, step, weight, 5)
    said = messages(caplog)
    assert [m for m in said if "at step 5" in m] == [
        m for m in said if m.startswith("mpi_resolver: checkpoint ckpt-1 at step 5 (periodic) "
                                        "in ") and "background" not in m]
    unsaid = [m for m in said if "not in the background" in m]
    assert unsaid == (["mpi_resolver: periodic checkpoints are written at once, not in the "
                       "background: a reason"] if how == "unsupported" else [])


#: Three steps, the periodic save after step 2 (made at step 3's start) written in the
#: background for 3 s more, and the script's end at once after it, without complete().
ENDS_DURING_A_WRITE = """import sys, time
import tensorflow as tf
from mpi_resolver import SlurmTerminationConfig
from mpi_resolver.tensorflow import snapshot
write = snapshot.write
def slow(snap):
    time.sleep(3.0)
    return write(snap)
snapshot.write = slow
step, weight = tf.Variable(0, dtype=tf.int64, trainable=False), tf.Variable(1.0)
handler = SlurmTerminationConfig(checkpoint_every=2).handler(
    None, tf.train.Checkpoint(step=step, weight=weight), sys.argv[1])
for _ in range(3):
    handler.run(lambda: weight.assign_add(1.0))
    step.assign_add(1)
print("ends", flush=True)
"""


def test_the_exit_waits_for_the_write_in_flight_and_records_it(tmp_path) -> None:
    """The write thread is a daemon, cut at the exit: the process's exit waits for it, and
    the next run restores the checkpoint, recorded in the ledger."""
    import os
    import subprocess
    import sys

    clean = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "MPI_RES"))}
    p = subprocess.run([sys.executable, "-c", ENDS_DURING_A_WRITE, str(tmp_path)],
                       capture_output=True, text=True, timeout=150,
                       env={**clean, "TF_CPP_MIN_LOG_LEVEL": "3", "PATH": "/nonexistent"})
    assert p.returncode == 0 and "ends" in p.stdout, p.stderr[-3000:]
    assert ckpts(tmp_path) == ["ckpt-1"]
    save, = [r for r in ledger.read(str(tmp_path)) if r["event"] == "save"]
    assert (save["step"], save["checkpoint"]) == (2, "ckpt-1") and save["write"] >= 3.0, save


@pytest.mark.parametrize("fails, intervals", [(True, [0.3, 0.3, 0.6, 1.2]),
                                              (False, [0.3, 0.3, 0.3, 0.3])])
def test_a_write_that_fails_in_the_background_backs_the_saves_off(
        slurm_config, tmp_path, monkeypatch, fails: bool, intervals: List[float]) -> None:
    """Every 0.3 s, each write refused in the background (a directory that refuses every
    write): the interval doubles from the save after the first failure is known, as for
    saves that fail at once; written whole, it stays."""
    import tensorflow as tf

    from mpi_resolver.tensorflow.checkpoints import KeepingManager

    if fails:
        monkeypatch.setattr(KeepingManager, "write_snapshot", lambda self, snap: 1 / 0)
    checkpoint, step, weight = model_and_step(tf)
    handler = slurm_config(checkpoint_every="0.3s").handler(None, checkpoint, str(tmp_path))
    while len(handler.schedule.plans if handler.schedule else []) < 4:
        handler.run(lambda: weight.assign_add(1.0))
        step.assign_add(1)
        time.sleep(0.005)
    # the write in flight ended before the test's end (slurm_config then gives the next tests
    # a fresh TensorFlow context, which a write still running would set up again, its
    # devices listed: tests/tf/test_gpus.py's resolvers then refuse, as the clean clone saw)
    handler._saver.settle()
    assert [round(p.seconds, 2) for p in handler.schedule.plans] == intervals


def test_a_background_save_syncs_each_file_once_and_the_state_after_each_change(
        slurm_config, tmp_path, monkeypatch) -> None:
    """The checkpoint's files go to disk once; TensorFlow's state file after it names the new
    checkpoint and again after the oldest are removed (keep=2, 4 saves)."""
    import tensorflow as tf

    from mpi_resolver.tensorflow import checkpoints

    synced: List[str] = []
    real = checkpoints.sync_files

    def noted(paths):
        synced.extend(Path(p).name for p in paths)
        return real(paths)
    monkeypatch.setattr(checkpoints, "sync_files", noted)
    checkpoint, step, weight = model_and_step(tf)
    handler = slurm_config(checkpoint_every=2, keep=2).handler(None, checkpoint, str(tmp_path))
    train(handler, step, weight, 9)
    for number in range(1, 5):
        assert synced.count(f"ckpt-{number}.index") == 1, synced
    assert synced.count("checkpoint") == 2 * 4, synced
