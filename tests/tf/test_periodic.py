"""Periodic checkpoints (tensorflow.handler), the last K kept and a torn checkpoint skipped
(tensorflow.checkpoints), the completion in two phases (tensorflow.handler_setup), a save
that fails, the manifest and the handlers put back, with
the installed TensorFlow in this process (one worker: tensorflow.coordinator answers at
once). Two workers, a worker killed and the step restarted: tests/cluster."""

from __future__ import annotations

import logging
import os
import signal

import pytest

from mpi_resolver.long_jobs import ledger
from mpi_resolver.long_jobs.journal import read_progress
from mpi_resolver.long_jobs.manifest import MANIFEST, read_manifest, write_manifest
from tests.tf.test_preemption import model_and_step, train

pytestmark = pytest.mark.tf


def ckpts(directory):
    return sorted(p.name.split(".")[0] for p in (directory / "chief").glob("ckpt-*.index"))


def messages(caplog):
    return [r.getMessage() for r in caplog.records if r.name == "mpi_resolver"]


def test_every_n_steps_keeps_the_last_k_and_the_next_run_resumes(slurm_config, tmp_path,
                                                                 caplog):
    import tensorflow as tf

    caplog.set_level(logging.INFO, "mpi_resolver")
    checkpoint, step, weight = model_and_step(tf)
    handler = slurm_config(checkpoint_every=10, keep=2).handler(None, checkpoint,
                                                                str(tmp_path))
    assert train(handler, step, weight, 35) == 35
    assert ckpts(tmp_path) == ["ckpt-2", "ckpt-3"]  # steps 20 and 30; step 10's pruned
    assert read_manifest(str(tmp_path))["step"] == 30
    assert "mpi_resolver: periodic checkpoints every 10 steps; the last 2 kept" in \
        messages(caplog)

    checkpoint, step, weight = model_and_step(tf)  # a worker killed at step 35: the next run
    slurm_config(checkpoint_every=10).handler(None, checkpoint, str(tmp_path))
    assert int(step.numpy()) == 30 and float(weight.numpy()) == 31.0  # 5 steps lost


