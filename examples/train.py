"""Multi-worker training with MPIClusterResolver: a small Keras classifier on handwritten digits.

Run it the way you run any MPI job; every process is one TensorFlow worker:

    srun --mpi=pmix python examples/train.py --epochs 5            # Slurm (see train.sbatch)
    mpirun -n 4 python examples/train.py --epochs 5                # no Slurm (see mpirun.sh)
    srun --mpi=pmix python examples/train.py --fit                 # Keras 2 (tf_keras) model.fit
    srun --mpi=pmix python examples/train.py --checkpoint-dir ckpt  # save on Slurm's signal,
                                                   # requeue, resume (see train.sbatch)

What it shows:
  * ``MultiWorkerMirroredStrategy(cluster_resolver=MPIClusterResolver())``: the resolver turns
    the Slurm step (cross-checked with MPI) or the MPI world into the ClusterSpec, this
    process's task and its GPUs; nothing else to configure.
  * Data parallelism done by hand: global batch = per-worker batch x number of workers; each
    worker reads its own shard of the training split (shard by worker index, auto-sharding
    off), and the loss is averaged over the *global* batch so that the all-reduced gradients
    are the gradients of the global batch.
  * By default, a custom training loop with ``strategy.run`` and Keras 3. Not ``model.fit``:
    with Keras 3 (TensorFlow 2.21 ships Keras 3), ``fit`` fails under
    MultiWorkerMirroredStrategy with ``ValueError: Attempt to convert a value (PerReplica...)``
    (keras-team/keras#20585).
  * ``--fit``: the same model, data pipeline and strategy trained with ``model.fit`` of Keras 2,
    the ``tf_keras`` package (``pip install tf-keras~=2.21.0``: its version must match
    TensorFlow's), which works under this strategy. The script sets ``TF_USE_LEGACY_KERAS=1``
    before it imports TensorFlow (so ``tf.keras`` is Keras 2 too) and imports ``tf_keras``.
    It saves a Keras 2 ``.keras`` file (load it with ``tf_keras.models.load_model``).
  * Only the chief (task 0 of 'worker') prints and saves; see ``save_model`` for why.
  * ``--checkpoint-dir DIR`` (a directory every node sees): Slurm's warning signal
    (``#SBATCH --signal=USR1@120``) or SIGTERM makes every worker save one checkpoint at the
    same step (TensorFlow's PreemptionCheckpointHandler with mpi_resolver's
    SlurmTerminationConfig; under ``--fit``, SlurmBackupAndRestore), worker 0 requeues the
    job, and the next run resumes at that step and stops at the planned total. Every run
    ends with the chief's line ``steps done: N (resumed from K)``.

The data set (1797 8x8 images of digits, examples/digits.py) ships beside it: no download. Runs are
seeded and repeatable. On a machine shared by several workers, give each TensorFlow a few
threads only (--threads, default $OMP_NUM_THREADS, else 1), or they fight over the cores.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time

# examples/digits.py, beside this script (its directory is on sys.path when it runs).
from digits import load_data

SEED = 1234


def threads_default() -> int:
    """Returns OMP_NUM_THREADS where it is a whole number >= 1, else 1."""
    text = os.environ.get("OMP_NUM_THREADS", "").strip()
    return int(text) if text.isdigit() and int(text) >= 1 else 1


def port_base(text: str):
    """--port-base: a port number, or 'auto' (free ports on each node, as other jobs there
    need theirs)."""
    return text if text == "auto" else int(text)


def whole_mib(text: str) -> int:
    """--extra-state-mib: a whole number of MiB, 0 or more."""
    if not (text.strip().isascii() and text.strip().isdigit()):
        raise argparse.ArgumentTypeError(f"{text!r}: expected a whole number of MiB (0 or "
                                         "more), e.g. 100")
    return int(text)


def parse_args(argv=None) -> argparse.Namespace:
    # examples/long_jobs.py, beside this script (its directory is on sys.path when it runs).
    from long_jobs import add_long_job_options, check_long_job_options

    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--epochs", type=int, default=5, help="passes of the loop (default 5)")
    p.add_argument("--steps-per-epoch", type=int, default=40,
                   help="training steps per epoch; every worker runs the same number "
                        "(default 40)")
    p.add_argument("--batch-per-worker", type=int, default=32,
                   help="examples per step on each worker; global batch = this x workers "
                        "(default 32)")
    p.add_argument("--learning-rate", type=float, default=0.01, help="Adam's (default 0.01)")
    p.add_argument("--save", metavar="PATH.keras",
                   help="where the chief saves the trained model (Keras format, .keras)")
    p.add_argument("--port-base", type=port_base,
                   help="first gRPC port of TensorFlow's workers on each node (default "
                        "$MPI_RESOLVER_PORT_BASE, else 8888); 'auto' picks ports free on each "
                        "node, for jobs that share nodes")
    p.add_argument("--address", default="host", metavar="RULE",
                   help="what the ClusterSpec names each node by: host (default), fqdn, ip, "
                        "iface:NAME (e.g. iface:ib0) or a name with {host}, e.g. '{host}-ib0'")
    p.add_argument("--gpus-per-node", type=int, metavar="N",
                   help="GPUs on each node (default: 0 with a CPU build of TensorFlow, else "
                        "CUDA_VISIBLE_DEVICES or nvidia-smi, as the resolver finds them)")
    p.add_argument("--threads", type=int, default=threads_default(),
                   help="TensorFlow threads per worker (intra-op and inter-op); keep it low "
                        "when several workers share a machine (default $OMP_NUM_THREADS, as "
                        "the GPU template sets it from --cpus-per-task, else 1)")
    p.add_argument("--collective", choices=("auto", "ring", "nccl"), default="auto",
                   help="MultiWorkerMirroredStrategy's all-reduce: nccl on GPUs (one GPU per "
                        "task, not shared), ring (gRPC, CPU too), or auto (default)")
    p.add_argument("--collective-timeout", type=float, default=None, metavar="SECONDS",
                   help="give up on a collective after this long instead of waiting for a "
                        "worker for ever (CommunicationOptions.timeout_seconds)")
    p.add_argument("--log-every", type=int, default=0, metavar="STEPS",
                   help="print the running loss every STEPS steps as well as per epoch")
    p.add_argument("--seed", type=int, default=SEED,
                   help="seed of everything: split, shuffling, weights (default %(default)s)")
    p.add_argument("--fit", action="store_true",
                   help="train with model.fit of Keras 2 (the tf_keras package, pip install "
                        "tf-keras matching TensorFlow's version) instead of the custom loop")
    add_long_job_options(p, "a directory every node sees: resume from the checkpoint there, "
                            "and save one when Slurm's warning signal or SIGTERM comes",
                         background=True)
    p.add_argument("--extra-state-mib", type=whole_mib, default=0, metavar="M",
                   help="adds M MiB of state that every step writes and every checkpoint "
                        "saves, as a larger model's would (custom loop, with "
                        "--checkpoint-dir): to see what saving such a state costs")
    args = p.parse_args(argv)
    check_long_job_options(p, args)
    if args.extra_state_mib and (args.fit or not args.checkpoint_dir):
        p.error(f"--extra-state-mib {args.extra_state_mib}: "
                + ("the custom loop's checkpoints hold it, not --fit's backup" if args.fit
                   else "it is saved into --checkpoint-dir, which is not given, and "
                        "MPI_RESOLVER_CHECKPOINT_DIR is not set"))
    if args.save and not args.save.endswith((".keras", ".h5")):
        p.error(f"--save {args.save}: Keras saves to a file ending in .keras (or .h5)")
    for name in ("epochs", "steps_per_epoch", "batch_per_worker", "threads"):
        if getattr(args, name) < 1:
            p.error(f"--{name.replace('_', '-')} must be at least 1")
    return args


def emit(line: str) -> None:
    """Prints ``line`` in one write: mpirun forwards each write as it comes, so the parts of
    one print (its text, its newline) could interleave with another rank's line."""
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def start_line(resolver) -> str:
    """Returns this rank's line at start: its rank, task, address, the GPUs it got and how
    (Slurm's binding where Slurm bound them), e.g.
    ``rank 5: worker:5 at node2:8889, GPUs 0 (shared; Slurm: SLURMD_TRES_BIND unset)``."""
    spec = resolver.cluster_spec()  # sets task_type, task_id and CUDA_VISIBLE_DEVICES
    task_type, task_id = resolver.task_type, resolver.task_id
    res = resolver.resolution
    gpus, how = res.gpus_of(res.rank)
    bind = os.environ.get("SLURMD_TRES_BIND")
    return (f"rank {res.rank}: {task_type}:{task_id} at {spec.task_address(task_type, task_id)}, "
            f"GPUs {','.join(gpus or ()) or 'none'} ({how}; Slurm: "
            f"{'SLURMD_TRES_BIND=' + bind if bind else 'SLURMD_TRES_BIND unset'})")


