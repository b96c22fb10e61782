"""mpi-resolver exec: runs a program as this rank, with its TF_CONFIG and GPUs set, so that
Keras and other TF_CONFIG users need no eval (the edge that replaces this process)."""

from __future__ import annotations

import json
import os
import sys
from typing import Dict, Mapping, NoReturn, Sequence

from mpi_resolver.core.errors import ResolutionError
from mpi_resolver.resolve.resolution import Resolution

#: Said (rank 0, stderr) where the resolution started MPI. Measured with Open MPI 4.1.4: a
#: program exec'd after MPI_Init (finalized or not) fails in its own MPI_Init under mpirun
#: ("orte_init failed"), and so does a second process of the same rank under srun --mpi=pmix.
MPI_USED = ("the resolution used MPI (to check Slurm against it and give every worker the "
            "same number of GPUs), and MPI does not start twice for one rank: the program must "
            "not use MPI itself. A program that does: mpi-resolver exec --source slurm "
            "(Slurm's variables alone, other nodes' GPUs unchecked), or MPIClusterResolver in "
            "the program.")


def tf_config_text(res: Resolution) -> str:
    """Returns this rank's TF_CONFIG as the variable holds it: compact JSON, one line."""
    return json.dumps(res.tf_config(), separators=(",", ":"))


def program_env(env: Mapping[str, str], res: Resolution, auto_set_gpu: bool) -> Dict[str, str]:
    """Returns ``env`` with this rank's TF_CONFIG and, where ``auto_set_gpu``, the
    CUDA_VISIBLE_DEVICES cluster_spec() would set."""
    out = dict(env)
    out["TF_CONFIG"] = tf_config_text(res)
    if auto_set_gpu:
        out["CUDA_VISIBLE_DEVICES"] = res.visible_devices
    return out


def run_program(program: Sequence[str], env: Mapping[str, str]) -> NoReturn:
    """Replaces this process with ``program`` in ``env``, MPI ended first where this process
    started it (a launcher then sees a rank that finalized, not one that vanished).

    Raises:
      ResolutionError: the program cannot be run (not found, not executable).
    """
    from mpi_resolver.exchange.transport import finalize

    finalize()
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        os.execvpe(program[0], list(program), dict(env))
    except OSError as e:
        raise ResolutionError(f"exec could not run {program[0]!r}: {e.strerror}; check the "
                              "program's name and PATH.") from e