def test_a_torn_newest_checkpoint_is_skipped_with_one_warning(slurm_config, tmp_path, caplog):
    import tensorflow as tf

    checkpoint, step, weight = model_and_step(tf)
    handler = slurm_config(checkpoint_every=10, keep=2).handler(None, checkpoint,
                                                                str(tmp_path))
    train(handler, step, weight, 21)  # step 20's save comes at the start of step 21
    data = next((tmp_path / "chief").glob("ckpt-2.data-*"))
    data.write_bytes(data.read_bytes()[: data.stat().st_size // 2])  # a crash mid-write
    caplog.clear()

    checkpoint, step, weight = model_and_step(tf)
    slurm_config(checkpoint_every=10).handler(None, checkpoint, str(tmp_path))
    assert int(step.numpy()) == 10 and float(weight.numpy()) == 11.0
    said = messages(caplog)
    assert len(said) == 1 and said[0].startswith(
        f"mpi_resolver: checkpoint ckpt-2 in {tmp_path / 'chief'} does not restore (")
    assert said[0].endswith("): skipped; resuming from ckpt-1")


def test_no_checkpoint_that_restores_is_step_0_and_one_warning(slurm_config, tmp_path, caplog):
    import tensorflow as tf

    checkpoint, step, weight = model_and_step(tf)
    handler = slurm_config(checkpoint_every=10, keep=2).handler(None, checkpoint,
                                                                str(tmp_path))
    train(handler, step, weight, 21)  # step 20's save comes at the start of step 21
    for index in (tmp_path / "chief").glob("ckpt-*.index"):
        index.unlink()
    caplog.clear()
    checkpoint, step, weight = model_and_step(tf)
    slurm_config().handler(None, checkpoint, str(tmp_path))
    assert int(step.numpy()) == 0 and float(weight.numpy()) == 1.0
    said = messages(caplog)
    assert len(said) == 1 and "ckpt-2: " in said[0] and "ckpt-1: " in said[0]
    assert said[0].endswith("): training starts from step 0")


def test_a_save_that_fails_still_ends_in_the_exit_code(slurm_config, tmp_path, caplog,
                                                        monkeypatch):
    import tensorflow as tf

    from mpi_resolver.tensorflow.checkpoints import KeepingManager

    config = slurm_config(requeue=False)
    checkpoint, step, weight = model_and_step(tf)
    handler = config.handler(None, checkpoint, str(tmp_path))

    def full(self, *args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(KeepingManager, "save", full)
    with pytest.raises(SystemExit) as end:
        train(handler, step, weight, 100, signal_at=3)
    assert end.value.code == 74  # no checkpoint advanced: a requeue would loop from step 0
    assert messages(caplog)[-1] == (
        "mpi_resolver: the save on SIGUSR1 failed ([Errno 28] No space left on device) and no "
        "checkpoint advanced in this run: not requeued (a requeue would redo the run and fail "
        "the same save); exit code 74")


def test_a_failed_signal_save_after_a_periodic_one_resumes_from_it(slurm_config, tmp_path,
                                                                   caplog, monkeypatch):
    import tensorflow as tf

    from mpi_resolver.tensorflow.checkpoints import KeepingManager

    config = slurm_config(requeue=False, checkpoint_every=2)
    checkpoint, step, weight = model_and_step(tf)
    handler = config.handler(None, checkpoint, str(tmp_path))
    real = KeepingManager.save

    def full_after_step_2(self, *args, **kwargs):
        if config.saver.step > 2:
            raise OSError(28, "No space left on device")
        return real(self, *args, **kwargs)

    monkeypatch.setattr(KeepingManager, "save", full_after_step_2)
    with pytest.raises(SystemExit) as end:
        train(handler, step, weight, 100, signal_at=3)
    assert end.value.code == 75 and config.saver.newest == 2
    assert messages(caplog)[-1] == (
        "mpi_resolver: the save on SIGUSR1 failed ([Errno 28] No space left on device); the "
        "job resumes from the newest checkpoint that restores; not requeued: requeue=False; "
        "exit code 75")


@pytest.mark.parametrize("background, write", [
    (False, "save"), (True, "write_snapshot"),
    (False, "write_manifest"), (True, "write_manifest"),  # the files written, the manifest not
])
def test_a_periodic_save_that_fails_is_a_warning_and_training_goes_on(
        slurm_config, tmp_path, caplog, monkeypatch, background: bool, write: str) -> None:
    """At once, or in the background (its failure said at the next step); the checkpoint's
    files or its manifest (a directory made read-only while a write was in flight)."""
    import tensorflow as tf

    from mpi_resolver.tensorflow import saver
    from mpi_resolver.tensorflow.checkpoints import KeepingManager

    checkpoint, step, weight = model_and_step(tf)
    handler = slurm_config(checkpoint_every=5, checkpoint_async=background).handler(
        None, checkpoint, str(tmp_path))
    if write == "write_manifest":
        monkeypatch.setattr(saver, write, lambda *a, **k: 1 / 0)
    else:
        monkeypatch.setattr(KeepingManager, write, lambda self, *a, **k: 1 / 0)
    assert train(handler, step, weight, 12) == 12
    records = ledger.read(str(tmp_path))
    assert [(r["event"], r["step"], r["error"]) for r in records if r["event"] != "restore"] \
        == [("save_failed", 5, "division by zero"), ("save_failed", 10, "division by zero")]
    assert messages(caplog) == ["mpi_resolver: periodic checkpoints every 5 steps; the last 2 "
                                "kept",
                                "mpi_resolver: the checkpoint at step 5 was not saved "
                                "(division by zero); the last one that restores is kept",
                                "mpi_resolver: the checkpoint at step 10 was not saved "
                                "(division by zero); the last one that restores is kept"]


def test_auto_saves_after_the_warmup_and_says_the_interval(slurm_config, tmp_path, caplog):
    import tensorflow as tf

    checkpoint, step, weight = model_and_step(tf)
    handler = slurm_config(checkpoint_every="auto").handler(None, checkpoint, str(tmp_path))
    train(handler, step, weight, 12)
    assert ckpts(tmp_path) == ["ckpt-1"]  # at step 10, the save that gives Young's C
    line = [m for m in messages(caplog) if "periodic checkpoints (auto)" in m]
    assert len(line) == 1 and "(Young: sqrt(2 x C " in line[0] and "M 6000 h))" in line[0]


def test_disarm_puts_the_handlers_back(slurm_config, tmp_path):
    before = signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGUSR1)
    config = slurm_config()
    assert signal.getsignal(signal.SIGTERM) != before[0]
    config.disarm()
    assert (signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGUSR1)) == before


def test_another_running_job_s_directory_is_refused(slurm_config, tmp_path, monkeypatch):
    import tensorflow as tf

    from mpi_resolver.core.errors import ResolutionError
    from mpi_resolver.long_jobs import manifest

    monkeypatch.setenv("SLURM_JOB_ID", "12")
    write_manifest(str(tmp_path), {"job": "11", "step": 5, "written": "t", "host": "h"})
    monkeypatch.setattr(manifest, "job_state", lambda job, timeout: "RUNNING")
    checkpoint, _, _ = model_and_step(tf)
    with pytest.raises(ResolutionError, match="which is RUNNING: two jobs must not share"):
        slurm_config().handler(None, checkpoint, str(tmp_path))
    monkeypatch.setattr(manifest, "job_state", lambda job, timeout: "COMPLETED")
    slurm_config().handler(None, checkpoint, str(tmp_path))  # an ended job's: taken over
    assert os.path.exists(tmp_path / MANIFEST)


def test_the_directory_is_claimed_before_the_first_save(slurm_config, tmp_path,
                                                       monkeypatch):
    """Another job started on the directory before this job's first save is told."""
    import tensorflow as tf

    monkeypatch.setenv("SLURM_JOB_ID", "12")
    checkpoint, _, _ = model_and_step(tf)
    slurm_config(checkpoint_every="auto").handler(None, checkpoint, str(tmp_path))
    manifest = read_manifest(str(tmp_path))
    assert manifest["job"] == "12" and manifest["step"] == 0
    assert manifest["settings"] == {"checkpoint_every": "auto", "keep": 2, "signal": "USR1",
                                    "requeue": True, "requeue_on_time_limit": False,
                                    "checkpoint_async": True}  # as JAX's: one rule


def crashing_fit(tmp_path, crash_after, signal_after=0, **options):
    """Keras 2's fit, 2 epochs of 8 batches, with SlurmBackupAndRestore(**options); the
    batch that ends ``crash_after``-th raises (a worker gone) before the backup sees it, and
    after the ``signal_after``-th USR1 comes. Returns the (epoch, batch) pairs that ran."""
    import numpy as np

    from mpi_resolver import SlurmBackupAndRestore
    from mpi_resolver.tensorflow.keras_callback import keras2

    keras = keras2()
    seen = []

    class Crash(keras.callbacks.Callback):
        def on_epoch_begin(self, epoch, logs=None):
            self.epoch = epoch

        def on_train_batch_end(self, batch, logs=None):
            seen.append((self.epoch, batch))
            if len(seen) == crash_after:
                raise RuntimeError("worker killed")
            if len(seen) == signal_after:
                os.kill(os.getpid(), signal.SIGUSR1)

    model = keras.Sequential([keras.Input(shape=(4,)), keras.layers.Dense(2)])
    model.compile(optimizer="sgd", loss="sparse_categorical_crossentropy")
    x, y = np.zeros((64, 4), np.float32), np.zeros((64,), np.int32)
    backup = SlurmBackupAndRestore(str(tmp_path), requeue=False, **options)
    try:
        model.fit(x, y, batch_size=8, epochs=2, verbose=0, callbacks=[Crash(), backup])
    except RuntimeError:  # the crash: the process would end, its exit hook ending the write
        saver = backup.termination_config.saver
        if saver is not None:
            saver.settle()
    return seen


def test_fit_saves_every_n_batches_and_resumes_after_a_crash(slurm_config, tmp_path):
    seen = crashing_fit(tmp_path, 13, checkpoint_every=5, keep=2)
    assert seen[-1] == (1, 4)  # 13 batches; saves after 5 and 10
    assert ckpts(tmp_path) == ["ckpt-1", "ckpt-2"]
    seen = crashing_fit(tmp_path, 0)
    assert seen[0] == (1, 2) and seen[-1] == (1, 7)  # after batch 10 = epoch 1's 2nd
    assert not (tmp_path / "chief").exists()  # completed: the checkpoints go
    assert read_manifest(str(tmp_path))["completed"] is True  # the manifest says so


def test_fit_skips_a_torn_checkpoint(slurm_config, tmp_path, caplog):
    crashing_fit(tmp_path, 13, checkpoint_every=5, keep=2)
    index = tmp_path / "chief" / "ckpt-2.index"
    index.unlink()
    caplog.clear()
    seen = crashing_fit(tmp_path, 0)
    assert seen[0] == (0, 5)  # after batch 5: the checkpoint before the torn one
    assert any("checkpoint ckpt-2 in" in m and "skipped; resuming from ckpt-1" in m
               for m in messages(caplog))


def test_a_second_fit_in_one_process_is_armed_again(slurm_config, tmp_path):
    """The first fit disarms at its end; the second arms again (its own coordination keys),
    and the signal saves and exits as in the first."""
    assert crashing_fit(tmp_path / "a", 0)[-1] == (1, 7)
    with pytest.raises(SystemExit) as end:
        crashing_fit(tmp_path / "b", 0, signal_after=3)
    assert end.value.code == 75
    assert ckpts(tmp_path / "b") == ["ckpt-1"]


def test_remove_checkpoints_after_training_and_the_next_run_starts_afresh(slurm_config,
                                                                         tmp_path):
    import tensorflow as tf

    from mpi_resolver import ResolutionError

    checkpoint, step, weight = model_and_step(tf)
    config = slurm_config(checkpoint_every=5, total_steps=12)
    with pytest.raises(ResolutionError, match=r"build the handler first"):
        config.remove_checkpoints()
    (tmp_path / "workertemp_1").mkdir()  # another worker's: not the chief's to remove
    handler = config.handler(None, checkpoint, str(tmp_path))
    assert train(handler, step, weight, 12) == 12
    assert (tmp_path / "chief").exists() and (tmp_path / MANIFEST).exists()
    config.remove_checkpoints()  # complete()'s older name
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "mpi_resolver.json", "mpi_resolver.ledger.jsonl", "mpi_resolver.progress.json",
        "workertemp_1"]  # the manifest, the ledger and the progress stay
    done = read_manifest(str(tmp_path))
    assert (done["completed"], done["step"], done["job"]) == (True, 12, None)
    records = ledger.read(str(tmp_path))
    assert [(r["event"], r["step"], r.get("kind")) for r in records] == [
        ("restore", 0, None), ("save", 5, "periodic"), ("save", 10, "periodic"),
        ("save", 12, "final"), ("completed", 12, None)]
    assert all(r["bytes"] > 0 and r["checkpoint"].startswith("ckpt-") and r["seconds"] > 0
               for r in records if r["event"] == "save")
    assert records[0]["plan"] == 12  # total_steps, for status's expected end
    assert read_progress(str(tmp_path))["step"] == 12

    # outside a Slurm job (no job id), the same command run again starts afresh
    checkpoint, step, weight = model_and_step(tf)
    slurm_config().handler(None, checkpoint, str(tmp_path))
    assert int(step.numpy()) == 0


