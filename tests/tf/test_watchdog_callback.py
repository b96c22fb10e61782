"""StepWatchdogCallback (tensorflow.watchdog_callback) under Keras 2's model.fit, for real, in
child processes (the watchdog ends its process): a Python generator that stops yielding, and a
user's callback that hangs after a slow validation that must not count. T is 3 s: a step at an
epoch's start (a new iterator) took over 1 s on this loaded 2-core machine."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.tf

ROOT = Path(__file__).resolve().parents[2]

CHILD = """
import itertools, os, sys, threading, time
from importlib.metadata import version
if tuple(int(v) for v in version("tensorflow-cpu").split(".")[:2]) >= (2, 16):
    os.environ["TF_USE_LEGACY_KERAS"] = "1"  # tf.keras is tf_keras (Keras 2); 2.15's is 2
import numpy as np
import tensorflow as tf
from mpi_resolver.tensorflow.keras_callback import keras2
from mpi_resolver.tensorflow.watchdog_callback import StepWatchdogCallback
keras = keras2()  # Keras 2: tf_keras, or TensorFlow 2.15's own tf.keras

def batches(hang_at=None, pause=0.0):
    for i in itertools.count():
        if i == hang_at:
            threading.Event().wait()  # an input pipeline that never yields
        time.sleep(pause)
        yield np.ones((4, 3), "float32"), np.ones((4, 1), "float32")

class Hangs(keras.callbacks.Callback):
    def on_train_batch_end(self, batch, logs=None):
        if self.params and batch == 5 and self.epoch == 1:
            threading.Event().wait()  # user code that deadlocks

    def on_epoch_begin(self, epoch, logs=None):
        self.epoch = epoch

model = keras.Sequential([keras.layers.Dense(1, input_shape=(3,))])
model.compile("sgd", "mse")
watchdog = StepWatchdogCallback(factor=2, minimum=3, warmup=2, interval=0.05, grace=0,
                                name="fit")
if sys.argv[1] == "generator":
    model.fit(batches(hang_at=12), steps_per_epoch=20, epochs=1, verbose=0,
              callbacks=[watchdog])
else:  # a 4.5-s validation (not watched), then the callback hangs in the second epoch
    model.fit(batches(), steps_per_epoch=10, epochs=2, verbose=0,
              validation_data=batches(pause=1.5), validation_steps=3,
              callbacks=[Hangs(), watchdog])
print("fit returned", flush=True)
"""


def line_of(text: str) -> int:
    """Returns the number of CHILD's line that holds ``text``."""
    return next(n for n, line in enumerate(CHILD.split("\n"), 1) if text in line)


GENERATOR = line_of("an input pipeline that never yields")
CALLBACK = line_of("user code that deadlocks")


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """{case: (exit status, stdout, stderr)} of the two children, run side by side."""
    script = tmp_path_factory.mktemp("fit") / "fit_hang.py"
    script.write_text(CHILD)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TF_CPP_MIN_LOG_LEVEL": "3"}
    children = {case: subprocess.Popen([sys.executable, str(script), case], env=env,
                                       stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                       text=True)
                for case in ("generator", "callback")}
    out = {}
    for case, p in children.items():
        stdout, stderr = p.communicate(timeout=120)
        out[case] = (p.returncode, stdout, stderr)
    return out


@pytest.mark.parametrize("case, site", [
    pytest.param("generator", rf"stuck in \S+fit_hang\.py:{GENERATOR} batches, Python that "
                 r"TensorFlow runs for the step \(a tf\.data generator or a py_function\)",
                 id="generator"),
    pytest.param("callback", rf"stuck in \S+fit_hang\.py:{CALLBACK} on_train_batch_end",
                 id="callback"),
])
def test_fit_with_a_hang_ends_with_the_stacks_and_the_line(runs, case, site):
    status, stdout, stderr = runs[case]
    assert status == 124, stderr
    assert "fit returned" not in stdout
    assert re.search(rf'^  File "\S+fit_hang\.py", line ({GENERATOR} in batches|{CALLBACK} in '
                     r'on_train_batch_end)$', stderr, re.M), stderr
    line = stderr.splitlines()[-1]
    assert re.fullmatch(r"mpi_resolver: step watchdog: fit: step \d+ has run 3\.\d\d s, past its "
                        r"limit of 3\.00 s \(2 x the median step \S+ s over \d+ steps, at least "
                        r"3 s\); " + site + r"\. Python stacks above\. Exit 124 now\.",
                        line), line
    # when it fired is in the line (3.xx s into the step); the children's wall time, with
    # TensorFlow's import, is no measure of it (94 s in mutmut's copy under the suite's load)
