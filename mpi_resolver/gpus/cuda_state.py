"""Whether CUDA already started in this process, too early for CUDA_VISIBLE_DEVICES to narrow
it (the edge that reads /proc/self/maps; TensorFlow's own state is read by _tf_resolver)."""

from __future__ import annotations

from typing import Optional

from mpi_resolver.core.errors import ResolutionError

MAPS = "/proc/self/maps"


def cuda_loaded(maps: str = MAPS) -> bool:
    """Returns True when the CUDA driver library (libcuda.so) is mapped into this process:
    loaded by a CUDA-aware MPI's MPI_Init, or by an earlier import. False where ``maps``
    cannot be read (not Linux)."""
    try:
        with open(maps, "rb") as f:  # bytes: a path may be in any encoding
            return any(b"/libcuda.so" in line for line in f)
    except OSError:
        return False


def too_early(started: Optional[str], wanted: str) -> ResolutionError:
    """Returns the error for a CUDA that ``started`` (what started it) before this rank's
    CUDA_VISIBLE_DEVICES (``wanted``) was set."""
    return ResolutionError(
        f"{started} before this rank's GPUs were set (CUDA_VISIBLE_DEVICES={wanted!r}), so "
        "the setting would have no effect and this process would use GPUs outside its "
        "allocation. Create MPIClusterResolver before anything lists or configures GPUs "
        "(tf.config.list_physical_devices, set_memory_growth), or set the variable before "
        "Python starts: `mpi-resolver exec -- python train.py`; for a CUDA-aware MPI, also "
        "`mpi-resolver exec --source slurm` (no MPI before the program) or turn its CUDA "
        "support off for the resolver (Open MPI: OMPI_MCA_opal_cuda_support=0).")
