"""Parameter-server training with MPIClusterResolver: the digits data set, one Slurm step.

Every task of the step is one TensorFlow task. The resolver gives the job names in sorted
order to consecutive ranks: with 4 tasks (``srun -N2 -n4``), rank 0 is the chief (the
coordinator), rank 1 the parameter server, ranks 2-3 the workers:

    srun -N2 -n4 --mpi=pmix --kill-on-bad-exit=1 python examples/train_ps.py
    srun -N2 -n4 --mpi=pmix --kill-on-bad-exit=1 python examples/train_ps.py \\
        --evaluator --checkpoint-dir /shared/ckpt     # chief, evaluator, ps, worker
    srun -N2 -n4 --mpi=pmix --kill-on-bad-exit=1 python examples/train_ps.py \\
        --checkpoint-dir /shared/ckpt     # in sbatch --requeue --signal=USR1@120: save on
                                          # Slurm's signal, requeue, resume
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
    ever), so the ps and worker tasks wait on MPI instead: a non-blocking all-reduce (MAX,
    polled) of the tasks' exit codes, which works as a barrier that also tells everyone the
    chief's code. The ps and workers hand in 0 and wait; the chief (and the evaluator) hand
    in theirs when done: then every task exits with the chief's code (0 at a normal end) and
    the step ends. Every task has a time limit (``--time-limit``, counted from its
    ClusterSpec; the start before it, TensorFlow's import and the resolver's exchange, is
    bounded by ``--timeout``): past it, it exits non-zero whatever it waits for (a task that
    never starts its server, a hung chief). An error exits non-zero
    at once, without waiting for anyone; ``srun --kill-on-bad-exit=1`` then ends the other
    tasks (mpirun does so by itself). ParameterServerStrategy would carry on without a lost
    worker, but a Slurm step cannot restart one, and its barrier would never complete.
  * ``--evaluator`` adds an evaluator: jobs ``{'chief': 1, 'evaluator': 1, 'ps': P,
    'worker': W}``, so rank 1 evaluates. The chief writes a checkpoint every
    ``--checkpoint-every`` steps to ``--checkpoint-dir`` (a directory every node sees); the
    evaluator restores each new one into its own copy of the model and prints its test
    accuracy, until it has evaluated the last step's. It is no part of the training cluster:
    it runs no server, so the chief connects to the ClusterSpec without it (TensorFlow's
    strategy would otherwise wait for ever to reach it). ``tf.keras.utils.SidecarEvaluator``
    is gone from Keras 3, which TensorFlow 2.21 ships (tf_keras still has it); this is the
    loop it ran.
  * Long jobs (``--checkpoint-dir DIR``): the chief resumes from the latest checkpoint in DIR
    (model, optimizer, and the step count, a variable of the checkpoint) and trains on to the
    planned ``--steps``. Slurm's warning signal (``#SBATCH --signal=USR1@120``; ``--signal``
    names another) or SIGTERM makes the chief stop scheduling, wait for the calls already
    scheduled (``coordinator.join()``), save one checkpoint of that step, and requeue the job
    (mpi_resolver's ``SlurmTerminationConfig``, its ``exit_fn``); then every task exits with
    the chief's code: 75 where the job is to run again, 143 where SIGTERM ends it (scancel,
    the time limit). Every task notes the signals from its start (a flag, nothing else), so
    that none dies of them first, and a second signal during the save changes nothing. The
    evaluator evaluates the chief's last checkpoint, the signal's, and exits with the rest.
    Every run of the chief ends with the line ``steps done: N (resumed from K)``. A finished
    run's checkpoints stay (the evaluator reads them): the same command again resumes at the
    end and trains no more; give a new DIR to train afresh.

What cannot be done for ParameterServerStrategy: TensorFlow's PreemptionCheckpointHandler
refuses a cluster with a 'ps' job (NotImplementedError), so the chief saves by itself, between
the calls it schedules; a call that is running when the signal comes is waited for (at most
2 calls per worker are scheduled ahead of the chief, so the wait is a few calls), not cut
short. Only the chief's view is saved: the variables (on the ps), the optimizer and the step
count. The workers' data iterators are not in the checkpoint (each worker shuffles on its own,
without a seed, and a resumed run draws new orders), nor is anything a worker holds between
calls. Training is asynchronous: "the step" is the chief's count of the steps its calls ran,
not a moment at which the workers stood still together.

Keras 3 (``import keras``) with a custom training loop; the data set ships beside it
(examples/digits.py: no download). Asynchronous training is not bit-for-bit repeatable: the
order in which the workers' updates reach the ps varies from run to run.
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
import time
import traceback
from array import array

# examples/digits.py, beside this script (its directory is on sys.path when it runs).
from digits import load_data

SEED = 1234
#: Calls the chief schedules ahead per worker: enough to keep every worker busy, few enough
#: that a checkpoint on Slurm's signal waits for a few calls only.
AHEAD_PER_WORKER = 2


def port_base(text: str):
    """--port-base: a port number, or 'auto' (free ports on each node, as other jobs there
    need theirs)."""
    return text if text == "auto" else int(text)


def parse_args(argv=None) -> argparse.Namespace:
    # examples/long_jobs.py, beside this script (its directory is on sys.path when it runs).
    from long_jobs import add_long_job_options, check_long_job_options

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
                   help="every task exits non-zero if it is not done this long after it has "
                        "its ClusterSpec (default 600)")
    p.add_argument("--timeout", type=float, default=60.0, metavar="SECONDS",
                   help="how long the resolver's MPI exchange waits for every task to arrive "
                        "(MPIClusterResolver's timeout; default 60)")
    p.add_argument("--seed", type=int, default=SEED, help="seed of split, shuffling, weights")
    add_long_job_options(p, "where the chief writes checkpoints (a directory all nodes see); it "
                            "resumes from the latest there, and saves one on Slurm's signal",
                        periodic=False)
    args = p.parse_args(argv)
    check_long_job_options(p, args)
    if args.evaluator and not args.checkpoint_dir:
        p.error("--evaluator needs --checkpoint-dir (the evaluator reads the checkpoints)")
    if args.save and not args.save.endswith(".keras"):
        p.error(f"--save {args.save}: Keras 3 saves to a file ending in .keras")
    for name in ("steps", "steps_per_call", "batch", "ps", "threads", "checkpoint_every"):
        if getattr(args, name) < 1:
            p.error(f"--{name.replace('_', '-')} must be at least 1")
    if args.time_limit <= 0:
        p.error("--time-limit must be positive")
    if args.timeout <= 0:
        p.error("--timeout must be positive")
    return args


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
    """This process: its MPI communicator, its deadline, the signals it noted, and how it
    ends."""

    def __init__(self, time_limit: float, signals=None) -> None:
        from mpi4py import MPI
        self.MPI = MPI
        self.comm = MPI.COMM_WORLD
        self.rank = self.comm.Get_rank()
        self.size = self.comm.Get_size()
        # The step's end has a communicator of its own: its collective is posted while the
        # resolver may still run its own on COMM_WORLD (collective; every task, first thing).
        self._end_comm = self.comm.Dup()
        self._end = None
        self._codes = (array("i", [0]), array("i", [0]))  # this task's, the step's
        self.signals = signals  # with --checkpoint-dir: what watch_signals() installed
        self.name = f"rank {self.rank}"
        self.deadline = float("inf")  # arm() sets it
        self.time_limit = time_limit
        self._failing = threading.Lock()

    def arm(self) -> None:
        """Starts the watchdog, once (at the ClusterSpec: the start before it, TensorFlow's
        import and the resolver's exchange, is --timeout's): whatever this task waits on
        then (a task that never starts its server makes TensorFlow wait for ever, and
        TensorFlow catches SIGTERM), it ends --time-limit seconds later."""
        if self.deadline != float("inf"):
            return
        self.deadline = time.monotonic() + self.time_limit
        timer = threading.Timer(self.time_limit, self._expired)
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

    def hand_in(self, code: int = 0):
        """Posts this task's exit code to the step's end, once: a non-blocking all-reduce
        (MAX) over every task, complete when every task has handed its code in. The chief
        hands in its own (0, or 75/143 after its checkpoint on Slurm's signal), the others 0,
        so all learn the chief's. Returns its request."""
        if self._end is None:
            self._codes[0][0] = code
            self._end = self._end_comm.Iallreduce(self._codes[0], self._codes[1],
                                                  op=self.MPI.MAX)
        return self._end

    def ended(self) -> bool:
        """Returns True once every task has handed in its code (the chief is done)."""
        return bool(self.hand_in().Test())

    def end(self, code: int = 0) -> None:
        """Hands in ``code`` and waits (polled, bounded) until every task has; then exits with
        the chief's code, as every task does: the barrier that ends the step."""
        self.arm()  # an end before the ClusterSpec waits --time-limit at most too
        request = self.hand_in(code)
        while not request.Test():
            if time.monotonic() > self.deadline:
                self.fail("the other tasks did not finish within --time-limit")
            time.sleep(0.05)
        sys.stdout.flush()
        sys.stderr.flush()
        self.MPI.Finalize()  # after the barrier every task finalizes at once
        os._exit(self._codes[1][0])  # a TensorFlow server cannot be stopped; skip its teardown


def watch_signals(args: argparse.Namespace):
    """With --checkpoint-dir: installs handlers of Slurm's warning signal and SIGTERM that only
    note them (mpi_resolver's SignalWatcher), in every task and before anything else; returns
    the watcher (None without --checkpoint-dir). Slurm signals every task of the step, and the
    default action of both is to end the process: a ps or worker would die of it before the
    chief's checkpoint (the chief itself, before its SlurmTerminationConfig exists)."""
    if not args.checkpoint_dir:
        return None
    from mpi_resolver.long_jobs.signals import SIGTERM, WarningSignal, parse_signal
    from mpi_resolver.long_jobs.watcher import SignalWatcher

    watcher = SignalWatcher([parse_signal(args.signal), WarningSignal(SIGTERM, "TERM")])
    watcher.install()
    return watcher


def main(argv=None) -> int:
    args = parse_args(argv)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    signals = watch_signals(args)
    task = Task(args.time_limit, signals)  # starts MPI (mpi4py); its watchdog: Task.arm()
    code = 0
    try:
        code = run(args, task)
    except SystemExit as e:
        if e.code:
            task.fail(f"exit {e.code}", e.code if isinstance(e.code, int) else 1)
    except BaseException:  # noqa: BLE001 - any error ends the step, at once
        traceback.print_exc()
        task.fail("failed (traceback above)")
    task.end(code)
    return 0


def run(args: argparse.Namespace, task: Task) -> int:
    """This task's part; returns the exit code it hands in (the chief's decides)."""
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
                                  gpus_per_node=gpus_per_node, timeout=args.timeout)
    cluster_spec = resolver.cluster_spec()  # sets task_type and task_id
    task.arm()  # --time-limit from here: every task has imported TensorFlow and arrived
    task_type, task_id = resolver.task_type, resolver.task_id
    task.name = f"{task_type}:{task_id}"

    if task_type in ("ps", "worker"):
        serve(args, tf, resolver, cluster_spec, task)
        return 0  # main() then waits for the chief's code
    if task_type == "evaluator":
        evaluate(args, tf, keras, task)
        return 0
    return train(args, tf, keras, resolver, cluster_spec, task)


