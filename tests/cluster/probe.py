"""The program every rank of a real-launch scenario runs: resolve, then report as JSON.

Usage (under srun, sbatch, salloc or mpirun)::

    python probe.py '{"verify": true}'                     # one MPIClusterResolver(**kwargs)
    python probe.py '[{"source": "slurm"}, {}]'             # several, in order, in one process
    python probe.py '{}' --no-tf                            # without TensorFlow at all

For each set of kwargs, every rank writes ONE line of JSON to stdout, in one write call (print
interleaves under mpirun)::

    {"variant", "kwargs", "rank", "host", "mpi_size", "mpi_rank", "slurm": {...},
     "original_cvd", "slurm_gpu": {...}, "source", "verified", "task_type", "task_id",
     "cluster", "address", "cuda_visible_devices", "master", "num_accelerators", "stable",
     "tf_config", "notes", "resolved_rank", "tf": {...} | null}

``rank`` is the launcher's rank of this process (OMPI_COMM_WORLD_RANK under mpirun, else
SLURM_PROCID, PMIX_RANK or PMI_RANK), read from the environment and not from mpi_resolver.
``mpi_size`` is COMM_WORLD's size when MPI has been started in this process, else null.
``original_cvd`` is CUDA_VISIBLE_DEVICES as the launcher gave it (null when unset), before
any resolver narrowed it; ``slurm_gpu`` holds Slurm's GPU variables as the launcher gave
them (SLURM_GPU_KEYS; null where unset).
``tf`` holds the same fields from TensorFlow's own SlurmClusterResolver with the same
arguments, in the same process and from the same environment, when mpi_resolver resolved from
Slurm's variables (source 'slurm'); TensorFlow's exception is recorded as {"error": ...}.
With ``--no-tf`` the probe imports no TensorFlow (6-7 s of CPU in each rank): the same
resolution comes from resolve_process (MPIClusterResolver's, without its TensorFlow class), its
fields computed as the class does, and ``tf`` is null.

On an exception the line is {"variant", "kwargs", "rank", "host", "mpi_size", "mpi_rank",
"slurm", "original_cvd", "slurm_gpu", "error_type", "error"}; the probe goes on with the next
kwargs and exits 3 at the end (4 if the exception was not a ResolutionError). Before
exiting, ranks that started MPI wait (bounded) for each other, so that mpirun does not kill a
rank that has not written its line yet.
"""

from __future__ import annotations

import itertools
import json
import os
import socket
import sys
import time
import traceback

from tests.harness import chunked

CVD = "CUDA_VISIBLE_DEVICES"
SLURM_KEYS = ("SLURM_PROCID", "SLURM_STEP_NUM_TASKS", "SLURMD_NODENAME", "SLURM_STEP_NODELIST",
              "SLURM_STEP_TASKS_PER_NODE", "SLURM_DISTRIBUTION", "SLURM_GTIDS")
#: Slurm's GPU variables (what it allocated and bound to this task), reported as given.
SLURM_GPU_KEYS = ("CUDA_VISIBLE_DEVICES", "SLURMD_TRES_BIND", "SLURM_STEP_GPUS",
                  "SLURM_GPUS_ON_NODE", "SLURM_GPUS_PER_TASK", "SLURM_JOB_GPUS",
                  "SLURM_NTASKS_PER_TRES", "SLURM_LOCALID", "SLURMD_NODENAME")
TF_ARGS = ("jobs", "port_base", "gpus_per_node", "gpus_per_task", "tasks_per_node",
           "auto_set_gpu", "rpc_layer")
#: CUDA_VISIBLE_DEVICES as the launcher gave it, before any resolver narrowed it.
ORIGINAL_CVD = os.environ.get(CVD)
#: Slurm's GPU variables as the launcher gave them (a resolver may rewrite CUDA_VISIBLE_DEVICES).
ORIGINAL_SLURM_GPU = {k: os.environ.get(k) for k in SLURM_GPU_KEYS}


def launcher_rank():
    """Returns this process's rank as its launcher numbers it (None if no launcher says)."""
    for key in ("OMPI_COMM_WORLD_RANK", "SLURM_PROCID", "PMIX_RANK", "PMI_RANK"):
        value = os.environ.get(key, "")
        if value.isdigit():
            return int(value)
    return None


def mpi_world():
    """Returns MPI's COMM_WORLD when this process has started MPI (without starting it)."""
    mod = sys.modules.get("mpi4py.MPI")
    if mod is None or not mod.Is_initialized() or mod.Is_finalized():
        return None
    return mod.COMM_WORLD


def set_cvd(value):
    if value is None:
        os.environ.pop(CVD, None)
    else:
        os.environ[CVD] = value


def describe(resolver):
    """Returns task, ClusterSpec, own address, master(), num_accelerators() and
    CUDA_VISIBLE_DEVICES of a resolver; ``stable`` says whether a second cluster_spec() call
    (as MultiWorkerMirroredStrategy makes) gave the same spec and CUDA_VISIBLE_DEVICES."""
    spec = resolver.cluster_spec()
    visible = os.environ.get(CVD)
    task_type, task_id = resolver.get_task_info()
    address = None
    if task_type is not None and task_id is not None:
        address = spec.task_address(task_type, task_id)
    again = resolver.cluster_spec()
    stable = again.as_dict() == spec.as_dict() and os.environ.get(CVD) == visible
    return {"task_type": task_type, "task_id": task_id, "cluster": spec.as_dict(),
            "address": address, "cuda_visible_devices": visible, "master": resolver.master(),
            "num_accelerators": resolver.num_accelerators(), "stable": stable}


