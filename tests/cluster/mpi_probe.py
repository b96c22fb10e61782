"""The program every rank runs where TensorFlow is not installed (the MPICH and Intel MPI
virtualenvs): resolve as MPIClusterResolver does, without TensorFlow, then report as JSON.

Usage (under srun, salloc, mpiexec)::

    python mpi_probe.py '{"verify": true}'            # one resolution with these arguments
    python mpi_probe.py '[{"source": "slurm"}, {}]'    # several, in order, in one process

MPIClusterResolver's constructor is make_options -> plan -> resolve over an MpiTransport on
COMM_WORLD; this probe makes exactly those calls (mpi_resolver.resolve.resolution and .mpi import no
TensorFlow) and writes, per resolution, one line per rank in probe.py's format (same fields,
same chunked writes, read back by test_scenarios.parse_lines), with what TensorFlow's resolver
would add computed from the Resolution it wraps: ``cuda_visible_devices`` is what
cluster_spec() would set, ``master`` is ``grpc://`` + this rank's address, ``stable`` says
that asking the Resolution again gives the same spec and GPUs, and ``tf`` is null. Extra
fields:

- ``launch_env``: the launcher's variables this rank saw (PMI_*, PMIX_RANK, MPI_LOCAL*,
  HYDRA_*, I_MPI_HYDRA_*, SLURM_MPI_TYPE; Intel MPI's I_MPI_INFO_* CPU details left out);
- ``mpi_library``: the first line of MPI_Get_library_version, where MPI was started.

``rank`` is the launcher's rank of this process: OMPI_COMM_WORLD_RANK, PMI_RANK, PMIX_RANK,
else SLURM_PROCID (MPI's variables first: under mpiexec inside salloc, SLURM_PROCID is that of
the Hydra proxy, and a wrapper may renumber it). Exit status as probe.py: 3 after a
ResolutionError, 4 after any other exception.
"""

from __future__ import annotations

import json
import os
import socket
import sys

from tests.cluster.probe import report, wait_for_others

#: make_options' arguments; TensorFlow's auto_set_gpu and rpc_layer do not change the answer.
OPTION_ARGS = ("jobs", "port_base", "gpus_per_node", "gpus_per_task", "tasks_per_node",
               "source", "verify", "timeout")
LAUNCH_PREFIXES = ("PMI_", "PMIX_RANK", "MPI_LOCAL", "HYDRA_", "I_MPI_HYDRA", "SLURM_MPI_TYPE",
                   "OMPI_COMM_WORLD_")


def launcher_rank():
    """Returns this process's rank as its launcher numbers it (None if no launcher says)."""
    for key in ("OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK", "SLURM_PROCID"):
        value = os.environ.get(key, "")
        if value.isdigit():
            return int(value)
    return None


def launch_env():
    """Returns the launcher's variables (see the module docstring)."""
    return {k: v for k, v in sorted(os.environ.items()) if k.startswith(LAUNCH_PREFIXES)}


def mpi_library():
    """Returns the first line of MPI_Get_library_version where MPI was started, else None."""
    mod = sys.modules.get("mpi4py.MPI")
    if mod is None or not mod.Is_initialized():
        return None
    return mod.Get_library_version().strip().splitlines()[0].strip()


def resolve(variant, kwargs):
    """Emits this rank's line for one resolution with ``kwargs``; returns the exit status."""
    from mpi_resolver.exchange.transport import MpiTransport, mpi_initialized, world
    from mpi_resolver.exchange.transport import mpi_library as library_of_mpi4py
    from mpi_resolver.options import make_options
    from mpi_resolver.resolve.resolution import resolve_job

    def make_line():
        opts = make_options(**{k: v for k, v in kwargs.items() if k in OPTION_ARGS})
        env = dict(os.environ)
        res = resolve_job(opts, env, library=library_of_mpi4py, mpi_running=mpi_initialized(),
                          transport=lambda: MpiTransport(world()[0], opts.timeout))
        task_type, task_id = res.task
        address = res.cluster()[task_type][task_id]
        stable = (res.cluster() == res.cluster() and res.task == (task_type, task_id)
                  and res.visible_devices == res.visible_devices)
        return dict(source=res.source, verified=res.verified, task_type=task_type,
                    task_id=task_id, cluster=res.cluster(), address=address,
                    cuda_visible_devices=res.visible_devices, master=f"grpc://{address}",
                    num_accelerators={"GPU": len(res.own_gpus)}, stable=stable,
                    tf_config=res.tf_config(), notes=list(res.notes),
                    resolved_rank=res.rank, tf=None)

    return report({"variant": variant, "kwargs": kwargs, "rank": launcher_rank(),
                   "host": socket.gethostname()}, make_line,
                  lambda: {"launch_env": launch_env(), "mpi_library": mpi_library()})


def main(argv):
    spec = json.loads(argv[0]) if argv else {}
    variants = spec if isinstance(spec, list) else [spec]
    status = 0
    for i, kwargs in enumerate(variants):
        status = max(status, resolve(i, kwargs))
    wait_for_others()
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