def serve(args, tf, resolver, cluster_spec, task: Task) -> None:
    """A ps or worker: starts its TensorFlow server (which serves in its own threads)."""
    task_type, task_id = resolver.task_type, resolver.task_id
    # A worker runs each function the chief schedules on one of its inter-op threads, and
    # that function waits on other ops of the worker (its dataset iterator, the variables'
    # reads and updates on the ps): with a single inter-op thread it waits for ever
    # (measured, TensorFlow 2.21). The ps is fine with one.
    inter_op = max(2, args.threads) if task_type == "worker" else args.threads
    config = tf.compat.v1.ConfigProto(intra_op_parallelism_threads=args.threads,
                                      inter_op_parallelism_threads=inter_op)
    tf.distribute.Server(cluster_spec, job_name=task_type, task_index=task_id,
                         protocol=resolver.rpc_layer or "grpc", config=config, start=True)
    print(f"{task.name}: serving on {cluster_spec.task_address(task_type, task_id)} "
          f"(pid {os.getpid()})", flush=True)


class Steps:
    """The steps this run started from (``resumed``: the checkpoint's, 0 on a fresh start)
    and has done so far (the chief's count), for the chief's last line."""

    def __init__(self, resumed: int = 0) -> None:
        self.resumed = self.done = resumed

    def line(self) -> str:
        return f"steps done: {self.done} (resumed from {self.resumed})"


