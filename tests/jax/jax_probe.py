"""What every rank of a JAX test job runs (with .venv-jax's Python): start JAX one way, then
report one JSON record in ``JAXPROBE`` lines.

Usage::

    python jax_probe.py package '{"port_base": "auto"}'   # mpi_resolver.jax.initialize(**opts)
    python jax_probe.py register '{}'                      # register(); JAX's detection by name
    python jax_probe.py jax-own                            # jax.distributed.initialize() alone

Every mode first records what JAX's own cluster detection would choose here (its real code,
``ClusterEnv.auto_detect_unset_distributed_params``, which starts nothing) as ``jax_own``, so
that a test shows the package's answer and JAX's side by side. After the start: the process
index and count, JAX's visible-device setting (``jax_cuda_visible_devices``, what
local_device_ids became), and an all-gather of every process's index across processes. Where
the start left MPI running (a cross-check, or MPI alone), also MPI's own rank, size and library
(``comm_rank``, ``comm_size``, ``mpi_library``; None where MPI was never started: the probe
never starts it itself).
Exit 3 after a ResolutionError (its type and message reported, and whether JAX's
distributed runtime had started), 4 after any other exception.
"""

from __future__ import annotations

import json
import os
import sys
import time
import traceback
from typing import Any, Dict

from tests.harness import chunked


def emit(record: Dict[str, Any]) -> None:
    """Prints ``record`` as JSON in lines ``JAXPROBE <id> k/n <text>`` (tests.harness.chunked)."""
    chunked.write(json.dumps(record, default=str), "JAXPROBE ",
                  f"{os.uname().nodename}-{os.getpid()}")


def jax_own_guess() -> Dict[str, Any]:
    """Returns what JAX's own detection would pass to its runtime in this process."""
    from jax._src.clusters import ClusterEnv

    coordinator, count, pid, ids = ClusterEnv.auto_detect_unset_distributed_params(
        None, None, None, None, None, None)
    return {"coordinator": coordinator, "num_processes": count, "process_id": pid,
            "local_device_ids": list(ids) if ids is not None else None}


def start(mode: str, options: Dict[str, Any]) -> Dict[str, Any]:
    """Starts JAX's distributed runtime by ``mode``; returns what the package resolved."""
    import jax

    if mode == "package":
        from mpi_resolver.jax import initialize

        res = initialize(**options)
        return {"verified": res.verified, "source": res.source,
                "coordinator": res.distributed.coordinator_address,
                "ids": res.distributed.local_device_ids, "gpus": list(res.own_gpus)}
    if mode == "register":
        from mpi_resolver.jax import register

        registered = register(**options)
        jax.distributed.initialize(cluster_detection_method="mpi_resolver")
        return {"registered": registered}
    jax.distributed.initialize()
    return {}


def mpi_world() -> Dict[str, Any]:
    """Returns MPI's rank, size and library where MPI is running in this process, else Nones
    (never imports mpi4py.MPI, never starts MPI)."""
    found: Dict[str, Any] = {"comm_rank": None, "comm_size": None, "mpi_library": None}
    mpi = sys.modules.get("mpi4py.MPI")
    if mpi is not None and mpi.Is_initialized() and not mpi.Is_finalized():
        found.update(comm_rank=mpi.COMM_WORLD.Get_rank(), comm_size=mpi.COMM_WORLD.Get_size(),
                     mpi_library=mpi.Get_library_version().strip().splitlines()[0])
    return found


def main(argv: list) -> int:
    began = time.monotonic()
    mode, options = argv[1], json.loads(argv[2]) if len(argv) > 2 else {}
    record: Dict[str, Any] = {"mode": mode, "procid": os.environ.get("SLURM_PROCID"),
                              "mpi_rank": os.environ.get("OMPI_COMM_WORLD_RANK"),
                              "pmi_rank": os.environ.get("PMI_RANK"),
                              "cvd": os.environ.get("CUDA_VISIBLE_DEVICES"),
                              "nodename": os.uname().nodename}
    try:
        import jax
        import numpy as np
        from jax.experimental import multihost_utils

        record["jax_own"] = jax_own_guess()
        record.update(start(mode, options))
        record.update(index=jax.process_index(), count=jax.process_count(),
                      visible=jax.config._read("jax_cuda_visible_devices"),
                      collectives=jax.config.jax_cpu_collectives_implementation,
                      started_s=round(time.monotonic() - began, 3), **mpi_world())
        gathered = multihost_utils.process_allgather(np.array([jax.process_index()]))
        record["gathered"] = [int(v) for v in np.asarray(gathered).ravel()]
    except Exception as e:  # reported, then the exit status says which kind
        from mpi_resolver import ResolutionError

        import jax

        record.update(error=type(e).__name__, message=str(e),
                      jax_started=jax.distributed.is_initialized(),
                      trace=traceback.format_exc()[-2000:])
        emit(record)
        return 3 if isinstance(e, ResolutionError) else 4
    emit(record)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