def main(argv=None) -> int:
    args = parse_args(argv)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # before TensorFlow is imported
    if args.fit and tensorflow_version() >= (2, 16):
        # Keras 2 for model.fit. TensorFlow reads TF_USE_LEGACY_KERAS when it is imported:
        # with it, tf.keras is tf_keras too, so nothing mixes the two Keras versions. (Up to
        # 2.15, tf.keras is Keras 2 itself, and the variable would make it look for tf_keras.)
        os.environ["TF_USE_LEGACY_KERAS"] = "1"

    import tensorflow as tf
    if args.fit:
        keras = import_tf_keras(tf)
    else:
        import keras

    from mpi_resolver import MPIClusterResolver

    # Threads must be set before TensorFlow's runtime starts (the strategy starts it).
    tf.config.threading.set_intra_op_parallelism_threads(args.threads)
    tf.config.threading.set_inter_op_parallelism_threads(args.threads)
    keras.utils.set_random_seed(args.seed)  # Python, NumPy and TensorFlow

    # The resolver reads Slurm's step (checked against MPI) or the MPI world. The strategy's
    # constructor then waits until every worker in the ClusterSpec has started: a worker that
    # never comes makes it wait for ever, so launch under `timeout` (see scripts/demo.sh).
    gpus_per_node = args.gpus_per_node
    if gpus_per_node is None and not tf.test.is_built_with_cuda():
        # A CPU build of TensorFlow (tensorflow-cpu) uses no GPU, whatever the node has. Left to
        # itself the resolver would count the node's GPUs (nvidia-smi) and the strategy would
        # then place replicas on GPU devices that this TensorFlow does not have.
        # (is_built_with_cuda() only reads build information; it does not start CUDA, which
        # must not happen before the resolver sets CUDA_VISIBLE_DEVICES.)
        gpus_per_node = 0
    resolver = MPIClusterResolver(port_base=args.port_base, gpus_per_node=gpus_per_node,
                                  address=args.address)
    emit(start_line(resolver))  # every rank, before the strategy waits for all of them
    how = tf.distribute.experimental.CommunicationImplementation
    options = tf.distribute.experimental.CommunicationOptions(
        implementation={"auto": how.AUTO, "ring": how.RING, "nccl": how.NCCL}[args.collective],
        timeout_seconds=args.collective_timeout)
    strategy = tf.distribute.MultiWorkerMirroredStrategy(cluster_resolver=resolver,
                                                         communication_options=options)
    import lost_worker  # examples/lost_worker.py: a worker lost mid-training is named, and
    lost_worker.install(tf, resolver)  # this one exits 1 at once instead of tearing down

    # task_type/task_id are set once the strategy has asked for the ClusterSpec.
    task_type, task_id = resolver.task_type, resolver.task_id
    num_workers = len(resolver.cluster_spec().as_dict().get("worker", []))
    is_chief = task_type == "chief" or (task_type == "worker" and task_id == 0)

    def say(*parts) -> None:
        if is_chief:
            emit(" ".join(str(p) for p in parts))

    global_batch = args.batch_per_worker * num_workers
    say(f"workers: {num_workers}  this: {task_type}:{task_id} on {resolver.master() or '-'}  "
        f"replicas in sync: {strategy.num_replicas_in_sync}")
    say(f"batch: {args.batch_per_worker} per worker x {num_workers} workers = {global_batch} "
        f"global; {args.epochs} epochs x {args.steps_per_epoch} steps")
    version = getattr(keras, "__version__", None) or tf.__version__  # 2.15's tf.keras: none
    where = " (tf_keras)" if tensorflow_version() >= (2, 16) else " (tf.keras)"
    say(f"training: {'model.fit' if args.fit else 'custom loop'}, Keras {version}"
        f"{where if args.fit else ''}")

    x_train, y_train, x_test, y_test = load_data(args.seed)

    def dataset_fn(input_context: tf.distribute.InputContext) -> tf.data.Dataset:
        """This worker's shard of the training split, batched per worker, repeated."""
        batch = input_context.get_per_replica_batch_size(global_batch)
        ds = tf.data.Dataset.from_tensor_slices((x_train, y_train))
        # Shard by worker, before shuffling: every example is read by exactly one worker.
        ds = ds.shard(input_context.num_input_pipelines, input_context.input_pipeline_id)
        ds = ds.shuffle(len(x_train), seed=args.seed, reshuffle_each_iteration=True)
        # repeat() then drop_remainder: every worker has a full batch at every step, so no
        # worker runs out while the others wait for it in the all-reduce.
        ds = ds.repeat().batch(batch, drop_remainder=True).prefetch(2)
        # distribute_datasets_from_function does not auto-shard; say so explicitly anyway, for
        # readers who copy this pipeline into strategy.experimental_distribute_dataset (which
        # would otherwise shard a second time, by file or by element).
        options = tf.data.Options()
        off = tf.data.experimental.AutoShardPolicy.OFF
        options.experimental_distribute.auto_shard_policy = off
        return ds.with_options(options)

    if args.fit:
        model, steps = fit(args, keras, strategy, dataset_fn, say)
        accuracy = held_out_accuracy(model, x_test, y_test)
        if args.save:
            save_model(model, args.save, is_chief, every_worker=True)
    else:
        model, steps = custom_loop(args, tf, keras, strategy, resolver, dataset_fn,
                                   global_batch, say)
        accuracy = held_out_accuracy(model, x_test, y_test)
        if args.save:
            save_model(model, args.save, is_chief)
    say(f"final test accuracy: {accuracy:.4f}")
    if steps.config is not None:  # completed (and recorded) at the end of training
        say(steps.line())
    return 0


