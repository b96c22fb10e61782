"""Keras 3's model.fit under MultiWorkerMirroredStrategy over MPIClusterResolver (run under
mpirun -n 2): README.md says it fails (keras-team/keras#20585), and which error; this is the
program that shows it. Prints 'fit finished' where it no longer fails."""

from __future__ import annotations

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
import keras  # noqa: E402

from mpi_resolver import MPIClusterResolver  # noqa: E402

tf.config.threading.set_intra_op_parallelism_threads(1)
tf.config.threading.set_inter_op_parallelism_threads(1)
resolver = MPIClusterResolver(port_base="auto", gpus_per_node=0)
strategy = tf.distribute.MultiWorkerMirroredStrategy(cluster_resolver=resolver)
print(f"keras {keras.__version__}, worker {resolver.task_id}", flush=True)
x = np.random.default_rng(0).normal(size=(64, 4)).astype("float32")
y = (x.sum(axis=1) > 0).astype("int32")
with strategy.scope():
    model = keras.Sequential([keras.Input(shape=(4,)), keras.layers.Dense(2)])
    model.compile(optimizer="sgd",
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
model.fit(tf.data.Dataset.from_tensor_slices((x, y)).batch(16), epochs=1, verbose=0)
print("fit finished", flush=True)
