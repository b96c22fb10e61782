"""SlurmTerminationConfig (tensorflow/termination_config) and SlurmBackupAndRestore with the
installed TensorFlow, in this process (one worker, no Slurm job): a real signal to this process,
TensorFlow's PreemptionCheckpointHandler saving at the next step, the exit code (and the end
of the process after it, process_end), and the next "run" resuming from the checkpoint. Two
workers, the requeue and Slurm's signals: tests/cluster."""

from __future__ import annotations

import os
import re
import signal
import time

import pytest

from mpi_resolver.core.errors import FormatError, ResolutionError

pytestmark = pytest.mark.tf


def model_and_step(tf):
    step = tf.Variable(0, dtype=tf.int64, trainable=False)
    weight = tf.Variable(1.0)
    return tf.train.Checkpoint(step=step, weight=weight), step, weight


def train(handler, step, weight, total, signal_at=None, sig=signal.SIGUSR1):
    """Runs ``total`` steps through the handler (each adds 1 to weight), sending ``sig`` to
    this process after step ``signal_at``; returns the steps done."""
    done = int(step.numpy())
    while done < total:
        handler.run(lambda: weight.assign_add(1.0))
        step.assign_add(1)
        done += 1
        if done == signal_at:
            os.kill(os.getpid(), sig)
            time.sleep(1.5)  # TensorFlow's watcher thread polls once a second
    saver = getattr(handler, "_saver", None)
    if saver is not None:  # the periodic save written in the background: on disk now
        saver.settle()
    return done


def test_the_warning_signal_saves_at_the_next_step_and_exits_75(slurm_config, tmp_path,
                                                                 caplog):
    import tensorflow as tf

    config = slurm_config(signal="USR1@60", requeue=False)
    assert config.policy.grace_period == 60.0 and config.grace_period == 0  # TF: save at once
    checkpoint, step, weight = model_and_step(tf)
    handler = config.handler(None, checkpoint, str(tmp_path))
    with pytest.raises(SystemExit) as end:
        train(handler, step, weight, 100, signal_at=5)
    assert end.value.code == 75 == config.REQUEUE_EXIT_CODE
    assert slurm_config.ended == [(75, 10.0)]
    assert signal.getsignal(signal.SIGTERM) == signal.getsignal(signal.SIGUSR1) == signal.SIG_IGN
    saved = int(step.numpy())
    assert 5 < saved < 100
    assert tf.train.latest_checkpoint(str(tmp_path / "chief"))
    said = [r.getMessage() for r in caplog.records if r.name == "mpi_resolver"]
    assert re.fullmatch(rf"mpi_resolver: checkpoint ckpt-1 at step {saved} \(signal\) in "
                        r"\d+\.\d\d s", said[0]), said  # the save's line, then the exit's
    assert said[1:] == [
        "mpi_resolver: checkpoint saved on SIGUSR1; not requeued: requeue=False; exit code 75"]

    # The next run: a new program state, restored from the checkpoint when the handler is built
    checkpoint, step, weight = model_and_step(tf)
    handler = slurm_config(requeue=False).handler(None, checkpoint, str(tmp_path))
    assert int(step.numpy()) == saved and float(weight.numpy()) == 1.0 + saved
    assert train(handler, step, weight, 100) == 100
    assert float(weight.numpy()) == 101.0  # every step once, across both runs


def test_sigterm_alone_saves_and_exits_143(slurm_config, tmp_path):
    import tensorflow as tf

    config = slurm_config()
    checkpoint, step, weight = model_and_step(tf)
    handler = config.handler(None, checkpoint, str(tmp_path))
    with pytest.raises(SystemExit) as end:
        train(handler, step, weight, 100, signal_at=3, sig=signal.SIGTERM)
    assert end.value.code == 143 == config.TERMINATED_EXIT_CODE


def test_a_requeue_outside_a_job_is_one_line_and_still_75(slurm_config, tmp_path, caplog):
    import tensorflow as tf

    checkpoint, step, weight = model_and_step(tf)
    handler = slurm_config().handler(None, checkpoint, str(tmp_path))
    with pytest.raises(SystemExit) as end:
        train(handler, step, weight, 100, signal_at=2)
    assert end.value.code == 75
    assert tf.train.latest_checkpoint(str(tmp_path / "chief"))  # saved all the same
    messages = [r.getMessage() for r in caplog.records if r.name == "mpi_resolver"]
    assert re.fullmatch(r"mpi_resolver: checkpoint ckpt-1 at step \d+ \(signal\) in "
                        r"\d+\.\d\d s", messages.pop(0)), messages
    assert messages == [
        "mpi_resolver: checkpoint saved on SIGUSR1; SLURM_JOB_ID=None: not in a Slurm job, so "
        "there is no job to requeue; run the training with srun inside sbatch, or pass "
        "requeue=False; exit code 75"]