class Steps:
    """The steps this run started from (``resumed``: the checkpoint's, 0 on a fresh start)
    and has done so far, for the chief's last line."""

    def __init__(self, resumed: int = 0) -> None:
        self.resumed = self.done = resumed
        self.config = None  # the long job's SlurmTerminationConfig, where there is one

    def line(self) -> str:
        return f"steps done: {self.done} (resumed from {self.resumed})"


def termination_config(args, resolver):
    """Returns mpi_resolver's SlurmTerminationConfig from the command line (after the
    strategy: MultiWorkerMirroredStrategy takes SIGTERM when it is built)."""
    from mpi_resolver import SlurmTerminationConfig

    return SlurmTerminationConfig(resolver, signal=args.signal, grace_period=args.grace_period,
                                  requeue=args.requeue,
                                  requeue_on_time_limit=args.requeue_on_time_limit,
                                  checkpoint_every=args.checkpoint_every, keep=args.keep,
                                  node_mtbf_hours=args.node_mtbf_hours,
                                  total_steps=args.epochs * args.steps_per_epoch,
                                  checkpoint_async=args.checkpoint_async)


def custom_loop(args, tf, keras, strategy, resolver, dataset_fn, global_batch, say):
    """Trains with a custom loop (strategy.run); returns (model, Steps).

    With --checkpoint-dir, every step runs through TensorFlow's PreemptionCheckpointHandler:
    it restores the latest checkpoint (model, optimizer, step) when built, and on Slurm's
    signal every worker saves at the same step and the process exits (SystemExit, after the
    chief printed its steps line)."""
    with strategy.scope():
        # Variables created in the scope are mirrored: initial values are broadcast from worker
        # 0, and every update is all-reduced, so the workers' copies stay identical.
        model = keras.Sequential([
            keras.Input(shape=(64,)),
            keras.layers.Dense(64, activation="relu"),
            keras.layers.Dense(10),
        ])
        optimizer = keras.optimizers.Adam(learning_rate=args.learning_rate)
        optimizer.build(model.trainable_variables)  # its state exists for a restore to fill
    step = tf.Variable(0, dtype=tf.int64, trainable=False, name="step")
    # --extra-state-mib: each worker's own copy (outside the strategy), written every step as
    # an optimizer's slots are, saved with the model.
    extra = tf.Variable(tf.zeros([args.extra_state_mib * 2 ** 18]), trainable=False,
                        name="extra_state") if args.extra_state_mib else None
    handler = config = None
    if args.checkpoint_dir:
        checkpoint = tf.train.Checkpoint(model=model, optimizer=optimizer, step=step,
                                         **({"extra_state": extra} if extra is not None else {}))
        config = termination_config(args, resolver)
        handler = config.handler(resolver, checkpoint, args.checkpoint_dir)
    steps = Steps(int(step.numpy()))
    steps.config = config
    if steps.resumed:
        say(f"resumed from the checkpoint in {args.checkpoint_dir} at step {steps.resumed}")
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction="none")

    def step_fn(x, y):
        with tf.GradientTape() as tape:
            logits = model(x, training=True)
            # Average over the GLOBAL batch: the all-reduce sums the workers' gradients.
            loss = tf.nn.compute_average_loss(loss_fn(y, logits), global_batch_size=global_batch)
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables, strict=False))
        correct = tf.reduce_sum(tf.cast(tf.equal(tf.argmax(logits, axis=1, output_type=tf.int32),
                                                 y), tf.float32))
        return loss, correct

    @tf.function
    def train_step(iterator):
        x, y = next(iterator)
        loss, correct = strategy.run(step_fn, args=(x, y))
        if extra is not None:
            extra.assign_add(tf.ones_like(extra))
        # Collectives: every worker must call train_step the same number of times.
        return (strategy.reduce(tf.distribute.ReduceOp.SUM, loss, axis=None),
                strategy.reduce(tf.distribute.ReduceOp.SUM, correct, axis=None))

    # dataset_fn shards by input_pipeline_id, which for this strategy is the worker's index
    # (task_id of 'worker'); it runs once on each worker. A resumed run skips the batches
    # its steps so far read, so that it goes on with the data where the last run stopped.
    iterator = iter(strategy.distribute_datasets_from_function(
        lambda ctx: dataset_fn(ctx).skip(steps.resumed)))
    run = handler.run if handler is not None else (lambda f, *a: f(*a))
    from mpi_resolver import StepWatchdog

    try:
        # A worker alive but stuck (an input pipeline that never yields, a deadlock) ends the
        # step with its stacks and exit 124 instead of holding every worker for ever.
        with StepWatchdog(resolver=resolver) as watchdog:
            train_epochs(args, run, train_step, iterator, step, steps, global_batch, say,
                         watchdog.tick)
    except SystemExit:  # the handler saved on Slurm's signal, and exits
        say(steps.line())
        raise
    if config is not None:
        # Training is over: every worker says so, the manifest records the job's training
        # completed (a failure after it, in the evaluation, trains nothing again), the
        # checkpoints go, and SIGTERM ends the process again.
        config.complete()
    return model, steps


