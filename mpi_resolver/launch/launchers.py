"""Which launcher started this process, one small type per launcher (pure: reads a mapping).

Each launcher is a frozen record: the variables it sets, whether it is an mpirun of its own
(inside a Slurm allocation its ranks inherit the Slurm variables of the daemons srun started),
which ``srun --mpi`` plugin it is, and which plugin to advise for the MPIs it starts. The
table LAUNCHERS is searched in order; the first whose ``detect(env)`` holds started us.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Mapping, Optional, Tuple

from mpi_resolver.core.errors import ResolutionError
from mpi_resolver.launch.mpi_library import MpiLibrary
from mpi_resolver.core.values import whole_number


@dataclass(frozen=True)
class Launcher:
    """One MPI launcher: how to recognise it and what it means for the resolution."""

    name: str                         # 'openmpi', 'mvapich', 'hydra', 'pmix', 'pmi2'
    rank_variables: Tuple[str, ...]   # the first one set gives the rank
    local_rank_variable: str          # this process's index on its node
    requires: Tuple[str, ...] = ()    # also set (Hydra: MPI_LOCALRANKID, unlike srun pmi2)
    mpirun: bool = False              # a launcher of its own (mpirun/mpiexec), not srun
    srun_plugin: Optional[str] = None  # the srun --mpi plugin this is ('pmix', 'pmi2')
    advice: str = "pmi2"              # the srun --mpi plugin the MPIs it starts speak

    @property
    def variables(self) -> Tuple[str, ...]:
        """Returns every variable ``detect`` and ``read`` look at."""
        return (*self.rank_variables, self.local_rank_variable, *self.requires)

    def detect(self, env: Mapping[str, str]) -> bool:
        """Returns True when ``env`` holds this launcher's variables."""
        return any(v in env for v in self.rank_variables) and all(v in env for v in self.requires)

    def read(self, env: Mapping[str, str]) -> "Launch":
        """Returns what this launcher's variables say (unreadable numbers as None)."""
        rank_variable = next((v for v in self.rank_variables if v in env), None)
        rank = whole_number(env[rank_variable]) if rank_variable is not None else None
        return Launch(self, rank, whole_number(env.get(self.local_rank_variable)))


LAUNCHERS: Tuple[Launcher, ...] = (
    Launcher("openmpi", ("OMPI_COMM_WORLD_RANK",), "OMPI_COMM_WORLD_LOCAL_RANK", mpirun=True,
             advice="pmix"),
    Launcher("mvapich", ("MV2_COMM_WORLD_RANK",), "MV2_COMM_WORLD_LOCAL_RANK", mpirun=True),
    # MPICH's and Intel MPI's Hydra; older PMI-1 Hydra sets PMI_ID for the rank
    Launcher("hydra", ("PMI_RANK", "PMI_ID"), "MPI_LOCALRANKID", requires=("MPI_LOCALRANKID",),
             mpirun=True),
    Launcher("pmix", ("PMIX_RANK",), "SLURM_LOCALID", srun_plugin="pmix", advice="pmix"),
    Launcher("pmi2", ("PMI_RANK", "PMI_ID"), "SLURM_LOCALID", srun_plugin="pmi2"),
)
BY_NAME: Dict[Optional[str], Launcher] = {launcher.name: launcher for launcher in LAUNCHERS}


@dataclass(frozen=True)
class Launch:
    """The launcher recognised from this process's variables (None: none set any)."""

    launcher: Optional[Launcher]
    rank: Optional[int]          # the launcher's rank variable, where it has one
    local_rank: Optional[int]    # this process's index on its node, where the launcher says

    @property
    def name(self) -> Optional[str]:
        """Returns the launcher's name, or None."""
        return None if self.launcher is None else self.launcher.name

    @property
    def wired(self) -> bool:
        """True when a launcher set variables MPI_Init can connect to (so MPI may start)."""
        return self.launcher is not None

    @property
    def mpirun(self) -> bool:
        """True under an mpirun/mpiexec of its own (Open MPI, Hydra, MVAPICH)."""
        return self.launcher is not None and self.launcher.mpirun

    @property
    def srun_plugin(self) -> Optional[str]:
        """Returns the srun --mpi plugin this task was started with, or None."""
        return None if self.launcher is None else self.launcher.srun_plugin


NO_LAUNCH = Launch(None, None, None)


def detect_launch(env: Mapping[str, str]) -> Launch:
    """Returns the MPI launcher that started this process, from its variables.

    Open MPI's mpirun sets OMPI_COMM_WORLD_*; MVAPICH's mpirun_rsh MV2_COMM_WORLD_*; MPICH's
    and Intel MPI's Hydra set PMI_RANK (older PMI: PMI_ID) and MPI_LOCALRANKID;
    ``srun --mpi=pmix`` sets PMIX_RANK; ``srun --mpi=pmi2`` sets PMI_RANK. ``srun --mpi=none``
    sets none of them.
    """
    for launcher in LAUNCHERS:
        if launcher.detect(env):
            return launcher.read(env)
    return NO_LAUNCH


def is_mpirun(name: Optional[str]) -> bool:
    """Returns True when the launcher named ``name`` (a record's) is an mpirun of its own."""
    launcher = BY_NAME.get(name)
    return launcher is not None and launcher.mpirun


def srun_advice(launcher: Optional[str], library: Optional[MpiLibrary] = None,
                command: str = "") -> str:
    """Returns the srun launch (of ``command``, where given) that wires the MPI in use to a
    Slurm step: PMIx for Open MPI (Debian's), PMI-2 for MPICH, Intel MPI and MVAPICH (MPICH
    aborts in MPI_Init under PMIx); from the library mpi4py loads where known, else from the
    launcher (by name); both where neither tells (``srun --mpi=none`` and no mpi4py)."""
    plugin = library.plugin if library is not None else None
    if plugin is None and launcher in BY_NAME:
        plugin = BY_NAME[launcher].advice
    run = f" {command}" if command else ""
    if plugin is not None:
        return f"`srun --mpi={plugin}{run}`"
    return f"`srun --mpi=pmix{run}` (Open MPI; `srun --mpi=pmi2` for MPICH, Intel MPI, MVAPICH)"


def placement_fix(launcher: Optional[str]) -> str:
    """Returns the fix where Slurm's variables cannot say on which node each rank runs."""
    return (f"Launch with {srun_advice(launcher)} so that mpi_resolver learns placement from "
            "MPI (source='auto'), or use --distribution=block.")


def check_pairing(launch: Launch, library: Optional[MpiLibrary]) -> None:
    """Raises ResolutionError where srun's --mpi plugin is one the MPI mpi4py loads cannot
    speak: MPI_Init would abort (or, for some, hang) before any error could be told.

    Raises:
      ResolutionError: naming the plugin, the library and the launch that fits it.
    """
    plugin = launch.srun_plugin
    if plugin is None or library is None or library.speaks(plugin) is not False:
        return
    variable = "PMIX_RANK" if plugin == "pmix" else "PMI_RANK"
    raise ResolutionError(
        f"this task was started by srun --mpi={plugin} ({variable} is set), but mpi4py uses "
        f"{library.name}, which cannot use {'PMIx' if plugin == 'pmix' else 'PMI-2'}: "
        "MPI_Init would abort. Launch with "
        f"{srun_advice(None, library)} (srun --mpi=list shows the plugins).")