def test_a_restarted_job_without_a_checkpoint_is_a_warning_and_step_0(slurm_config, tmp_path,
                                                                      monkeypatch, caplog):
    import tensorflow as tf

    monkeypatch.setenv("SLURM_RESTART_COUNT", "1")
    monkeypatch.setenv("SLURM_JOB_ID", "12")
    checkpoint, step, _ = model_and_step(tf)
    slurm_config().handler(None, checkpoint, str(tmp_path / "gone"))
    assert int(step.numpy()) == 0
    assert [r.getMessage() for r in caplog.records if r.name == "mpi_resolver"] == [
        f"mpi_resolver: job 12 runs for the 2nd time (SLURM_RESTART_COUNT=1), but "
        f"{tmp_path / 'gone' / 'chief'} holds no checkpoint: training starts from step 0. Was "
        "the directory removed, or does this run name another one than the first (a node-local "
        "path such as /tmp, a path with the job's step or run in it)?"]


def test_the_handler_takes_sigterm_back(slurm_config, tmp_path):
    """MultiWorkerMirroredStrategy's C++ takes SIGTERM when it is built (measured); stood in
    for here by a C-level handler installed after the config's."""
    import ctypes

    import tensorflow as tf

    config = slurm_config()
    libc = ctypes.CDLL(None)
    libc.signal.restype = ctypes.c_void_p
    libc.signal(int(signal.SIGTERM), ctypes.c_void_p(1))  # SIG_IGN behind Python's back
    assert [d.signal.name for d in config.watcher.displaced()] == ["TERM"]
    config.watcher.reclaim(lambda d: True)
    assert config.watcher.displaced() == []
    checkpoint, _, _ = model_and_step(tf)
    config.handler(None, checkpoint, str(tmp_path))  # takes back TensorFlow's only


@pytest.mark.parametrize("kwargs, error, message", [
    pytest.param({"signal": "B:USR1@120"}, FormatError, "signal='B:USR1@120': 'B:' sends",
                 id="B:"),
    pytest.param({"signal": "KILL"}, FormatError, "signal='KILL': SIGKILL cannot be caught",
                 id="KILL"),
    pytest.param({"grace_period": -1}, ResolutionError, "grace_period=-1: expected seconds (a "
                 "number >= 0), as #SBATCH --signal=USR1@SECONDS gives.", id="negative"),
    pytest.param({"grace_period": "60"}, ResolutionError, "grace_period='60': expected seconds",
                 id="text"),
    pytest.param({"grace_period": True}, ResolutionError, "grace_period=True: expected seconds",
                 id="bool"),
    pytest.param({"grace_period": float("nan")}, ResolutionError, "grace_period=nan: expected",
                 id="nan"),
    pytest.param({"signal": "USR1@60", "grace_period": 30}, ResolutionError,
                 "grace_period=30 and signal='USR1@60' say different things: give the seconds "
                 "once.", id="two grace periods"),
])
def test_bad_arguments(slurm_config, kwargs, error, message):
    with pytest.raises(error) as e:
        slurm_config(**kwargs)
    assert str(e.value).startswith(message)


@pytest.mark.parametrize("kwargs, grace", [({"grace_period": 0}, 0.0),
                                          ({"signal": "USR2@60", "grace_period": 60}, 60.0),
                                          ({}, None)])
def test_grace_periods(slurm_config, kwargs, grace):
    assert slurm_config(**kwargs).policy.grace_period == grace


def test_fit_saves_on_the_signal_and_resumes_at_the_next_batch(slurm_config, tmp_path):
    """SlurmBackupAndRestore under Keras 2's model.fit (tf_keras, or 2.15's tf.keras)."""
    import numpy as np

    from mpi_resolver import SlurmBackupAndRestore
    from mpi_resolver.tensorflow.keras_callback import keras2

    keras = keras2()
    x, y = np.zeros((64, 4), np.float32), np.zeros((64,), np.int32)
    seen = []

    class Record(keras.callbacks.Callback):
        def on_epoch_begin(self, epoch, logs=None):
            self.epoch = epoch

        def on_train_batch_end(self, batch, logs=None):
            seen.append((self.epoch, batch))
            if len(seen) == 5 and signal_first:
                os.kill(os.getpid(), signal.SIGUSR1)
                time.sleep(1.5)

    def fit():
        model = keras.Sequential([keras.Input(shape=(4,)), keras.layers.Dense(2)])
        model.compile(optimizer="sgd", loss="sparse_categorical_crossentropy")
        backup = SlurmBackupAndRestore(str(tmp_path), requeue=False)
        model.fit(x, y, batch_size=8, epochs=2, verbose=0, callbacks=[Record(), backup])

    signal_first = True
    with pytest.raises(SystemExit) as end:
        fit()
    assert end.value.code == 75
    stopped = seen[-1]
    assert seen[:5] == [(0, 0), (0, 1), (0, 2), (0, 3), (0, 4)] and stopped > (0, 4)
    seen.clear()
    signal_first = False
    fit()
    first = seen[0]
    assert first == ((stopped[0], stopped[1] + 1) if stopped[1] < 7 else (stopped[0] + 1, 0))
    assert seen[-1] == (1, 7)  # to the planned end
    assert not os.path.exists(tmp_path / "chief")  # removed once fit completed
    from mpi_resolver.long_jobs.watcher import SignalWatcher

    for number in (signal.SIGTERM, signal.SIGUSR1):  # disarmed at the end of training
        assert not isinstance(getattr(signal.getsignal(number), "__self__", None),
                              SignalWatcher)


