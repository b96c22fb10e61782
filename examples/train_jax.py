"""Multi-node training with Keras 3 on JAX and mpi_resolver.jax: train.py's model and data,
``keras.distribution.DataParallel`` and ``model.fit``.

Run it the way you run any MPI job; every process is one JAX process:

    srun --mpi=pmix python examples/train_jax.py --epochs 5           # Slurm
    mpirun -n 4 python examples/train_jax.py --epochs 5               # no Slurm
    srun --mpi=pmix python examples/train_jax.py --checkpoint-dir ckpt  # resume from ckpt

What it shows:
  * ``mpi_resolver.jax.initialize()`` first thing: the Slurm step (cross-checked with MPI) or
    the MPI world gives JAX its coordinator (task 0's address, the package's port rules),
    process ids as Slurm numbers them and each task's GPUs as Slurm bound them; on CPU-only
    nodes JAX's gloo collectives.
  * ``keras.distribution.DataParallel`` over every process's devices: Keras 3's own data
    parallelism; ``model.fit`` works across nodes (Keras 3's fit does not under TensorFlow's
    MultiWorkerMirroredStrategy, keras-team/keras#20585).
  * One seed on every process (``keras.utils.set_random_seed``: the initial weights must be
    the same everywhere), and each process feeds its own shard of the training split
    (``auto_shard_dataset=False``): global batch = --batch-per-worker x processes.
  * ``--checkpoint-dir DIR`` (a directory every node sees) and train.py's long-job options
    (examples/long_jobs.py; the MPI_RESOLVER_* variables where an option is not given): the
    model's weights and Adam's state are saved periodically with ``--checkpoint-every
    N|DURATION|auto`` (the last ``--keep`` kept), and on Slurm's warning signal (--signal, as
    ``#SBATCH --signal=USR1@120`` sends it) or SIGTERM every process stops at the same step,
    process 0 saves and requeues the job (or supervise does), all exit 75 (143 where the job
    ends) (mpi_resolver.jax's LongJob, restore_model and keras_callback). A run started again
    with the same DIR resumes from the newest checkpoint that reads whole (a torn one skipped)
    and stops at the planned total; a run that completes removes its checkpoints.
  * Process 0 prints train.py's lines: ``epoch N/E: ...``, ``final test accuracy: ...`` and
    ``steps done: N (resumed from K)`` (K is 0 without --checkpoint-dir).
"""

from __future__ import annotations

import argparse
import os
import sys
import time

# examples/digits.py and long_jobs.py, beside this script (its directory is on sys.path when it
# runs).
from digits import load_data
from long_jobs import add_long_job_options, check_long_job_options

SEED = 1234


def port_base(text: str):
    """--port-base: a port number, or 'auto' (free ports on each node)."""
    return text if text == "auto" else int(text)


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--epochs", type=int, default=5, help="passes of fit (default 5)")
    p.add_argument("--steps-per-epoch", type=int, default=20,
                   help="training steps per epoch, the same on every process (default 20)")
    p.add_argument("--batch-per-worker", type=int, default=32,
                   help="examples per step from each process (default 32)")
    p.add_argument("--learning-rate", type=float, default=0.01, help="Adam's (default 0.01)")
    p.add_argument("--port-base", type=port_base,
                   help="JAX coordinator's port (task 0's; default $MPI_RESOLVER_PORT_BASE, "
                        "else 8888), or 'auto'")
    p.add_argument("--seed", type=int, default=SEED, help="seed of everything (default 1234)")
    add_long_job_options(p, "a directory every node sees: resume from it, save there "
                            "periodically and on Slurm's signal (then requeue the job)",
                         background=True)
    args = p.parse_args(argv)
    for name in ("epochs", "steps_per_epoch", "batch_per_worker"):
        if getattr(args, name) < 1:
            p.error(f"--{name.replace('_', '-')} must be at least 1")
    check_long_job_options(p, args)
    return args


def emit(line: str) -> None:
    """Prints ``line`` in one write (launchers forward each write as it comes)."""
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def shard(x, y, index: int, count: int, rows: int):
    """Returns this process's shard of (x, y): every count-th example from ``index``, cycled
    or cut to ``rows`` (as train.py's repeated dataset), so that every process runs the same
    number of steps."""
    import numpy as np

    mine_x, mine_y = x[index::count], y[index::count]
    take = np.arange(rows) % len(mine_x)
    return mine_x[take], mine_y[take]


def build_model(keras, learning_rate: float):
    """train.py's model, compiled for fit."""
    model = keras.Sequential([keras.Input(shape=(64,)),
                              keras.layers.Dense(64, activation="relu"),
                              keras.layers.Dense(10)])
    model.compile(optimizer=keras.optimizers.Adam(learning_rate=learning_rate),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  metrics=["accuracy"])
    return model


def local_weights(model):
    """Returns the model's weights as NumPy arrays from this process's own copy (DataParallel
    replicates every variable on every process)."""
    import numpy as np

    return [np.asarray(v.value.addressable_data(0)) for v in model.weights]


def weights_digest(model) -> str:
    """Returns a short digest of this process's copy of the weights."""
    import hashlib

    digest = hashlib.sha256()
    for w in local_weights(model):
        digest.update(w.tobytes())
    return digest.hexdigest()[:16]


def held_out_accuracy(model, x_test, y_test) -> float:
    """Accuracy on the test split, computed locally from this process's copy of the weights
    (no collective: every process can do it, none waits)."""
    import numpy as np

    w1, b1, w2, b2 = local_weights(model)[:4]
    logits = np.maximum(x_test @ w1 + b1, 0.0) @ w2 + b2
    return float(np.mean(np.argmax(logits, axis=1) == y_test))