def test_a_completed_job_s_run_trains_nothing_again(slurm_config, tmp_path, monkeypatch,
                                                    caplog):
    """The job's training completed (the manifest says so for this job id): a run of the same
    job started again (Slurm's requeue of a node failure, a restart) ends 0 at once."""
    import tensorflow as tf

    monkeypatch.setenv("SLURM_JOB_ID", "12")
    checkpoint, step, weight = model_and_step(tf)
    config = slurm_config(checkpoint_every=5)
    handler = config.handler(None, checkpoint, str(tmp_path))
    train(handler, step, weight, 12)
    config.complete()
    checkpoint, step, weight = model_and_step(tf)
    with pytest.raises(SystemExit) as end:
        slurm_config().handler(None, checkpoint, str(tmp_path))
    assert end.value.code == 0
    assert messages(caplog)[-1] == (
        f"mpi_resolver: job 12's training completed at step 12 (the manifest in {tmp_path}): "
        "nothing to train again; exit 0")
    monkeypatch.setenv("SLURM_JOB_ID", "13")  # another job: starts afresh
    monkeypatch.setattr("mpi_resolver.long_jobs.manifest.job_state", lambda j, timeout: "COMPLETED")
    checkpoint, step, weight = model_and_step(tf)
    slurm_config().handler(None, checkpoint, str(tmp_path))
    assert int(step.numpy()) == 0


