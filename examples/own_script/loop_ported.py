"""original.py as a multi-node Slurm job: a Keras 3 custom loop, a checkpoint on Slurm's
signal, and the data skipped to where it was.
Run: SCRIPT=loop_ported.py sbatch ../train.sbatch (docs/own-script.md)."""

import keras
import numpy as np
import tensorflow as tf

from mpi_resolver import MPIClusterResolver, SlurmTerminationConfig

EPOCHS = 5
BATCH_SIZE = 64  # the global batch: each worker takes its share of it at every step
SAMPLES = 3200
STEPS_PER_EPOCH = SAMPLES // BATCH_SIZE

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
    optimizer = keras.optimizers.Adam(learning_rate=0.01)
    optimizer.build(model.trainable_variables)  # its state exists before a restore fills it
step = tf.Variable(0, dtype=tf.int64, trainable=False)  # the step count, in the checkpoint
checkpoint = tf.train.Checkpoint(model=model, optimizer=optimizer, step=step)
config = SlurmTerminationConfig(resolver)  # after the strategy; the template's signal
handler = config.handler(resolver, checkpoint)  # restores the newest save
resumed = int(step)
if chief and resumed:
    print(f"resumed at step {resumed}", flush=True)


def worker_data(ctx):
    """This worker's share of every global batch, from the step the checkpoint holds on."""
    ds = tf.data.Dataset.from_tensor_slices((x, y))
    ds = ds.shard(ctx.num_input_pipelines, ctx.input_pipeline_id).shuffle(SAMPLES, seed=1)
    ds = ds.repeat().batch(ctx.get_per_replica_batch_size(BATCH_SIZE), drop_remainder=True)
    return ds.skip(resumed)  # the data position is not in the checkpoint: skip what was read


iterator = iter(strategy.distribute_datasets_from_function(worker_data))
loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction="none")


def replica_step(xb, yb):
    with tf.GradientTape() as tape:  # the loss of the global batch: the workers' sum
        loss = tf.nn.compute_average_loss(loss_fn(yb, model(xb, training=True)),
                                          global_batch_size=BATCH_SIZE)
    grads = tape.gradient(loss, model.trainable_variables)
    optimizer.apply_gradients(zip(grads, model.trainable_variables, strict=True))
    return loss


@tf.function
def train_step(iterator):
    loss = strategy.run(replica_step, args=next(iterator))
    return strategy.reduce(tf.distribute.ReduceOp.SUM, loss, axis=None)


while step < EPOCHS * STEPS_PER_EPOCH:
    loss = handler.run(train_step, iterator)  # on the signal: saves, then exits (75)
    step.assign_add(1)
    if chief and int(step) % STEPS_PER_EPOCH == 0:
        print(f"epoch {int(step) // STEPS_PER_EPOCH}/{EPOCHS}: loss {float(loss):.4f}",
              flush=True)
config.complete()  # training is over: recorded as completed; SIGTERM ends the process again

accuracy = float(np.mean(np.argmax(model(x), axis=1) == y))
if chief:
    print(f"steps trained: {int(step)}, accuracy: {accuracy:.3f}")
    model.save("model.keras")  # the chief alone: Keras 3's save runs no collective
