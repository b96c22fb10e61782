"""A tiny MultiWorkerMirroredStrategy custom loop under the step watchdog, whose worker 1's
input (a Python generator, through tf.data) stops yielding at batch HANG_AT: worker 1 is alive
but stuck, worker 0 waits for it in the all-reduce (tests/cluster/test_hang.py).

    python hang_train.py PORT HANG_AT MINIMUM [STEPS MARKER]   # a task of `srun --mpi=pmix`

With STEPS and MARKER: the hang comes only where the file MARKER is not there yet (it is made
then: the next run trains), and the run ends after STEPS steps.
"""

from __future__ import annotations

import itertools
import os
import sys
import threading

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")


def main() -> None:
    port, hang_at, minimum = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
    steps = int(sys.argv[4]) if len(sys.argv) > 4 else None
    marker = sys.argv[5] if len(sys.argv) > 5 else None
    hangs = marker is None or not os.path.exists(marker)
    import numpy as np
    import tensorflow as tf

    from mpi_resolver import MPIClusterResolver
    from mpi_resolver.long_jobs.step_watchdog import StepWatchdog

    resolver = MPIClusterResolver(port_base=port, gpus_per_node=0)
    strategy = tf.distribute.MultiWorkerMirroredStrategy(cluster_resolver=resolver)
    worker = resolver.task_id

    def batches():
        for i in itertools.count():
            if worker == 1 and i == hang_at and hangs:
                if marker is not None:
                    open(marker, "w").close()
                print(f"worker 1: batch {i} never comes", flush=True)
                threading.Event().wait()  # an input pipeline that never yields
            yield np.full((8, 4), i, np.float32)

    def dataset_fn(context):
        spec = tf.TensorSpec((8, 4), tf.float32)
        return tf.data.Dataset.from_generator(batches, output_signature=spec)

    @tf.function
    def train_step(iterator):
        per_replica = strategy.run(tf.reduce_sum, args=(next(iterator),))
        return strategy.reduce(tf.distribute.ReduceOp.SUM, per_replica, axis=None)  # all-reduce

    iterator = iter(strategy.distribute_datasets_from_function(dataset_fn))
    with StepWatchdog(minimum=minimum, resolver=resolver, interval=0.2) as watchdog:
        for step in itertools.count(1):
            train_step(iterator)
            watchdog.tick()
            if step % 10 == 0:
                print(f"worker {worker}: step {step}", flush=True)
            if step == steps:
                print(f"worker {worker}: done", flush=True)
                return


if __name__ == "__main__":
    main()