class Store:
    """--checkpoint-dir on the chief: the model, the optimizer and the step count in one
    tf.train.Checkpoint, the last 3 kept (a CheckpointManager)."""

    def __init__(self, tf, directory: str, model, optimizer, step) -> None:
        self.directory, self.step = directory, step
        self.checkpoint = tf.train.Checkpoint(model=model, optimizer=optimizer, step=step)
        self.manager = tf.train.CheckpointManager(self.checkpoint, directory, max_to_keep=3)

    def restore(self) -> int:
        """Restores the latest checkpoint, if any; returns its step (0 without one). Warns
        where Slurm restarted the job and there is none to resume from."""
        from mpi_resolver.long_jobs.resume import missing_checkpoint

        latest = self.manager.latest_checkpoint
        warning = missing_checkpoint(os.environ, self.directory, latest)
        if warning:
            print(f"warning: {warning}", file=sys.stderr, flush=True)
        if latest is None:
            return 0
        self.checkpoint.restore(latest).assert_existing_objects_matched()
        return int(self.step.numpy())

    def save(self, step: int) -> str:
        """Writes the checkpoint of ``step``; returns its path."""
        return self.manager.save(checkpoint_number=step)


def train(args, tf, keras, resolver, cluster_spec, task: Task) -> int:
    """The chief: variables on the ps, steps scheduled on the workers, evaluation, saving.
    Returns the exit code of every task: 0, or after a checkpoint on Slurm's signal 75 (the
    job runs again) or 143 (SIGTERM ends it)."""
    spec = cluster_spec.as_dict()
    print(f"cluster: {', '.join(f'{job} {len(spec[job])}' for job in sorted(spec))}  "
          f"this: {task.name} on {cluster_spec.task_address('chief', 0)} (pid {os.getpid()})",
          flush=True)
    strategy, coordinator = connect(tf, training_resolver(tf, resolver, spec), spec)
    config = termination_config(args, strategy.cluster_resolver, task.signals) \
        if args.checkpoint_dir else None
    with strategy.scope():
        model = build_model(keras)  # its variables live on the ps; seeded initial weights
        optimizer = keras.optimizers.Adam(learning_rate=args.learning_rate)
        optimizer.build(model.trainable_variables)  # its state exists for a restore to fill
        step_counter = tf.Variable(0, dtype=tf.int64, trainable=False)
    store = Store(tf, args.checkpoint_dir, model, optimizer, step_counter) \
        if args.checkpoint_dir else None
    steps = Steps(store.restore() if store else 0)
    if steps.resumed:
        print(f"resumed from the checkpoint in {args.checkpoint_dir} at step {steps.resumed}",
              flush=True)
    x_train, y_train, x_test, y_test = load_data(args.seed)
    calls = Calls(args, tf, coordinator,
                  training_function(tf, keras, strategy, model, optimizer, step_counter),
                  worker_iterator(args, tf, strategy, coordinator, x_train, y_train),
                  ahead=AHEAD_PER_WORKER * len(spec["worker"]))
    print(f"training: {args.steps} steps of {args.batch} examples, scheduled "
          f"{args.steps_per_call} at a time on {len(spec['worker'])} workers", flush=True)
    signalled = config.termination_watcher_fn if config else (lambda: False)
    if train_loop(args, calls, steps, store, signalled):
        return stop(config, store, steps)
    if int(step_counter.numpy()) != args.steps:
        raise RuntimeError(f"ran {int(step_counter.numpy())} steps, expected {args.steps}")
    finish(args, model, x_test, y_test)
    if store is not None:
        print(steps.line(), flush=True)
    return 0