def tensorflow_view(kwargs, original=ORIGINAL_CVD):
    """Returns what TensorFlow's SlurmClusterResolver says with the same arguments, with
    CUDA_VISIBLE_DEVICES ``original`` (as launched)."""
    import tensorflow as tf

    ours = os.environ.get(CVD)
    set_cvd(original)  # TensorFlow counts GPUs from CUDA_VISIBLE_DEVICES: the job's own
    try:
        resolver = tf.distribute.cluster_resolver.SlurmClusterResolver(
            **{k: v for k, v in kwargs.items() if k in TF_ARGS})
        return describe(resolver)
    except Exception as e:  # TensorFlow's failures are data here
        return {"error": f"{type(e).__name__}: {e}"}
    finally:
        set_cvd(ours)


def report(base, make_line, extra=None):
    """Emits this rank's line: ``base`` plus what ``make_line()`` returns, or the error it
    raised; then the MPI world, the Slurm and GPU variables as launched, and ``extra()``.
    Returns the exit status: 0, 3 for a ResolutionError, 4 for anything else (a bug)."""
    import mpi_resolver

    try:
        line = dict(base, **make_line())
        status = 0
    except mpi_resolver.ResolutionError as e:
        line = dict(base, error_type=type(e).__name__, error=str(e))
        status = 3
    except Exception as e:  # a bug: report it as data, with where it happened
        line = dict(base, error_type=type(e).__name__, error=str(e),
                    traceback=traceback.format_exc()[-3000:])
        status = 4
    world = mpi_world()
    line["mpi_size"] = world.Get_size() if world is not None else None
    line["mpi_rank"] = world.Get_rank() if world is not None else None
    line["slurm"] = {k: os.environ.get(k) for k in SLURM_KEYS}
    line["original_cvd"] = ORIGINAL_CVD
    line["slurm_gpu"] = dict(ORIGINAL_SLURM_GPU)
    line.update(extra() if extra is not None else {})
    emit(json.dumps(line))
    return status


def resolve(variant, kwargs, with_tf):
    """Emits this rank's line for one resolution with ``kwargs``: MPIClusterResolver(**kwargs)
    and TensorFlow's own view ``with_tf``, else the same resolution without TensorFlow
    (resolve_process, as the resolver makes it); returns the exit status."""

    def make_line():
        if with_tf:
            import mpi_resolver

            resolver = mpi_resolver.MPIClusterResolver(**kwargs)
            view, res = describe(resolver), resolver.resolution
        else:
            view, res = resolved_without_tf(kwargs)
        line = dict(source=res.source, verified=res.verified, **view,
                    tf_config=res.tf_config(), notes=list(res.notes),
                    resolved_rank=res.rank, tf=None)
        if with_tf and res.source == "slurm":
            line["tf"] = tensorflow_view(kwargs)
        return line

    return report({"variant": variant, "kwargs": kwargs, "rank": launcher_rank(),
                   "host": socket.gethostname()}, make_line)


def resolved_without_tf(kwargs):
    """Returns (describe()'s fields, the resolution) of resolve_process with the resolver's
    arguments ``kwargs``: what MPIClusterResolver gives, without importing TensorFlow."""
    from mpi_resolver.options import make_options
    from mpi_resolver.resolve.this_process import narrow, resolve_process

    args = dict(kwargs)
    set_gpu, rpc_layer = args.pop("auto_set_gpu", True), args.pop("rpc_layer", "grpc")
    res = resolve_process(make_options(**args, env=os.environ), auto_set_gpu=set_gpu)

    def spec_and_visible():
        if set_gpu:
            narrow(res)  # as each cluster_spec() call does
        return res.cluster(), os.environ.get(CVD)

    (spec, visible), again = spec_and_visible(), spec_and_visible()
    task_type, task_id = res.task
    address = spec[task_type][task_id]
    return {"task_type": task_type, "task_id": task_id, "cluster": spec, "address": address,
            "cuda_visible_devices": visible,
            "master": f"{rpc_layer}://{address}" if rpc_layer else address,
            "num_accelerators": {"GPU": len(res.own_gpus)},
            "stable": again == (spec, visible)}, res


_SEQUENCE = itertools.count()


def emit(text: str) -> None:
    """Writes ``text`` as lines '@<id> <k>/<n> <piece>' (tests.harness.chunked), which
    parse_lines() puts back together."""
    chunked.write(text, "@", f"{os.getpid()}-{next(_SEQUENCE)}")


def wait_for_others(timeout=20.0):
    """Waits (bounded) until every MPI rank is done, when this process started MPI."""
    world = mpi_world()
    if world is None:
        return
    request = world.Ibarrier()
    deadline = time.monotonic() + timeout
    while not request.Test():
        if time.monotonic() > deadline:
            return
        time.sleep(0.01)


def main(argv):
    args = [a for a in argv if a != "--no-tf"]
    spec = json.loads(args[0]) if args else {}
    variants = spec if isinstance(spec, list) else [spec]
    status = 0
    for i, kwargs in enumerate(variants):
        status = max(status, resolve(i, kwargs, "--no-tf" not in argv))
    wait_for_others()
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
