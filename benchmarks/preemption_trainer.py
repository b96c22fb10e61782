"""The trainer that benchmarks/preemption.py runs: two MultiWorkerMirroredStrategy workers
that save on Slurm's signal, requeue and resume, with mpi_resolver's public API only (as
examples/train.py: ``SlurmTerminationConfig(resolver, ...).handler(resolver, checkpoint,
dir)`` and ``handler.run(train_step, iterator)``), writing a timeline for the benchmark.

    srun --mpi=pmix python benchmarks/preemption_trainer.py --checkpoint-dir DIR \
        --timeline FILE [--model example|large] [--mib 100]

--model example: examples/train.py's model (Dense 64 relu, Dense 10 on 64 inputs, Adam);
--model large: two hidden Dense layers as wide as makes about --mib MiB of variables.
Both train on train.py's data (examples/digits.py's load_data), global batch 32 x
workers. A fresh run trains up to --steps; a resumed run (restored from a checkpoint) trains
--steps-after-resume steps more and ends, so that the benchmark's second run is short.

The chief (worker 0) appends one line per event to --timeline, ``EVENT UNIX_TIME [FIELDS]``,
each written and flushed when it happens (not through srun's output, which a requeue may
cut): ``start`` (the script's first line, before TensorFlow is imported; restart count),
``strategy`` (the strategy is built: every worker has started), ``variables`` (the model is
built: bytes of its variables), ``restored`` (the handler is built, and has restored the
latest checkpoint: the step it holds, 0 on a fresh start), ``step`` (a training step is
done: steps done), ``logged`` (a line of the 'mpi_resolver' logger: the package's exit line
after the save and the requeue), ``exit`` (the handler saved and exits: steps done, resumed
from), ``done`` (the run ended by itself: steps done, resumed from).
"""

from __future__ import annotations

import time

STARTED = time.time()  # before anything is imported: the script's start

import argparse  # noqa: E402
import logging  # noqa: E402
import math  # noqa: E402
import os  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any, List, Optional, Sequence  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "examples"))
sys.path.insert(0, str(ROOT))

#: examples/train.py's model: its hidden layer's width, on 64 inputs (8x8 digits), 10 classes.
EXAMPLE_WIDTH, INPUTS, CLASSES = 64, 64, 10


def parse_args(argv: Optional[Sequence[str]] = None) -> argparse.Namespace:
    """Returns the command line's options."""
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--checkpoint-dir", required=True, metavar="DIR")
    p.add_argument("--timeline", required=True, metavar="FILE",
                   help="the chief appends its events here")
    p.add_argument("--model", choices=("example", "large"), default="example")
    p.add_argument("--mib", type=float, default=100.0,
                   help="--model large: MiB of variables to aim at (default 100)")
    p.add_argument("--steps", type=int, default=100000, help="a fresh run's steps")
    p.add_argument("--steps-after-resume", type=int, default=3,
                   help="a resumed run's steps after the one it resumed from")
    p.add_argument("--batch-per-worker", type=int, default=32)
    p.add_argument("--signal", default="USR1")
    p.add_argument("--grace-period", type=float, default=None, metavar="SECONDS")
    p.add_argument("--port-base", default="auto")
    p.add_argument("--threads", type=int, default=1)
    return p.parse_args(argv)


class Timeline:
    """The chief's events, one line each, appended to a file shared by every node."""

    def __init__(self, path: str, active: bool) -> None:
        self.path, self.active = path, active

    def add(self, event: str, *fields: Any, at: Optional[float] = None) -> None:
        """Appends ``EVENT TIME FIELDS...`` (``at``: the time, default now)."""
        if not self.active:
            return
        words = " ".join(str(f) for f in fields)
        with open(self.path, "a") as f:
            f.write(f"{event} {time.time() if at is None else at:.6f} {words}".rstrip() + "\n")


class TimelineLog(logging.Handler):
    """The 'mpi_resolver' logger's lines to the timeline, at the time they were logged."""

    def __init__(self, timeline: Timeline) -> None:
        super().__init__(logging.INFO)
        self.timeline = timeline

    def emit(self, record: logging.LogRecord) -> None:
        self.timeline.add("logged", " ".join(record.getMessage().split()), at=record.created)


def hidden_width(mib: float) -> int:
    """Returns the width W of two hidden Dense layers (INPUTS->W->W->CLASSES) whose
    variables, float32, come to about ``mib`` MiB: W^2 + (INPUTS + CLASSES + 2) W."""
    params = mib * 2 ** 20 / 4
    b = INPUTS + CLASSES + 2
    return max(1, round((-b + math.sqrt(b * b + 4 * params)) / 2))