def training_resolver(tf, resolver, spec):
    """Returns the resolver the strategy connects with: the evaluator is no part of the
    training cluster (it runs no server, so the chief must not wait to connect to it)."""
    if "evaluator" not in spec:
        return resolver
    training = {job: addrs for job, addrs in spec.items() if job != "evaluator"}
    return tf.distribute.cluster_resolver.SimpleClusterResolver(
        tf.train.ClusterSpec(training), task_type="chief", task_id=0,
        rpc_layer=resolver.rpc_layer or "grpc")


def connect(tf, resolver, spec):
    """Returns (ParameterServerStrategy, ClusterCoordinator), connected to every server."""
    start = time.monotonic()
    strategy = tf.distribute.ParameterServerStrategy(resolver)
    coordinator = tf.distribute.coordinator.ClusterCoordinator(strategy)
    print(f"connected to {len(spec['worker'])} workers and {len(spec['ps'])} ps in "
          f"{time.monotonic() - start:.1f} s", flush=True)
    return strategy, coordinator


def termination_config(args, resolver, early):
    """Returns mpi_resolver's SlurmTerminationConfig from the command line, created on the
    chief after the strategy. A signal that came before (``early``, watch_signals' watcher,
    noted it) is sent again, now to the config's own handlers."""
    from mpi_resolver import SlurmTerminationConfig

    config = SlurmTerminationConfig(resolver, signal=args.signal, grace_period=args.grace_period,
                                    requeue=args.requeue,
                                    requeue_on_time_limit=args.requeue_on_time_limit)
    arrival = early.arrival if early is not None else None
    if arrival is not None:
        config.watcher.deliver(arrival.signal.number)
    return config


