"""The JAX state and the shared directory's round of benchmarks/tiers.py (issue 41): a state
sharded across the processes, saved by Orbax as LongJob saves it (mpi_resolver/jax/
orbax_checkpoints): at once (checkpoint_async=False: the whole save is what the step pays)
and in the background (the step pays the copy to host memory and Orbax's start; the write
goes on in a thread until Orbax committed the checkpoint, fsynced by TensorStore), restored,
and `dd bs=1M conv=fsync` of each process's bytes to the same directory. Imports JAX where
called, in each process of the benchmark."""

from __future__ import annotations

import os
import subprocess
import time
from typing import Any, Dict, Tuple

#: A round's figures: the save at once, the background's stall and write, the restore, dd.
SHARED_FIGURES = ("at_once_s", "stall_s", "write_s", "restore_s", "dd_s")


def shared_round(state: Any, own: int, directory: str, round_: int) -> Dict[str, float]:
    """Returns one round's figures (SHARED_FIGURES) of ``state`` saved to ``directory`` by
    Orbax at once and in the background, restored, and dd of this process's ``own`` bytes;
    every process calls it."""
    from jax.experimental import multihost_utils

    from mpi_resolver.jax.orbax_checkpoints import OrbaxCheckpoints

    figures: Dict[str, float] = {}
    for background, key in ((False, "at_once_s"), (True, "stall_s")):
        files = OrbaxCheckpoints(os.path.join(directory, f"{key}-{round_}"), keep=1,
                                 background=background)
        files.open()  # as LongJob.restore does, on every process
        multihost_utils.sync_global_devices(f"save {key} {round_}")
        stall = files.start(1, state)
        written = files.wait()
        assert written is not None and written.error is None, written
        figures[key] = stall if background else stall + written.seconds
        if background:
            figures["write_s"] = stall + written.seconds
            multihost_utils.sync_global_devices(f"restore {round_}")
            began = time.monotonic()
            files.restore(1, state)
            figures["restore_s"] = time.monotonic() - began
    multihost_utils.sync_global_devices(f"dd {round_}")
    figures["dd_s"] = dd(os.path.join(directory, f"dd-{os.getpid()}-{round_}"), own)
    return figures


def sharded_state(mib: int) -> Tuple[Dict[str, Any], int]:
    """Returns ({'w': an array of ``mib`` MiB sharded across the processes}, the bytes this
    process owns); random values, which no compression shrinks, as a model's are."""
    import jax
    import numpy as np
    from jax.sharding import Mesh, NamedSharding, PartitionSpec

    rows = mib * 2 ** 20 // 4 // 1024  # float32 rows of 1,024 values: mib MiB
    rows -= rows % jax.process_count()
    sharding = NamedSharding(Mesh(np.array(jax.devices()), ("data",)), PartitionSpec("data"))
    random = np.random.default_rng(jax.process_index())

    def part(index: Any) -> Any:
        shape = [len(range(*s.indices(n))) for s, n in zip(index, (rows, 1024), strict=True)]
        return random.random(shape, dtype=np.float32)

    state = {"w": jax.make_array_from_callback((rows, 1024), sharding, part)}
    return state, rows * 1024 * 4 // jax.process_count()


def dd(path: str, size: int) -> float:
    """Returns the seconds `dd bs=1M conv=fsync` takes to write ``size`` bytes to ``path``."""
    began = time.monotonic()
    subprocess.run(["dd", "if=/dev/zero", f"of={path}", "bs=1M", f"count={size // 2 ** 20}",
                    "conv=fsync"], check=True, capture_output=True)
    took = time.monotonic() - began
    os.remove(path)
    return took
