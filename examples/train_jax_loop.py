"""A custom JAX training loop across nodes as a long job: mpi_resolver.jax.initialize, one
jitted step over a global batch sharded across every process's devices, and
mpi_resolver.jax.LongJob for the checkpoints (periodic, and at one step on Slurm's signal,
then the requeue) and the resume.

    srun --mpi=pmix python examples/train_jax_loop.py --steps 300 --checkpoint-dir ckpt
    mpirun -n 4 python examples/train_jax_loop.py --steps 300

What it shows:
  * train.py's model and data (the digits, a 64-64-10 network) in plain JAX: Adam by
    hand, so that the optimizer's state is part of the training state (no optax needed).
  * Data parallelism the way JAX does it across processes: a Mesh over ``jax.devices()``,
    the parameters replicated (``PartitionSpec()``), each process's own rows of the global
    batch (``jax.make_array_from_process_local_data``); XLA adds the all-reduce.
  * The batch of step s is a function of s alone, so a resumed run sees exactly the batches
    an uninterrupted one would: its final weights are the same, bit for bit.
  * With --checkpoint-dir (or MPI_RESOLVER_CHECKPOINT_DIR) and train.py's long-job options:
    ``job.restore(state)`` before the loop, ``job.step_done(step, state)`` after every step,
    ``job.complete(remove=True)`` after it. Process 0 prints ``step N: loss ...``, ``final
    test accuracy: ...``, ``steps done: N (resumed from K)`` and ``weights digest ...``.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import sys

# examples/long_jobs.py and train_jax.py, beside this script (its directory is on sys.path
# when it runs): the long-job options, and train_jax.py's data, port option, lines and LongJob.
from long_jobs import add_long_job_options, check_long_job_options
from train_jax import SEED, emit, load_data, long_job, port_base


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--steps", type=int, default=300, help="training steps (default 300)")
    p.add_argument("--batch-per-process", type=int, default=32,
                   help="examples per step from each process (default 32)")
    p.add_argument("--learning-rate", type=float, default=0.01, help="Adam's (default 0.01)")
    p.add_argument("--log-every", type=int, default=50, help="steps between loss lines")
    p.add_argument("--port-base", type=port_base,
                   help="JAX coordinator's port (task 0's; default $MPI_RESOLVER_PORT_BASE, "
                        "else 8888), or 'auto'")
    add_long_job_options(p, "a directory every node sees: resume from it, save there "
                            "periodically and on Slurm's signal (then requeue the job)",
                         background=True)
    args = p.parse_args(argv)
    for name in ("steps", "batch_per_process", "log_every"):
        if getattr(args, name) < 1:
            p.error(f"--{name.replace('_', '-')} must be at least 1")
    check_long_job_options(p, args)
    return args


def init_state(jax, jnp):
    """Returns the training state: the parameters (one seed: the same on every process) and
    Adam's moments and step count."""
    k1, k2 = jax.random.split(jax.random.PRNGKey(SEED))
    params = {"w1": jax.random.normal(k1, (64, 64)) * (2 / 64) ** 0.5, "b1": jnp.zeros(64),
              "w2": jax.random.normal(k2, (64, 10)) * (1 / 64) ** 0.5, "b2": jnp.zeros(10)}
    zeros = jax.tree_util.tree_map(jnp.zeros_like, params)
    return {"params": params, "m": zeros, "v": zeros, "t": jnp.zeros((), jnp.int32)}


