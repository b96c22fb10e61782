"""This process's resolution, as MPIClusterResolver makes it, without TensorFlow: the
environment as the launcher gave it, MPI on a communicator, and CUDA_VISIBLE_DEVICES set to this
rank's GPUs (before MPI_Init where Slurm's variables give them, and after the resolution).

Whether CUDA started already is asked of ``started`` (libcuda loaded, by default; the
TensorFlow edge asks TensorFlow first whether it listed its GPUs).
"""

from __future__ import annotations

import functools
import os
from typing import Any, Callable, Dict, Optional, Tuple

from mpi_resolver.core.logs import log_each
from mpi_resolver.exchange.transport import MpiTransport, mpi_initialized, mpi_library, world
from mpi_resolver.gpus.cuda_state import cuda_loaded, too_early
from mpi_resolver.gpus.lists import narrowing_changes
from mpi_resolver.options import Options
from mpi_resolver.resolve.environment import snapshot
from mpi_resolver.resolve.resolution import Resolution, resolve_job

__all__ = ["resolve_process", "narrow", "environment", "cuda_started", "Started"]

#: Returns why CUDA has started in this process already (for the error), or None.
Started = Callable[[], Optional[str]]

_CVD = "CUDA_VISIBLE_DEVICES"
# What this process's resolutions wrote to CUDA_VISIBLE_DEVICES, and what was there before, so
# that a second resolution allocates from the node's GPUs and not from the narrowed list.
_narrowed: Dict[str, Optional[str]] = {}


def cuda_started() -> Optional[str]:
    """Returns why CUDA has started in this process (libcuda is loaded), or None."""
    if cuda_loaded():
        return ("CUDA is already loaded in this process (libcuda.so in /proc/self/maps: a "
                "CUDA-aware MPI's MPI_Init, or an earlier import)")
    return None


def resolve_process(opts: Options, *, comm: Any = None, auto_set_gpu: bool = True,
                    started: Started = cuda_started) -> Resolution:
    """Returns this process's Resolution (MPI on ``comm``, else COMM_WORLD, where the plan
    uses MPI), its plan's warnings and its notes logged; with ``auto_set_gpu``,
    CUDA_VISIBLE_DEVICES holds this rank's GPUs on return (see narrow).

    Raises:
      ResolutionError, FormatError, MismatchError: as resolve_job; ResolutionError from
        narrow.
    """
    res = resolve_job(opts, environment(), library=mpi_library, have_comm=comm is not None,
                      mpi_running=mpi_initialized(), warn=log_each,
                      transport=lambda: MpiTransport(world(comm)[0], opts.timeout),
                      before_mpi=functools.partial(_set_before_mpi, started=started)
                      if auto_set_gpu else None)
    log_each(res.notes)
    if auto_set_gpu:
        narrow(res, started)  # before anything starts CUDA
    return res


def environment() -> Dict[str, str]:
    """Returns the variables mpi_resolver reads, with CUDA_VISIBLE_DEVICES as it was before
    this process's resolutions narrowed it."""
    env = snapshot()
    if _narrowed and env.get(_CVD) == _narrowed["written"]:
        if _narrowed["original"] is None:
            env.pop(_CVD, None)
        else:
            env[_CVD] = _narrowed["original"]
    else:
        _narrowed.clear()  # never narrowed, or the user set it since: theirs is the original
    return env


def narrow(res: Resolution, started: Started = cuda_started) -> None:
    """Sets CUDA_VISIBLE_DEVICES to this rank's GPUs (``res.visible_devices``).

    Raises:
      ResolutionError: CUDA already started (``started()`` says why) and the setting would
        change the GPUs this process uses.
    """
    wanted = res.visible_devices
    node = res.gpus.node_gpus(res.layout.host_of(res.rank)[0])
    if narrowing_changes(os.environ.get(_CVD), node, res.own_gpus):
        why = started()
        if why is not None:
            raise too_early(why, wanted)
    _set_visible_devices(wanted)


def _set_visible_devices(value: str) -> None:
    """Sets CUDA_VISIBLE_DEVICES, remembering the value it replaces the first time."""
    if not _narrowed:
        _narrowed["original"] = os.environ.get(_CVD)
    os.environ[_CVD] = value
    _narrowed["written"] = value


def _set_before_mpi(gpus: Tuple[str, ...], started: Started) -> None:
    """Sets CUDA_VISIBLE_DEVICES to this rank's GPUs as Slurm's variables give them, before
    MPI_Init (a CUDA-aware MPI may start CUDA there); not where CUDA started already, so that
    the check in narrow compares with what CUDA saw."""
    if started() is None:
        _set_visible_devices(",".join(gpus))