def build_model(keras: Any, args: argparse.Namespace) -> Any:
    """Returns the model (call in the strategy's scope): train.py's, or the large one."""
    if args.model == "example":
        hidden = [EXAMPLE_WIDTH]
    else:
        width = hidden_width(args.mib)
        hidden = [width, width]
    layers = [keras.layers.Dense(w, activation="relu") for w in hidden]
    return keras.Sequential([keras.Input(shape=(INPUTS,)), *layers,
                             keras.layers.Dense(CLASSES)])


def variable_bytes(variables: Sequence[Any]) -> int:
    """Returns the bytes of ``variables`` (elements x item size)."""
    import numpy as np

    return sum(math.prod(tuple(v.shape)) * np.dtype(str(v.dtype)).itemsize for v in variables)


def dataset(tf: Any, global_batch: int, skip: int) -> Any:
    """Returns a function of the InputContext: this worker's shard of train.py's training
    split, batched, repeated, past the ``skip`` batches a resumed run has done."""
    from train import load_data  # examples/train.py's

    x, y, _, _ = load_data(1234)

    def fn(ctx: Any) -> Any:
        ds = tf.data.Dataset.from_tensor_slices((x, y))
        ds = ds.shard(ctx.num_input_pipelines, ctx.input_pipeline_id).repeat()
        ds = ds.batch(ctx.get_per_replica_batch_size(global_batch), drop_remainder=True)
        return ds.skip(skip).prefetch(2)

    return fn


def train_step_fn(tf: Any, keras: Any, strategy: Any, model: Any, optimizer: Any,
                  global_batch: int) -> Any:
    """Returns the tf.function of one training step (one all-reduce) over an iterator; it
    returns the global batch's loss."""
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction="none")

    def step_fn(x: Any, y: Any) -> Any:
        with tf.GradientTape() as tape:
            loss = tf.nn.compute_average_loss(loss_fn(y, model(x, training=True)),
                                              global_batch_size=global_batch)
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables, strict=True))
        return loss

    @tf.function
    def train_step(iterator: Any) -> Any:
        loss = strategy.run(step_fn, args=next(iterator))
        return strategy.reduce(tf.distribute.ReduceOp.SUM, loss, axis=None)

    return train_step


def train(args: argparse.Namespace, handler: Any, step: Any, train_step: Any,
          iterator: Any, timeline: Timeline) -> List[int]:
    """Trains through ``handler.run`` to the run's last step; returns [steps done, resumed
    from]. On the handler's exit (saved on the signal), notes it and exits."""
    resumed = int(step.numpy())
    last = resumed + args.steps_after_resume if resumed else args.steps
    done = resumed
    try:
        while done < last:
            float(handler.run(train_step, iterator))  # float: wait for the step's end
            step.assign_add(1)
            done += 1
            timeline.add("step", done)
    except SystemExit:
        timeline.add("exit", done, resumed)
        raise
    return [done, resumed]


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Trains; returns 0 at the end of a run (the handler exits 75 after the save)."""
    args = parse_args(argv)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    import keras
    import tensorflow as tf

    from mpi_resolver import MPIClusterResolver, SlurmTerminationConfig

    tf.config.threading.set_intra_op_parallelism_threads(args.threads)
    tf.config.threading.set_inter_op_parallelism_threads(args.threads)
    keras.utils.set_random_seed(1234)
    port = args.port_base if args.port_base == "auto" else int(args.port_base)
    resolver = MPIClusterResolver(port_base=port, gpus_per_node=0)
    strategy = tf.distribute.MultiWorkerMirroredStrategy(cluster_resolver=resolver)
    timeline = Timeline(args.timeline, resolver.task_id == 0)
    timeline.add("start", os.environ.get("SLURM_RESTART_COUNT", "0"), at=STARTED)
    timeline.add("strategy")
    logging.getLogger("mpi_resolver").addHandler(TimelineLog(timeline))
    workers = len(resolver.cluster_spec().as_dict()["worker"])
    global_batch = args.batch_per_worker * workers
    with strategy.scope():
        model = build_model(keras, args)
        optimizer = keras.optimizers.Adam(learning_rate=0.01)
        optimizer.build(model.trainable_variables)
    timeline.add("variables", variable_bytes(model.variables))
    step = tf.Variable(0, dtype=tf.int64, trainable=False, name="step")
    checkpoint = tf.train.Checkpoint(model=model, optimizer=optimizer, step=step)
    config = SlurmTerminationConfig(resolver, signal=args.signal,
                                    grace_period=args.grace_period)
    handler = config.handler(resolver, checkpoint, args.checkpoint_dir)
    timeline.add("restored", int(step.numpy()))
    iterator = iter(strategy.distribute_datasets_from_function(
        dataset(tf, global_batch, int(step.numpy()))))
    train_step = train_step_fn(tf, keras, strategy, model, optimizer, global_batch)
    done, resumed = train(args, handler, step, train_step, iterator, timeline)
    timeline.add("done", done, resumed)
    return 0


if __name__ == "__main__":
    sys.exit(main())