def make_progress(keras, args, say, steps: dict):
    """Returns the callback that counts the steps done and prints train.py's epoch lines."""
    start = time.monotonic()

    class Progress(keras.callbacks.Callback):
        def on_train_batch_end(self, batch, logs=None):
            steps["done"] += 1

        def on_epoch_end(self, epoch, logs=None):
            say(f"epoch {epoch + 1}/{args.epochs}: loss {logs['loss']:.4f}  train accuracy "
                f"{logs['accuracy']:.4f}  ({time.monotonic() - start:.1f} s)")
    return Progress()


def main(argv=None) -> int:
    args = parse_args(argv)
    os.environ.setdefault("KERAS_BACKEND", "jax")  # before Keras is imported
    from mpi_resolver.jax import initialize

    # First thing, before any JAX computation. A CPU-only JAX uses no GPU, whatever the node
    # has: gpus_per_node=0 there (the package then selects JAX's gloo collectives).
    gpus = None if _jax_has_gpu_plugin() else 0
    res = initialize(port_base=args.port_base, gpus_per_node=gpus)
    import jax
    import keras

    index, count = jax.process_index(), jax.process_count()
    is_chief = index == 0

    def say(line: str) -> None:
        if is_chief:
            emit(line)

    emit(f"process {index}/{count}: {res.layout.addresses[res.rank]}, coordinator "
         f"{res.distributed.coordinator_address}, devices {len(jax.local_devices())} local / "
         f"{len(jax.devices())} global")
    keras.utils.set_random_seed(args.seed)  # the same initial weights on every process
    keras.distribution.set_distribution(
        keras.distribution.DataParallel(devices=jax.devices(), auto_shard_dataset=False))
    x_train, y_train, x_test, y_test = load_data(args.seed)
    rows = args.batch_per_worker * args.steps_per_epoch
    x, y = shard(x_train, y_train, index, count, rows)
    say(f"processes: {count}  batch: {args.batch_per_worker} per process x {count} = "
        f"{args.batch_per_worker * count} global; {args.epochs} epochs x "
        f"{args.steps_per_epoch} steps; Keras {keras.__version__} on JAX {jax.__version__}")
    model = build_model(keras, args.learning_rate)
    job = long_job(args) if args.checkpoint_dir else None
    resumed = 0
    if job is not None:
        from mpi_resolver.jax import restore_model

        resumed = restore_model(job, model)  # the weights and Adam's state
    if resumed:
        say(f"resumed from the checkpoint in {args.checkpoint_dir} at step {resumed}")
    steps = {"done": resumed}
    try:
        train(keras, args, model, x, y, steps, say, job)
    except SystemExit:  # saved on Slurm's signal: the exit code says what comes next
        say(f"steps done: {steps['done']} (resumed from {resumed})")
        raise
    if job is not None:  # training completed: recorded, then the checkpoints go
        job.complete(remove=True)
    emit(f"process {index}: weights digest {weights_digest(model)}")  # the same everywhere
    say(f"final test accuracy: {held_out_accuracy(model, x_test, y_test):.4f}")
    say(f"steps done: {steps['done']} (resumed from {resumed})")
    return 0


def long_job(args):
    """Returns mpi_resolver.jax's LongJob from the long-job options."""
    from mpi_resolver.jax import LongJob

    return LongJob(args.checkpoint_dir, checkpoint_every=args.checkpoint_every, keep=args.keep,
                   node_mtbf_hours=args.node_mtbf_hours, signal=args.signal,
                   grace_period=args.grace_period, requeue=args.requeue,
                   requeue_on_time_limit=args.requeue_on_time_limit,
                   checkpoint_async=args.checkpoint_async, total_steps=total_steps(args))


def total_steps(args) -> int:
    """Returns the steps the training plans (train_jax.py's, or train_jax_loop.py's)."""
    steps = getattr(args, "steps", None)
    return steps if steps is not None else args.epochs * args.steps_per_epoch


def train(keras, args, model, x, y, steps: dict, say, job) -> None:
    """Runs fit from ``steps['done']`` to the planned total: the rest of a resumed epoch
    first, then whole epochs. With a LongJob (--checkpoint-dir), its callback saves
    periodically and, on Slurm's signal (--signal) or SIGTERM, at one step on every process,
    then requeues the job (SystemExit with its exit code)."""
    callbacks = [make_progress(keras, args, say, steps)]
    if job is not None:
        from mpi_resolver.jax import keras_callback

        callbacks.append(keras_callback(job, first_step=steps["done"]))
    spe, batch = args.steps_per_epoch, args.batch_per_worker
    first, into = divmod(steps["done"], spe)
    if into:  # resumed within an epoch: its remaining steps
        left = (spe - into) * batch
        model.fit(x[:left], y[:left], batch_size=batch, epochs=first + 1, initial_epoch=first,
                  shuffle=True, verbose=0, callbacks=callbacks)
        first += 1
    if first < args.epochs:
        model.fit(x, y, batch_size=batch, epochs=args.epochs, initial_epoch=first,
                  shuffle=True, verbose=0, callbacks=callbacks)


def _jax_has_gpu_plugin() -> bool:
    """Returns True where a CUDA or ROCm plugin of JAX is installed (read without starting
    JAX's backends, which must come after initialize())."""
    from importlib.util import find_spec

    return any(find_spec(name) is not None for name in
               ("jax_cuda12_plugin", "jax_cuda13_plugin", "jax_rocm60_plugin",
                "jax_rocm7_plugin"))


if __name__ == "__main__":
    sys.exit(main())
