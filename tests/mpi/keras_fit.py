"""Keras's model.fit under MultiWorkerMirroredStrategy over MPIClusterResolver (run under
mpirun -n 2): README.md says Keras 3's fails (keras-team/keras#20585), and which error, and
that TensorFlow 2.15's tf.keras (Keras 2) works; this is the program that shows it. Prints
'fit finished' where fit works."""

from __future__ import annotations

import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
import keras  # noqa: E402

from mpi_resolver import MPIClusterResolver  # noqa: E402

tf.config.threading.set_intra_op_parallelism_threads(1)
tf.config.threading.set_inter_op_parallelism_threads(1)
resolver = MPIClusterResolver(port_base="auto", gpus_per_node=0)
strategy = tf.distribute.MultiWorkerMirroredStrategy(cluster_resolver=resolver)
sys.stdout.write(f"keras {keras.__version__}, worker {resolver.task_id}\n")  # one write
sys.stdout.flush()
x = np.random.default_rng(0).normal(size=(64, 4)).astype("float32")
y = (x.sum(axis=1) > 0).astype("int32")
with strategy.scope():
    model = keras.Sequential([keras.Input(shape=(4,)), keras.layers.Dense(2)])
    model.compile(optimizer="sgd",
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
model.fit(tf.data.Dataset.from_tensor_slices((x, y)).batch(16), epochs=1, verbose=0)
sys.stdout.write("fit finished\n")
sys.stdout.flush()
