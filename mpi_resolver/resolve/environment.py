"""The environment variables mpi_resolver reads, all of them, and the snapshot of them that the
resolver and the command line both resolve from."""

from __future__ import annotations

import os
from typing import Dict, Mapping, Optional

from mpi_resolver.core import settings
from mpi_resolver.gpus.lists import GPU_VARIABLES
from mpi_resolver.launch.launchers import LAUNCHERS
from mpi_resolver.network.ports import KEY_VARIABLES
from mpi_resolver.network.proxies import NO_PROXY_VARIABLES, PROXY_VARIABLES
from mpi_resolver.launch.slurm_step import JOB_VARS, SLURM_VARS
from mpi_resolver.launch.srun_pmi import PMI_VARIABLES

#: Every environment variable mpi_resolver reads (a snapshot holds just these).
VARIABLES = tuple(dict.fromkeys((
    *SLURM_VARS, *JOB_VARS, *GPU_VARIABLES, "CUDA_VISIBLE_DEVICES",
    *(v for launcher in LAUNCHERS for v in launcher.variables), *KEY_VARIABLES,
    *PMI_VARIABLES, *PROXY_VARIABLES, *NO_PROXY_VARIABLES, *settings.VARIABLES)))


def snapshot(environ: Optional[Mapping[str, str]] = None) -> Dict[str, str]:
    """Returns the VARIABLES set in ``environ`` (default: this process's environment)."""
    source = os.environ if environ is None else environ
    return {name: source[name] for name in VARIABLES if name in source}