def worker_iterator(args, tf, strategy, coordinator, x_train, y_train):
    """Returns the iterator over every worker's own dataset."""

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
    return iter(coordinator.create_per_worker_dataset(per_worker_dataset_fn))


def training_function(tf, keras, strategy, model, optimizer, step_counter):
    """Returns train_calls(iterator, n): n steps on one worker, one round trip from the
    chief; it adds n to ``step_counter`` (on the ps) and returns (loss sum, correct)."""
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
        total_loss = tf.constant(0.0)
        total_correct = tf.constant(0.0)
        for _ in tf.range(n):
            x, y = next(iterator)
            loss, correct = strategy.run(step_fn, args=(x, y))
            total_loss += strategy.reduce("SUM", loss, axis=None)
            total_correct += strategy.reduce("SUM", correct, axis=None)
        step_counter.assign_add(tf.cast(n, tf.int64))
        return total_loss, total_correct

    return train_calls


class Calls:
    """train_calls scheduled on the workers by the coordinator, --steps-per-call steps each,
    at most ``ahead`` calls scheduled and not yet run."""

    def __init__(self, args, tf, coordinator, train_calls, iterator, ahead: int) -> None:
        self.tf, self.coordinator, self.ahead = tf, coordinator, ahead
        self.train_calls, self.iterator = train_calls, iterator
        self.per_call = args.steps_per_call

    def schedule(self, steps: int, signalled):
        """Schedules ``steps`` steps; asks ``signalled()`` before each call. Returns (the
        calls' RemoteValues, the steps scheduled, whether it stopped for the signal)."""
        results, scheduled = [], 0
        while scheduled < steps:
            if len(results) >= self.ahead:
                results[-self.ahead].fetch()  # waits until that call has run
            if signalled():
                return results, scheduled, True
            n = min(self.per_call, steps - scheduled)
            results.append(self.coordinator.schedule(
                self.train_calls, args=(self.iterator, self.tf.constant(n))))
            scheduled += n
        return results, scheduled, False

    def join(self) -> None:
        """Waits until every call scheduled so far has run."""
        self.coordinator.join()


