"""original.py as a multi-node Slurm job: Keras 2's fit, a checkpoint on Slurm's signal.
Run: SCRIPT=fit_ported.py sbatch ../train.sbatch (docs/own-script.md)."""

import os

os.environ["TF_USE_LEGACY_KERAS"] = "1"  # before TensorFlow: tf.keras is Keras 2 too
import tempfile

import numpy as np
import tensorflow as tf
import tf_keras as keras  # Keras 2 (pip install tf-keras): its fit works multi-worker

from mpi_resolver import MPIClusterResolver, SlurmBackupAndRestore

EPOCHS = 5
BATCH_SIZE = 64  # the global batch: fit gives each worker its share
SAMPLES = 3200

resolver = MPIClusterResolver()  # the job's workers, from Slurm (checked against MPI)
strategy = tf.distribute.MultiWorkerMirroredStrategy(cluster_resolver=resolver)
chief = resolver.task_id == 0

# Synthetic data: 20 features, 4 classes drawn by a fixed random linear rule.
rng = np.random.default_rng(0)
x = rng.normal(size=(SAMPLES, 20)).astype("float32")
y = np.argmax(x @ rng.normal(size=(20, 4)), axis=1).astype("int32")

keras.utils.set_random_seed(1)
with strategy.scope():
    model = keras.Sequential([
        keras.Input(shape=(20,)),
        keras.layers.Dense(64, activation="relu"),
        keras.layers.Dense(4),
    ])
    model.compile(optimizer=keras.optimizers.Adam(learning_rate=0.01),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  metrics=["accuracy"])
model.fit(x, y, batch_size=BATCH_SIZE, epochs=EPOCHS, verbose=2 if chief else 0,
          callbacks=[SlurmBackupAndRestore()])  # the template sets its directory, signal

accuracy = float(np.mean(np.argmax(model(x), axis=1) == y))
if chief:
    print(f"steps trained: {model.optimizer.iterations.numpy()}, accuracy: {accuracy:.3f}")
# Keras 2's save all-reduces the metrics' state: every worker saves, the others to scratch.
model.save("model.keras" if chief else os.path.join(tempfile.mkdtemp(), "model.keras"))
