"""Parameter-server training with MPIClusterResolver: sklearn's digits, one Slurm step.

Every task of the step is one TensorFlow task. The resolver gives the job names in sorted
order to consecutive ranks: with 4 tasks (``srun -N2 -n4``), rank 0 is the chief (the
coordinator), rank 1 the parameter server, ranks 2-3 the workers:

    srun -N2 -n4 --mpi=pmix --kill-on-bad-exit=1 python examples/train_ps.py
    srun -N2 -n4 --mpi=pmix --kill-on-bad-exit=1 python examples/train_ps.py \\
        --evaluator --checkpoint-dir /shared/ckpt     # chief, evaluator, ps, worker
    mpirun -n 4 python examples/train_ps.py            # no Slurm

What it shows:
  * ``MPIClusterResolver(jobs={'chief': 1, 'ps': P, 'worker': W})``: the ClusterSpec and this
    rank's ``task_type``/``task_id``, from the Slurm step (checked against MPI) or the MPI
    world. ``--ps`` sets P; W is the rest of the tasks.
  * The ps and worker tasks start a ``tf.distribute.Server`` from that ClusterSpec
    (``task_type``, ``task_id``, ``rpc_layer``) and serve. The chief, with
    ``ParameterServerStrategy`` and ``ClusterCoordinator``, creates the variables (on the ps)
    and schedules training steps on the workers, which read and update the variables on the
    ps asynchronously. Only the chief prints progress, evaluates and saves.
  * A clean end. A TensorFlow server never stops by itself (``server.join()`` waits for
    ever), so the ps and worker tasks wait on an MPI barrier instead (``Ibarrier``, polled),
    which the chief (and the evaluator) enter when done: then every task exits 0 and the step
    ends. Every task has a time limit (``--time-limit``): past it, it exits non-zero whatever
    it waits for (a task that never arrives, a hung chief). An error exits non-zero at once,
    without waiting for anyone; ``srun --kill-on-bad-exit=1`` then ends the other tasks
    (mpirun does so by itself). ParameterServerStrategy would carry on without a lost worker,
    but a Slurm step cannot restart one, and its barrier would never complete.
  * ``--evaluator`` adds an evaluator: jobs ``{'chief': 1, 'evaluator': 1, 'ps': P,
    'worker': W}``, so rank 1 evaluates. The chief writes a checkpoint every
    ``--checkpoint-every`` steps to ``--checkpoint-dir`` (a directory every node sees); the
    evaluator restores each new one into its own copy of the model and prints its test
    accuracy, until it has evaluated the last step's. It is no part of the training cluster:
    it runs no server, so the chief connects to the ClusterSpec without it (TensorFlow's
    strategy would otherwise wait for ever to reach it). ``tf.keras.utils.SidecarEvaluator``
    is gone from Keras 3, which TensorFlow 2.21 ships (tf_keras still has it); this is the
    loop it ran.

Keras 3 (``import keras``) with a custom training loop; the data set ships with scikit-learn
(no download). Asynchronous training is not bit-for-bit repeatable: the order in which the
workers' updates reach the ps varies from run to run.
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
import time
import traceback

SEED = 1234


def port_base(text: str):
    """--port-base: a port number, or 'auto' (free ports on each node, as other jobs there
    need theirs)."""
    return text if text == "auto" else int(text)


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--steps", type=int, default=300,
                   help="training steps, over all workers (default 300)")
    p.add_argument("--steps-per-call", type=int, default=10,
                   help="steps in each function the chief schedules on a worker; more means "
                        "fewer round trips (default 10)")
    p.add_argument("--batch", type=int, default=32, help="examples per step (default 32)")
    p.add_argument("--learning-rate", type=float, default=0.01, help="Adam's (default 0.01)")
    p.add_argument("--ps", type=int, default=1, help="parameter servers (default 1)")
    p.add_argument("--evaluator", action="store_true",
                   help="make one task (rank 1: jobs sort as chief, evaluator, ps, worker) an "
                        "evaluator of the chief's checkpoints (needs --checkpoint-dir)")
    p.add_argument("--checkpoint-dir", metavar="DIR",
                   help="where the chief writes checkpoints (a directory all nodes see)")
    p.add_argument("--checkpoint-every", type=int, default=100, metavar="STEPS",
                   help="steps between checkpoints (default 100; the last step always)")
    p.add_argument("--save", metavar="PATH.keras", help="where the chief saves the model")
    p.add_argument("--port-base", type=port_base, default=8888,
                   help="first gRPC port of the tasks on each node (default 8888); 'auto' "
                        "picks ports free on each node, for jobs that share nodes")
    p.add_argument("--gpus-per-node", type=int, metavar="N",
                   help="GPUs on each node (default: 0 with a CPU build of TensorFlow, else as "
                        "the resolver finds them)")
    p.add_argument("--threads", type=int, default=1,
                   help="TensorFlow threads per task, intra-op and inter-op (default 1; a "
                        "worker's server takes at least 2 inter-op threads, see run())")
    p.add_argument("--time-limit", type=float, default=600.0, metavar="SECONDS",
                   help="every task exits non-zero if it is not done by then (default 600)")
    p.add_argument("--seed", type=int, default=SEED, help="seed of split, shuffling, weights")
    args = p.parse_args(argv)
    if args.evaluator and not args.checkpoint_dir:
        p.error("--evaluator needs --checkpoint-dir (the evaluator reads the checkpoints)")
    if args.save and not args.save.endswith(".keras"):
        p.error(f"--save {args.save}: Keras 3 saves to a file ending in .keras")
    for name in ("steps", "steps_per_call", "batch", "ps", "threads", "checkpoint_every"):
        if getattr(args, name) < 1:
            p.error(f"--{name.replace('_', '-')} must be at least 1")
    if args.time_limit <= 0:
        p.error("--time-limit must be positive")
    return args


def load_data(seed: int):
    """(x_train, y_train, x_test, y_test): as examples/train.py (digits, 20 % test split)."""
    import numpy as np
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    digits = load_digits()
    x = (digits.data / 16.0).astype(np.float32)
    y = digits.target.astype(np.int32)
    x_train, x_test, y_train, y_test = train_test_split(x, y, test_size=0.2, random_state=seed,
                                                        stratify=y)
    return x_train, y_train, x_test, y_test


def build_model(keras):
    return keras.Sequential([
        keras.Input(shape=(64,)),
        keras.layers.Dense(64, activation="relu"),
        keras.layers.Dense(10),
    ])


def held_out_accuracy(model, x_test, y_test) -> float:
    """The model's accuracy on the test split (run here, on this task's CPU)."""
    import numpy as np

    logits = np.asarray(model(x_test, training=False))
    return float(np.mean(np.argmax(logits, axis=1) == y_test))


class Task:
    """This process: its MPI communicator, its deadline, and how it ends."""

    def __init__(self, time_limit: float) -> None:
        from mpi4py import MPI
        self.MPI = MPI
        self.comm = MPI.COMM_WORLD
        self.rank = self.comm.Get_rank()
        self.size = self.comm.Get_size()
        self.name = f"rank {self.rank}"
        self.deadline = time.monotonic() + time_limit
        self.time_limit = time_limit
        self._failing = threading.Lock()
        # The watchdog: whatever this task waits on (a task that never starts its server makes
        # TensorFlow wait for ever, and TensorFlow catches SIGTERM), it ends by the deadline.
        timer = threading.Timer(time_limit, self._expired)
        timer.daemon = True
        timer.start()

    def _expired(self) -> None:
        self.fail(f"not done after --time-limit {self.time_limit:g} s; giving up")

    def fail(self, message: str, code: int = 1) -> None:
        """Exits at once with ``code``: no MPI_Finalize (it would wait for the other tasks),
        no TensorFlow teardown. srun --kill-on-bad-exit=1 (or mpirun) ends the others."""
        self._failing.acquire()  # the first failure speaks and exits; a second one waits
        print(f"{self.name}: {message}", file=sys.stderr, flush=True)
        sys.stdout.flush()
        os._exit(code)

    def done(self) -> None:
        """Enters the barrier that ends the step and waits (polled, bounded) until every task
        has entered it; then exits 0."""
        request = self.comm.Ibarrier()
        while not request.Test():
            if time.monotonic() > self.deadline:
                self.fail("the other tasks did not finish within --time-limit")
            time.sleep(0.05)
        sys.stdout.flush()
        sys.stderr.flush()
        self.MPI.Finalize()  # after the barrier every task finalizes at once
        os._exit(0)  # a TensorFlow server cannot be stopped; skip its teardown


def main(argv=None) -> int:
    args = parse_args(argv)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    task = Task(args.time_limit)  # starts MPI (mpi4py) and the watchdog
    try:
        run(args, task)
    except SystemExit as e:
        if e.code:
            task.fail(f"exit {e.code}", e.code if isinstance(e.code, int) else 1)
    except BaseException:  # noqa: BLE001 - any error ends the step, at once
        traceback.print_exc()
        task.fail("failed (traceback above)")
    task.done()
    return 0


def run(args: argparse.Namespace, task: Task) -> None:
    import tensorflow as tf
    import keras

    from mpi_resolver import MPIClusterResolver

    tf.config.threading.set_intra_op_parallelism_threads(args.threads)
    tf.config.threading.set_inter_op_parallelism_threads(args.threads)
    keras.utils.set_random_seed(args.seed)

    workers = task.size - 1 - args.ps - (1 if args.evaluator else 0)
    if workers < 1:
        task.fail(f"{task.size} tasks leave no worker: the chief, {args.ps} ps"
                  f"{' and the evaluator' if args.evaluator else ''} take them all", 2)
    jobs = {"chief": 1, "ps": args.ps, "worker": workers}
    if args.evaluator:
        jobs["evaluator"] = 1
    gpus_per_node = args.gpus_per_node
    if gpus_per_node is None and not tf.test.is_built_with_cuda():
        gpus_per_node = 0  # a CPU build of TensorFlow: see examples/train.py
    resolver = MPIClusterResolver(jobs=jobs, port_base=args.port_base,
                                  gpus_per_node=gpus_per_node)
    cluster_spec = resolver.cluster_spec()  # sets task_type and task_id
    task_type, task_id = resolver.task_type, resolver.task_id
    task.name = f"{task_type}:{task_id}"

    if task_type in ("ps", "worker"):
        # A worker runs each function the chief schedules on one of its inter-op threads,
        # and that function waits on other ops of the worker (its dataset iterator, the
        # variables' reads and updates on the ps): with a single inter-op thread it waits
        # for ever (measured, TensorFlow 2.21). The ps is fine with one.
        inter_op = max(2, args.threads) if task_type == "worker" else args.threads
        config = tf.compat.v1.ConfigProto(intra_op_parallelism_threads=args.threads,
                                          inter_op_parallelism_threads=inter_op)
        tf.distribute.Server(cluster_spec, job_name=task_type, task_index=task_id,
                             protocol=resolver.rpc_layer or "grpc", config=config, start=True)
        print(f"{task.name}: serving on {cluster_spec.task_address(task_type, task_id)} "
              f"(pid {os.getpid()})", flush=True)
        return  # main() then waits on the barrier
    if task_type == "evaluator":
        evaluate(args, tf, keras, task)
        return
    train(args, tf, keras, resolver, cluster_spec, task)


def train(args, tf, keras, resolver, cluster_spec, task: Task) -> None:
    """The chief: variables on the ps, steps scheduled on the workers, evaluation, saving."""
    spec = cluster_spec.as_dict()
    num_workers, num_ps = len(spec["worker"]), len(spec["ps"])
    print(f"cluster: {', '.join(f'{job} {len(spec[job])}' for job in sorted(spec))}  "
          f"this: {task.name} on {cluster_spec.task_address('chief', 0)} (pid {os.getpid()})",
          flush=True)
    if "evaluator" in spec:
        # The evaluator is no part of the training cluster: it runs no server, so the chief
        # must not wait to connect to it.
        training = {job: addrs for job, addrs in spec.items() if job != "evaluator"}
        resolver = tf.distribute.cluster_resolver.SimpleClusterResolver(
            tf.train.ClusterSpec(training), task_type="chief", task_id=0,
            rpc_layer=resolver.rpc_layer or "grpc")
    start = time.monotonic()
    strategy = tf.distribute.ParameterServerStrategy(resolver)
    coordinator = tf.distribute.coordinator.ClusterCoordinator(strategy)
    print(f"connected to {num_workers} workers and {num_ps} ps in "
          f"{time.monotonic() - start:.1f} s", flush=True)

    with strategy.scope():
        model = build_model(keras)  # its variables live on the ps; seeded initial weights
        optimizer = keras.optimizers.Adam(learning_rate=args.learning_rate)
        step_counter = tf.Variable(0, dtype=tf.int64, trainable=False)

    x_train, y_train, x_test, y_test = load_data(args.seed)

    def dataset_fn(input_context):
        """Every worker runs this same pipeline (ParameterServerStrategy does not shard: the
        workers do not take turns over one data set). Its shuffle has no seed, and the global
        seed is cleared before it is built, so each worker draws its own order when it creates
        its dataset; with a seed, all workers would read the same batches in the same order."""
        ds = tf.data.Dataset.from_tensor_slices((x_train, y_train))
        ds = ds.shuffle(len(x_train)).repeat()
        return ds.batch(input_context.get_per_replica_batch_size(args.batch)).prefetch(2)

    @tf.function
    def per_worker_dataset_fn():
        return strategy.distribute_datasets_from_function(dataset_fn)

    tf.random.set_seed(None)  # see dataset_fn
    per_worker_iterator = iter(coordinator.create_per_worker_dataset(per_worker_dataset_fn))
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction="none")

    def step_fn(x, y):
        with tf.GradientTape() as tape:
            logits = model(x, training=True)
            loss = tf.nn.compute_average_loss(loss_fn(y, logits))
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables, strict=False))
        correct = tf.reduce_sum(tf.cast(
            tf.equal(tf.argmax(logits, axis=1, output_type=tf.int32), y), tf.float32))
        return loss, correct

    @tf.function
    def train_calls(iterator, n):
        """n steps on one worker: one round trip from the chief."""
        total_loss = tf.constant(0.0)
        total_correct = tf.constant(0.0)
        for _ in tf.range(n):
            x, y = next(iterator)
            loss, correct = strategy.run(step_fn, args=(x, y))
            total_loss += strategy.reduce("SUM", loss, axis=None)
            total_correct += strategy.reduce("SUM", correct, axis=None)
        step_counter.assign_add(tf.cast(n, tf.int64))
        return total_loss, total_correct

    checkpoint = manager = None
    if args.checkpoint_dir:
        checkpoint = tf.train.Checkpoint(model=model, step=step_counter)
        manager = tf.train.CheckpointManager(checkpoint, args.checkpoint_dir, max_to_keep=3)

    print(f"training: {args.steps} steps of {args.batch} examples, scheduled "
          f"{args.steps_per_call} at a time on {num_workers} workers", flush=True)
    start = time.monotonic()
    done = 0
    report_every = args.checkpoint_every
    while done < args.steps:
        chunk = min(report_every - done % report_every, args.steps - done)
        results = []
        scheduled = 0
        while scheduled < chunk:
            n = min(args.steps_per_call, chunk - scheduled)
            results.append(coordinator.schedule(train_calls, args=(per_worker_iterator,
                                                                   tf.constant(n))))
            scheduled += n
        coordinator.join()  # every step scheduled so far has run
        done += chunk
        loss = sum(float(r.fetch()[0]) for r in results) / chunk
        accuracy = sum(float(r.fetch()[1]) for r in results) / (chunk * args.batch)
        line = (f"step {done}/{args.steps}: loss {loss:.4f}  train accuracy {accuracy:.4f}  "
                f"({time.monotonic() - start:.1f} s)")
        if manager is not None:
            path = manager.save(checkpoint_number=done)
            line += f"  checkpoint {os.path.basename(path)}"
        print(line, flush=True)
    if int(step_counter.numpy()) != args.steps:
        raise RuntimeError(f"ran {int(step_counter.numpy())} steps, expected {args.steps}")

    # The chief reads the variables from the ps and evaluates here.
    accuracy = held_out_accuracy(model, x_test, y_test)
    if args.save:
        os.makedirs(os.path.dirname(os.path.abspath(args.save)), exist_ok=True)
        model.save(args.save)
        print(f"saved model: {args.save}", flush=True)
    print(f"final test accuracy: {accuracy:.4f}", flush=True)


def evaluate(args, tf, keras, task: Task) -> None:
    """The evaluator: restores each new checkpoint of the chief and evaluates it, until the
    last step's; no part of the training cluster (no server, no strategy)."""
    _, _, x_test, y_test = load_data(args.seed)
    model = build_model(keras)
    step = tf.Variable(0, dtype=tf.int64, trainable=False)
    checkpoint = tf.train.Checkpoint(model=model, step=step)
    print(f"{task.name}: watching {args.checkpoint_dir} (pid {os.getpid()})", flush=True)
    seen = None
    while True:
        latest = tf.train.latest_checkpoint(args.checkpoint_dir)
        if latest is None or latest == seen:
            time.sleep(0.2)  # the watchdog bounds this wait
            continue
        # A checkpoint the chief has just rotated out may be gone already: take the next one.
        try:
            checkpoint.restore(latest).expect_partial()
        except (tf.errors.NotFoundError, ValueError):
            time.sleep(0.2)
            continue
        seen = latest
        accuracy = held_out_accuracy(model, x_test, y_test)
        print(f"{task.name}: checkpoint {os.path.basename(latest)} (step {int(step.numpy())}): "
              f"test accuracy {accuracy:.4f}", flush=True)
        if int(step.numpy()) >= args.steps:
            return


if __name__ == "__main__":
    sys.exit(main())