def train_loop(args, calls: Calls, steps: Steps, store, signalled) -> bool:
    """Schedules the steps from ``steps.done`` to --steps; every --checkpoint-every steps, once
    they have run, a progress line (and a checkpoint, with --checkpoint-dir). Stops scheduling
    once ``signalled()`` (asked between calls) is True; returns True where it stopped so,
    after every call scheduled so far has run and ``steps.done`` counts them."""
    start = time.monotonic()
    every = args.checkpoint_every
    while steps.done < args.steps:
        chunk = min(every - steps.done % every, args.steps - steps.done)
        results, scheduled, stopped = calls.schedule(chunk, signalled)
        calls.join()
        steps.done += scheduled
        if stopped:
            return True
        loss = sum(float(r.fetch()[0]) for r in results) / chunk
        accuracy = sum(float(r.fetch()[1]) for r in results) / (chunk * args.batch)
        line = (f"step {steps.done}/{args.steps}: loss {loss:.4f}  train accuracy "
                f"{accuracy:.4f}  ({time.monotonic() - start:.1f} s)")
        if store is not None:
            line += f"  checkpoint {os.path.basename(store.save(steps.done))}"
        print(line, flush=True)
    return False


def stop(config, store: Store, steps: Steps) -> int:
    """After Slurm's signal, once the scheduled calls have run: saves one checkpoint of the
    steps done, then lets the config requeue the job; returns its exit code (its exit_fn
    exits: its SystemExit is caught here, so that the other tasks hear the code first)."""
    arrival = config.watcher.arrival
    path = store.save(steps.done)
    took = time.monotonic() - arrival.at
    print(f"{arrival.signal.full_name}: checkpoint {os.path.basename(path)} (step "
          f"{steps.done}) written {took:.2f} s after the signal", flush=True)
    try:
        config.exit_fn()  # requeues the job (scontrol requeue) where it is to run again
        code = config.TERMINATED_EXIT_CODE  # (exit_fn always exits)
    except SystemExit as e:
        code = int(e.code or 0)
    print(steps.line(), flush=True)
    return code


def finish(args, model, x_test, y_test) -> None:
    """The chief reads the variables from the ps, evaluates here, and saves the model."""
    accuracy = held_out_accuracy(model, x_test, y_test)
    if args.save:
        os.makedirs(os.path.dirname(os.path.abspath(args.save)), exist_ok=True)
        model.save(args.save)
        print(f"saved model: {args.save}", flush=True)
    print(f"final test accuracy: {accuracy:.4f}", flush=True)


def evaluate(args, tf, keras, task: Task) -> None:
    """The evaluator: restores each new checkpoint of the chief and evaluates it, until the
    last step's, or until the chief is done (after a checkpoint on Slurm's signal there is
    no last step's); no part of the training cluster (no server, no strategy)."""
    _, _, x_test, y_test = load_data(args.seed)
    model = build_model(keras)
    step = tf.Variable(0, dtype=tf.int64, trainable=False)
    checkpoint = tf.train.Checkpoint(model=model, step=step)
    print(f"{task.name}: watching {args.checkpoint_dir} (pid {os.getpid()})", flush=True)
    task.hand_in(0)  # now: task.ended() then says when the chief is done
    seen = None
    while True:
        ended = task.ended()  # before the look: the chief's last checkpoint is there by then
        latest = tf.train.latest_checkpoint(args.checkpoint_dir)
        if latest is not None and latest != seen and restored(tf, checkpoint, latest):
            seen = latest
            accuracy = held_out_accuracy(model, x_test, y_test)
            print(f"{task.name}: checkpoint {os.path.basename(latest)} (step "
                  f"{int(step.numpy())}): test accuracy {accuracy:.4f}", flush=True)
            if int(step.numpy()) >= args.steps:
                return
        elif ended:
            return
        else:
            time.sleep(0.2)  # the watchdog bounds this wait


def restored(tf, checkpoint, path: str) -> bool:
    """Restores ``path`` into ``checkpoint`` (the model and the step; not the optimizer);
    False where the chief has just rotated it out (the next look takes the next one)."""
    try:
        checkpoint.restore(path).expect_partial()
    except (tf.errors.NotFoundError, ValueError):
        return False
    return True


if __name__ == "__main__":
    sys.exit(main())