END_WITH = """
import sys, time
from mpi_resolver.long_jobs.process_end import end_with
end_with(75, float(sys.argv[1]))
print(time.monotonic(), flush=True)  # armed (the clock is the machine's, as the test's)
if sys.argv[2] == "hang":
    time.sleep(60)  # stands for a teardown that does not end
"""


@pytest.mark.parametrize("seconds, then", [(0.5, "hang"), (30.0, "return")])
def test_the_process_ends_with_the_code_at_exit_or_after_the_bound(seconds, then):
    """end_with: a script that returns normally (exit 0) still ends with 75, at its first
    at-exit handler; one that hangs ends with 75 after the bound."""
    import subprocess
    import sys

    p = subprocess.run([sys.executable, "-c", END_WITH, str(seconds), then], timeout=150,
                       env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}, stdout=subprocess.PIPE,
                       text=True)
    ended = time.monotonic()
    assert p.returncode == 75
    # From end_with, not from the start: importing TensorFlow took a minute once on a loaded
    # machine (the suite's two runs and mutmut's beside them), and that is not the bound.
    assert ended - float(p.stdout.split()[0]) < 30  # not the 60 s hang


def test_a_save_that_outlasts_the_grace_period_is_a_warning_with_both_numbers(slurm_config,
                                                                                 tmp_path,
                                                                                 caplog):
    """grace_period=1: the save comes 1.5 s or more after the signal (TensorFlow polls the
    watcher once a second, train() waits that long): the warning names both numbers."""
    import tensorflow as tf

    checkpoint, step, weight = model_and_step(tf)
    handler = slurm_config(signal="USR1@1", requeue=False).handler(None, checkpoint,
                                                                  str(tmp_path))
    with pytest.raises(SystemExit):
        train(handler, step, weight, 100, signal_at=2)
    (warning,) = [r.getMessage() for r in caplog.records
                  if "grace period" in r.getMessage()]
    took = float(warning.split("written ")[1].split(" s after")[0])
    assert took >= 1.0
    assert "and the grace period is 1 s: too short" in warning
    assert "#SBATCH --signal=USR1@" in warning


#: A training script's first lines, with a setting or a directory the package refuses.
REFUSED = """import json, os, sys
import tensorflow as tf
from mpi_resolver import SlurmTerminationConfig
config = SlurmTerminationConfig()
config.handler(None, tf.train.Checkpoint(v=tf.Variable(1.0)), sys.argv[1])
print("trained")
"""


@pytest.mark.parametrize("env, manifest, said", [
    ({"MPI_RESOLVER_KEEP": "0"}, None, "VariableError: MPI_RESOLVER_KEEP='0': keep='0': "
                                       "expected a whole number of checkpoints to keep"),
    ({"MPI_RESOLVER_STRAGGLER_ROUND": "soon"}, None,
     "VariableError: MPI_RESOLVER_STRAGGLER_ROUND='soon': expected the seconds of training "
     "between two slow-rank rounds"),
    ({"MPI_RESOLVER_CHECKPOINT_ASYNC": "maybe"}, None,
     "VariableError: MPI_RESOLVER_CHECKPOINT_ASYNC='maybe': checkpoint_async='maybe': expected "
     "1 or 0 (true/false, yes/no, on/off)."),
    ({"SLURM_JOB_ID": "12"}, {"job": "11", "step": 3, "cluster": "c"},
     "ConfigurationError: "),  # job 11: scontrol cannot confirm its end here
])
def test_a_refused_configuration_ends_the_script_with_78(tmp_path, env, manifest, said):
    """A setting or a directory the package refuses would fail every restart the same way:
    uncaught, it ends the script with 78 (sysexits' EX_CONFIG), which supervise never
    restarts, after Python's own traceback."""
    import json
    import subprocess
    import sys

    if manifest is not None:
        (tmp_path / "mpi_resolver.json").write_text(json.dumps(manifest))
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "MPI_RES"))}
    p = subprocess.run([sys.executable, "-c", REFUSED, str(tmp_path)], capture_output=True,
                       text=True, timeout=150, env={**clean, "TF_CPP_MIN_LOG_LEVEL": "3",
                                                    "PATH": "/nonexistent", **env})
    assert p.returncode == 78, p.stderr[-3000:]
    assert said in p.stderr and "trained" not in p.stdout