def test_a_failure_between_the_two_phases_resumes_at_the_final_step(slurm_config, tmp_path,
                                                                   monkeypatch):
    """Training ended and its final step was saved, but the manifest's "completed" was not
    written (a worker lost at the barrier): the next run resumes at the final step, with no
    step to train."""
    import tensorflow as tf

    from mpi_resolver.tensorflow import handler_setup

    checkpoint, step, weight = model_and_step(tf)
    config = slurm_config(checkpoint_every=5)
    handler = config.handler(None, checkpoint, str(tmp_path))
    train(handler, step, weight, 12)  # saved at 5 and 10; 12 is the final step

    def lost(*args, **kwargs):
        raise RuntimeError("a worker was lost before the second phase")

    claim = handler_setup.claim_directory
    monkeypatch.setattr(handler_setup, "claim_directory", lost)
    with pytest.raises(RuntimeError):
        config.complete()
    monkeypatch.setattr(handler_setup, "claim_directory", claim)
    checkpoint, step, weight = model_and_step(tf)
    slurm_config().handler(None, checkpoint, str(tmp_path))
    assert int(step.numpy()) == 12  # the final step: nothing to train again


def test_the_directory_comes_from_the_variable_where_none_is_given(slurm_config, tmp_path,
                                                                  monkeypatch):
    import tensorflow as tf

    from mpi_resolver import FormatError

    checkpoint, step, weight = model_and_step(tf)
    monkeypatch.delenv("MPI_RESOLVER_CHECKPOINT_DIR", raising=False)
    with pytest.raises(FormatError, match=r"^checkpoint_dir is not given and "
                                          r"MPI_RESOLVER_CHECKPOINT_DIR is not set"):
        slurm_config().handler(None, checkpoint)
    monkeypatch.setenv("MPI_RESOLVER_CHECKPOINT_DIR", str(tmp_path / "from-env"))
    monkeypatch.setenv("MPI_RESOLVER_CHECKPOINT_EVERY", "4")
    handler = slurm_config().handler(None, checkpoint)
    assert train(handler, step, weight, 9) == 9
    assert ckpts(tmp_path / "from-env") == ["ckpt-1", "ckpt-2"]  # steps 4 and 8


@pytest.mark.parametrize("steps", [0, "12"])
def test_total_steps_not_a_whole_number_is_refused(slurm_config, steps):
    from mpi_resolver import FormatError

    with pytest.raises(FormatError, match="total_steps: expected the whole number of steps"):
        slurm_config(total_steps=steps)