def make_train_step(jax, jnp, learning_rate: float):
    """Returns the jitted step: the loss over the global batch, Adam's update."""
    def loss_fn(params, x, y):
        hidden = jax.nn.relu(x @ params["w1"] + params["b1"])
        logits = hidden @ params["w2"] + params["b2"]
        return -jnp.mean(jnp.take_along_axis(jax.nn.log_softmax(logits), y[:, None], 1))

    def step(state, x, y):
        loss, grads = jax.value_and_grad(loss_fn)(state["params"], x, y)
        t = state["t"] + 1
        m = jax.tree_util.tree_map(lambda m, g: 0.9 * m + 0.1 * g, state["m"], grads)
        v = jax.tree_util.tree_map(lambda v, g: 0.999 * v + 0.001 * g * g, state["v"], grads)
        scale = learning_rate * jnp.sqrt(1 - 0.999 ** t) / (1 - 0.9 ** t)
        params = jax.tree_util.tree_map(lambda p, m, v: p - scale * m / (jnp.sqrt(v) + 1e-7),
                                        state["params"], m, v)
        return {"params": params, "m": m, "v": v, "t": t}, loss

    return jax.jit(step)


def local_batch(x, y, index: int, count: int, step: int, batch: int):
    """Returns this process's rows of step ``step``'s global batch: a function of the step
    alone (a resumed run sees the same batches)."""
    import numpy as np

    mine_x, mine_y = x[index::count], y[index::count]
    rows = (np.arange(batch) + step * batch) % len(mine_x)
    return mine_x[rows], mine_y[rows]


def digest(state) -> str:
    """Returns a short digest of this process's copy of the parameters."""
    import numpy as np

    h = hashlib.sha256()
    for leaf in (state["params"][k] for k in sorted(state["params"])):
        h.update(np.asarray(leaf.addressable_data(0)).tobytes())
    return h.hexdigest()[:16]


def main(argv=None) -> int:
    args = parse_args(argv)
    from mpi_resolver.jax import initialize

    initialize(port_base=args.port_base,
               gpus_per_node=0 if os.environ.get("JAX_PLATFORMS") == "cpu" else None)
    import jax
    import jax.numpy as jnp
    from jax.sharding import Mesh, NamedSharding, PartitionSpec

    index, count = jax.process_index(), jax.process_count()
    say = emit if index == 0 else (lambda line: None)
    mesh = Mesh(jax.devices(), ("data",))
    replicated, sharded = NamedSharding(mesh, PartitionSpec()), \
        NamedSharding(mesh, PartitionSpec("data"))
    state = jax.device_put(init_state(jax, jnp), replicated)
    job = long_job(args) if args.checkpoint_dir else None
    start, state = job.restore(state) if job else (0, state)
    if start:
        say(f"resumed from the checkpoint in {args.checkpoint_dir} at step {start}")
    x_train, y_train, x_test, y_test = load_data(SEED)
    train_step = make_train_step(jax, jnp, args.learning_rate)
    step = start
    try:
        while step < args.steps:
            xb, yb = local_batch(x_train, y_train, index, count, step, args.batch_per_process)
            state, loss = train_step(
                state, jax.make_array_from_process_local_data(sharded, xb),
                jax.make_array_from_process_local_data(sharded, yb))
            step += 1
            if step % args.log_every == 0:
                say(f"step {step}: loss {float(loss):.4f}")
            if job:
                job.step_done(step, state)
    except SystemExit:  # saved on Slurm's signal: the exit code says what comes next
        say(f"steps done: {step} (resumed from {start})")
        raise
    if job:  # training completed: recorded, then the checkpoints go
        job.complete(remove=True)
    say(f"final test accuracy: {accuracy(state, x_test, y_test):.4f}")
    emit(f"process {index}: weights digest {digest(state)}")
    say(f"steps done: {step} (resumed from {start})")
    return 0


def accuracy(state, x, y) -> float:
    """Accuracy on the test split from this process's copy of the parameters."""
    import numpy as np

    p = {k: np.asarray(v.addressable_data(0)) for k, v in state["params"].items()}
    logits = np.maximum(x @ p["w1"] + p["b1"], 0) @ p["w2"] + p["b2"]
    return float(np.mean(np.argmax(logits, axis=1) == y))


if __name__ == "__main__":
    sys.exit(main())