def train_epochs(args, run, train_step, iterator, step, steps, global_batch, say,
                 tick=lambda: None):
    """The loop by hand, not model.fit: Keras 3's fit fails under MultiWorkerMirroredStrategy
    with TensorFlow 2.21 ("Attempt to convert a value (PerReplica...)", keras-team/keras#20585).
    Runs from ``steps.done`` to the planned total, one ``run`` (the preemption handler's) per
    step; ``step`` is the checkpoint's count, one more after each; ``tick`` after each step
    (the step watchdog's)."""
    start = time.monotonic()
    for epoch in range(steps.done // args.steps_per_epoch + 1, args.epochs + 1):
        total_loss = total_correct = 0.0
        done_before = steps.done
        while steps.done < epoch * args.steps_per_epoch:
            loss, correct = run(train_step, iterator)
            step.assign_add(1)
            steps.done += 1
            tick()
            total_loss += float(loss)
            total_correct += float(correct)
            if args.log_every and steps.done % args.log_every == 0:
                say(f"  step {steps.done}: loss {float(loss):.4f}")
        count = steps.done - done_before
        say(f"epoch {epoch}/{args.epochs}: loss {total_loss / count:.4f}  "
            f"train accuracy {total_correct / (count * global_batch):.4f}  "
            f"({time.monotonic() - start:.1f} s)")


def tensorflow_version():
    """Returns the installed TensorFlow's (major, minor), read without importing it."""
    from importlib.metadata import PackageNotFoundError, version

    for name in ("tensorflow", "tensorflow-cpu"):
        try:
            return tuple(int(v) for v in version(name).split(".")[:2])
        except (PackageNotFoundError, ValueError):
            continue
    return (0, 0)


def import_tf_keras(tf):
    """Returns Keras 2: tf.keras up to TensorFlow 2.15, else the tf_keras module; or exits
    with how to install it."""
    major, minor = (int(v) for v in tf.__version__.split(".")[:2])
    if (major, minor) < (2, 16):
        return tf.keras  # Keras 2 itself
    try:
        import tf_keras
    except ImportError as e:
        major_minor = ".".join(tf.__version__.split(".")[:2])
        sys.exit(f"train.py --fit needs Keras 2, the tf_keras package ({e}): "
                 f"pip install 'tf-keras~={major_minor}.0' (its version must match "
                 f"TensorFlow's, {tf.__version__})")
    return tf_keras


def fit(args, keras, strategy, dataset_fn, say):
    """Trains with Keras 2's model.fit under the strategy; returns (model, Steps).

    The input is train.py's own dataset_fn, through DatasetCreator: fit calls it once per
    worker with the InputContext, as distribute_datasets_from_function does in the custom
    loop, so both paths read the same shards with the same batch sizes. The loss is averaged
    over the global batch by fit itself. With --checkpoint-dir, mpi_resolver's
    SlurmBackupAndRestore restores the backup there (fit then starts at the batch after it)
    and saves on Slurm's signal.
    """
    with strategy.scope():
        model = keras.Sequential([
            keras.Input(shape=(64,)),
            keras.layers.Dense(64, activation="relu"),
            keras.layers.Dense(10),
        ])
        model.compile(optimizer=keras.optimizers.Adam(learning_rate=args.learning_rate),
                      loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                      metrics=["accuracy"])
    start = time.monotonic()
    steps = Steps()
    spe = args.steps_per_epoch

    class Progress(keras.callbacks.Callback):
        """train.py's progress lines, printed by the chief (fit's logs are every worker's),
        and the steps done (first in the callbacks: it counts a batch before the backup
        callback may end the run on it)."""

        def on_train_batch_begin(self, batch, logs=None):
            if steps.done == steps.resumed == 0 and self.epoch * spe + batch:
                steps.resumed = steps.done = self.epoch * spe + batch  # fit resumed here
                say(f"resumed from the checkpoint in {args.checkpoint_dir} at step "
                    f"{steps.resumed}")

        def on_train_batch_end(self, batch, logs=None):
            steps.done = self.epoch * spe + batch + 1
            if args.log_every and steps.done % args.log_every == 0:
                say(f"  step {steps.done}: loss {logs['loss']:.4f}")

        def on_epoch_begin(self, epoch, logs=None):
            self.epoch = epoch

        def on_epoch_end(self, epoch, logs=None):
            say(f"epoch {epoch + 1}/{args.epochs}: loss {logs['loss']:.4f}  train accuracy "
                f"{logs['accuracy']:.4f}  ({time.monotonic() - start:.1f} s)")

    from mpi_resolver import StepWatchdogCallback

    callbacks = [Progress(), StepWatchdogCallback()]  # a stuck worker: its stacks, exit 124
    if args.checkpoint_dir:
        from mpi_resolver import SlurmBackupAndRestore

        steps.config = termination_config(args, strategy.cluster_resolver)
        callbacks.append(SlurmBackupAndRestore(args.checkpoint_dir, steps.config))
    try:
        model.fit(keras.utils.experimental.DatasetCreator(dataset_fn), epochs=args.epochs,
                  steps_per_epoch=spe, verbose=0, callbacks=callbacks)
    except SystemExit:  # saved on Slurm's signal, and exits
        say(steps.line())
        raise
    return model, steps


def held_out_accuracy(model, x_test, y_test) -> float:
    """Accuracy on the held-out split, evaluated outside strategy.run: a mirrored variable read
    in the cross-replica context is this worker's local copy, which the all-reduces keep
    identical on every worker, so no collective is needed (and none is left half-done)."""
    import numpy as np

    logits = model(x_test, training=False)
    return float(np.mean(np.argmax(np.asarray(logits), axis=1) == y_test))


def save_model(model, path: str, is_chief: bool, every_worker: bool = False) -> None:
    """Saves the model to ``path`` from the chief.

    Every worker holds the same weights, and a save from every worker to one shared path
    (a shared file system is the usual case on a cluster) has them overwrite each other's
    half-written files: the save is corrupted. Keras 3's ``model.save`` reads each mirrored
    variable's local copy and runs no collective, so the chief can save alone, after
    training and outside any strategy collective, while the other workers simply go on (and
    exit).

    Keras 2's (``--fit``, ``every_worker``) does run a collective: it saves the metrics' state
    too (fit's loss tracker and the compiled metrics), whose variables are sync-on-read, and
    reading one all-reduces it over the workers, so a chief that saves alone waits for ever
    (measured: tf_keras 2.21, in ``save_own_variables`` -> ``SyncOnReadVariable.read_value``
    -> ``collective_reduce_v2``). Then every worker must call ``save`` (as with
    ``tf.train.Checkpoint`` of the strategy's variables or ``tf.saved_model.save`` of a
    distributed function), and the non-chief workers write to a throw-away temporary
    directory instead of the shared path.
    """
    if not is_chief:
        if every_worker:
            scratch = tempfile.mkdtemp(prefix="train-save-")
            try:
                model.save(os.path.join(scratch, os.path.basename(path)))
            finally:
                shutil.rmtree(scratch, ignore_errors=True)
        return
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    model.save(path)
    emit(f"saved model: {path}")


if __name__ == "__main__":
    sys.exit(main())
