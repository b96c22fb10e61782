"""Which launcher started this process, and what its variables say (pure: reads a mapping)."""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from typing import FrozenSet, List, Mapping, Optional, Tuple

from ._gpu_allocation import GPU_VARIABLES
from ._errors import FormatError, ResolutionError
from ._hostlist import expand_hostlist, expand_tasks_per_node
from ._ports import KEY_VARIABLES

__all__ = ["SlurmStep", "MpiLaunch", "detect_mpi_launch", "slurm_describes_ranks",
           "batch_step_view", "parse_int", "optional_int", "SLURM_VARS", "VARIABLES",
           "MPIRUN_LAUNCHERS", "srun_advice", "placement_fix", "MpiLibrary", "check_pairing"]

#: The Slurm variables the resolver reads, with what each holds.
SLURM_VARS = {
    "SLURM_PROCID": "this task's rank in the step (0..N-1)",
    "SLURM_STEP_NUM_TASKS": "the number of tasks in the step",
    "SLURM_STEP_NODELIST": "the step's nodes as a hostlist, e.g. n[01-04]",
    "SLURM_STEP_TASKS_PER_NODE": "tasks on each node of the step, e.g. 3(x2),1",
    "SLURMD_NODENAME": "the node this task runs on",
    "SLURM_LOCALID": "this task's index among the step's tasks on its node",
    "SLURM_DISTRIBUTION": "how srun placed tasks on nodes: block, cyclic, plane, arbitrary",
    "SLURM_GTIDS": "the ranks of the step that run on this node, e.g. 0,2,3",
}


#: Every environment variable mpi_resolver reads (the resolver snapshots just these).
VARIABLES = (*SLURM_VARS, *GPU_VARIABLES, "SLURM_JOB_ID", "SLURM_STEP_ID", "SLURM_NTASKS",
             "CUDA_VISIBLE_DEVICES", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_LOCAL_RANK",
             "MV2_COMM_WORLD_RANK", "MV2_COMM_WORLD_LOCAL_RANK", "PMI_RANK", "PMI_ID",
             "MPI_LOCALRANKID", "PMIX_RANK", *KEY_VARIABLES,
             # how MPICH and Intel MPI talk to srun --mpi=pmi2 (see srun_pmi.py)
             "MPIR_CVAR_CH4_NETMOD", "MPIR_CVAR_PMI_VERSION", "I_MPI_PMI_LIBRARY")

#: Launchers of their own (mpirun/mpiexec): inside a Slurm allocation their ranks inherit the
#: Slurm variables of the launcher daemons that srun started, not ones that describe the ranks.
MPIRUN_LAUNCHERS = ("openmpi", "hydra", "mvapich")


def parse_int(value: Optional[str], *, name: str, minimum: int = 0,
              fix: str = "") -> int:
    """Returns ``value`` as an int >= minimum.

    Raises:
      ResolutionError: ``value`` is None (the variable is not set).
      FormatError: not a whole number, or below ``minimum``.
    """
    if value is None:
        raise ResolutionError(f"{name} is not set. {fix}".strip())
    text = value.strip()
    if not text.isascii() or not text.isdigit() or len(text) > 18:
        raise FormatError(
            f"{name}={value!r} is not a whole number; expected an integer >= {minimum}. "
            f"{fix}".strip())
    number = int(text)
    if number < minimum:
        raise FormatError(f"{name}={value!r}: expected an integer >= {minimum}. {fix}".strip())
    return number


@dataclass(frozen=True)
class MpiLibrary:
    """The MPI library mpi4py loads, as MPI_Get_library_version describes it (readable before
    MPI_Init); ``components``: Open MPI's PMIx components found beside it ('ext3x', 's2')."""

    version: str
    components: FrozenSet[str] = frozenset()

    @property
    def family(self) -> Optional[str]:
        """Returns 'openmpi', 'intel', 'mvapich', 'mpich' or None."""
        text = self.version
        if "Open MPI" in text:
            return "openmpi"
        if "Intel(R) MPI" in text:
            return "intel"
        if "MVAPICH" in text:
            return "mvapich"
        if text.startswith("MPICH"):
            return "mpich"
        return None

    @property
    def name(self) -> str:
        """Returns the library's name and version: 'MPICH Version: 5.0.2', 'Open MPI v4.1.4'."""
        first = (self.version.strip().splitlines() or ["?"])[0]
        return " ".join(first.split(",", 1)[0].split())

    def speaks(self, plugin: str) -> Optional[bool]:
        """Returns whether MPI_Init works under ``srun --mpi=<plugin>`` ('pmix' or 'pmi2'), or
        None where that cannot be told.

        MPICH speaks PMI-2, and PMIx only if configured --with-pmix; Intel MPI both (with the
        system's libpmix); MVAPICH PMI-2; Open MPI PMIx, and PMI-2 only before version 5 and
        with its s2 component (Debian's has none).
        """
        family = self.family
        if family == "mpich":
            return plugin == "pmi2" or "--with-pmix" in self.version
        if family == "intel":
            return True
        if family == "mvapich":
            return True if plugin == "pmi2" else None
        if family == "openmpi":
            if plugin == "pmix":
                return True
            major = self.version.split("Open MPI v", 1)[-1].split(".", 1)[0]
            if major.isdigit() and int(major) >= 5:
                return False
            return "s2" in self.components if self.components else None
        return None


def srun_advice(launcher: Optional[str], library: Optional[MpiLibrary] = None) -> str:
    """Returns the srun launch that wires the MPI in use to a Slurm step: PMIx for Open MPI
    (Debian's), PMI-2 for MPICH, Intel MPI and MVAPICH (MPICH aborts in MPI_Init under PMIx);
    from the library mpi4py loads where known, else from the launcher; both where neither
    tells (``srun --mpi=none`` and no mpi4py)."""
    family = library.family if library is not None else None
    if family == "openmpi" or (family is None and launcher in ("pmix", "openmpi")):
        return "`srun --mpi=pmix`"
    if family in ("mpich", "intel", "mvapich") or launcher in ("pmi2", "hydra", "mvapich"):
        return "`srun --mpi=pmi2`"
    return "`srun --mpi=pmix` (Open MPI; `srun --mpi=pmi2` for MPICH, Intel MPI, MVAPICH)"


def check_pairing(launch: "MpiLaunch", library: Optional[MpiLibrary]) -> None:
    """Raises ResolutionError where srun's --mpi plugin is one the MPI mpi4py loads cannot
    speak: MPI_Init would abort (or, for some, hang) before any error could be told.

    Raises:
      ResolutionError: naming the plugin, the library and the launch that fits it.
    """
    plugin = {"pmix": "pmix", "pmi2": "pmi2"}.get(launch.name or "")
    if plugin is None or library is None or library.speaks(plugin) is not False:
        return
    variable = "PMIX_RANK" if plugin == "pmix" else "PMI_RANK"
    raise ResolutionError(
        f"this task was started by srun --mpi={plugin} ({variable} is set), but mpi4py uses "
        f"{library.name}, which cannot use {'PMIx' if plugin == 'pmix' else 'PMI-2'}: "
        "MPI_Init would abort. Launch with "
        f"{srun_advice(None, library)} (srun --mpi=list shows the plugins).")


def placement_fix(launcher: Optional[str]) -> str:
    """Returns the fix where Slurm's variables cannot say on which node each rank runs."""
    return (f"Launch with {srun_advice(launcher)} so that mpi_resolver learns placement from "
            "MPI (source='auto'), or use --distribution=block.")


_NOT_IN_STEP = ("Is this process a task of a Slurm step (started by srun)? Under sbatch or "
                f"salloc, start it with {srun_advice(None)}, or use source='mpi' under "
                "mpirun.")


@dataclass(frozen=True)
class SlurmStep:
    """What Slurm's step variables say; each field is parsed when first asked for."""

    env: Mapping[str, str]

    @staticmethod
    def present(env: Mapping[str, str]) -> bool:
        """Returns True when SLURM_PROCID is set: this process is (or descends from) a step task."""
        return "SLURM_PROCID" in env

    def procid(self) -> int:
        """Returns SLURM_PROCID. Raises ResolutionError/FormatError naming the variable."""
        return parse_int(self.env.get("SLURM_PROCID"), name="SLURM_PROCID", fix=_NOT_IN_STEP)

    def num_tasks(self) -> int:
        """Returns SLURM_STEP_NUM_TASKS (>= 1)."""
        return parse_int(self.env.get("SLURM_STEP_NUM_TASKS"), name="SLURM_STEP_NUM_TASKS",
                         minimum=1, fix=_NOT_IN_STEP)

    def hostlist(self) -> List[str]:
        """Returns SLURM_STEP_NODELIST expanded; FormatError names the variable."""
        value = self.env.get("SLURM_STEP_NODELIST")
        if value is None:
            raise ResolutionError(f"SLURM_STEP_NODELIST is not set. {_NOT_IN_STEP}")
        try:
            return expand_hostlist(value)
        except FormatError as e:
            raise FormatError(f"SLURM_STEP_NODELIST: {e}") from e

    def tasks_per_node(self) -> List[int]:
        """Returns SLURM_STEP_TASKS_PER_NODE expanded; FormatError names the variable."""
        value = self.env.get("SLURM_STEP_TASKS_PER_NODE")
        if value is None:
            raise ResolutionError(f"SLURM_STEP_TASKS_PER_NODE is not set. {_NOT_IN_STEP}")
        try:
            counts = expand_tasks_per_node(value)
        except FormatError as e:
            raise FormatError(f"SLURM_STEP_TASKS_PER_NODE: {e}") from e
        if 0 in counts:
            raise FormatError(
                f"SLURM_STEP_TASKS_PER_NODE={value!r} gives a node 0 tasks; every node of a "
                "step runs at least one task.")
        return counts

    def nodename(self) -> Optional[str]:
        """Returns SLURMD_NODENAME, or None where it is not set."""
        return self.env.get("SLURMD_NODENAME") or None

    def distribution(self) -> str:
        """Returns the node-level part of SLURM_DISTRIBUTION ('block' when unset).

        ``cyclic:block`` -> ``cyclic``; ``plane=4`` -> ``plane``.
        """
        value = self.env.get("SLURM_DISTRIBUTION") or "block"
        return value.split(":", 1)[0].split("=", 1)[0].strip().lower() or "block"

    def gtids(self) -> Optional[Tuple[int, ...]]:
        """Returns SLURM_GTIDS (the step ranks on this node), or None where it is not set."""
        value = self.env.get("SLURM_GTIDS")
        if not value:
            return None
        return tuple(parse_int(v, name="SLURM_GTIDS") for v in value.split(","))

    def digest(self) -> str:
        """Returns a short hash of the job-wide step variables, equal on all ranks of one step."""
        keys = ("SLURM_JOB_ID", "SLURM_STEP_ID", "SLURM_STEP_NODELIST",
                "SLURM_STEP_TASKS_PER_NODE", "SLURM_STEP_NUM_TASKS", "SLURM_DISTRIBUTION")
        text = "\0".join(self.env.get(k, "") for k in keys)
        return format(zlib.crc32(text.encode("utf-8", "replace")), "08x")


@dataclass(frozen=True)
class MpiLaunch:
    """The MPI launcher recognised from this process's variables."""

    name: Optional[str]          # 'openmpi', 'hydra', 'mvapich', 'pmix', 'pmi2' or None
    rank: Optional[int]          # the launcher's rank variable, when it has one
    local_rank: Optional[int]    # this process's index on its node, when the launcher says

    @property
    def wired(self) -> bool:
        """True when a launcher set variables MPI_Init can connect to (so MPI may start)."""
        return self.name is not None


def optional_int(env: Mapping[str, str], name: str) -> Optional[int]:
    """Returns variable ``name`` as an int, or None where it is unset or not a number."""
    value = (env.get(name) or "").strip()
    if not value.isascii() or not value.isdigit() or len(value) > 18:
        return None
    return int(value)


def detect_mpi_launch(env: Mapping[str, str]) -> MpiLaunch:
    """Returns the MPI launcher that started this process, from its variables.

    Open MPI's mpirun sets OMPI_COMM_WORLD_*; MVAPICH's mpirun_rsh MV2_COMM_WORLD_*; MPICH's
    and Intel MPI's Hydra set PMI_RANK (older PMI: PMI_ID) and MPI_LOCALRANKID;
    ``srun --mpi=pmix`` sets PMIX_RANK; ``srun --mpi=pmi2`` sets PMI_RANK. ``srun --mpi=none``
    sets none of them.
    """
    if "OMPI_COMM_WORLD_RANK" in env:
        return MpiLaunch("openmpi", optional_int(env, "OMPI_COMM_WORLD_RANK"),
                         optional_int(env, "OMPI_COMM_WORLD_LOCAL_RANK"))
    if "MV2_COMM_WORLD_RANK" in env:
        return MpiLaunch("mvapich", optional_int(env, "MV2_COMM_WORLD_RANK"),
                         optional_int(env, "MV2_COMM_WORLD_LOCAL_RANK"))
    pmi_rank = "PMI_RANK" if "PMI_RANK" in env else "PMI_ID" if "PMI_ID" in env else None
    if pmi_rank is not None and "MPI_LOCALRANKID" in env:
        return MpiLaunch("hydra", optional_int(env, pmi_rank),
                         optional_int(env, "MPI_LOCALRANKID"))
    slurm_local = optional_int(env, "SLURM_LOCALID")
    if "PMIX_RANK" in env:
        return MpiLaunch("pmix", optional_int(env, "PMIX_RANK"), slurm_local)
    if pmi_rank is not None:
        return MpiLaunch("pmi2", optional_int(env, pmi_rank), slurm_local)
    return MpiLaunch(None, None, None)


def slurm_describes_ranks(env: Mapping[str, str], launch: MpiLaunch) -> bool:
    """Returns True when Slurm's step variables describe this process's MPI rank.

    False outside a step, and under an mpirun/mpiexec (Open MPI, Hydra, MVAPICH) started
    inside an allocation: there every rank inherits SLURM_PROCID and SLURM_STEP_NUM_TASKS of
    the launcher daemon that srun started on its node.
    """
    if not SlurmStep.present(env):
        return False
    return launch.name not in MPIRUN_LAUNCHERS


def batch_step_view(env: Mapping[str, str]) -> Tuple[Mapping[str, str], Optional[str]]:
    """Returns (the variables to resolve from, a note) for the batch step of an sbatch job.

    The batch step is the job script itself (``python train.py`` without srun): SLURM_PROCID
    is 0 but no SLURM_STEP_* variable is set, and SLURM_NTASKS is the whole job's. With one
    task that is the job: resolved as one task on SLURMD_NODENAME, with a note. Elsewhere
    ``env`` and None.

    Raises:
      ResolutionError: a batch step of a job of more than one task (they are not running).
    """
    if not SlurmStep.present(env) or "SLURM_JOB_ID" not in env or any(
            k in env for k in ("SLURM_STEP_ID", "SLURM_STEP_NUM_TASKS", "SLURM_STEP_NODELIST")):
        return env, None
    tasks = optional_int(env, "SLURM_NTASKS")
    node = env.get("SLURMD_NODENAME")
    if tasks not in (None, 1) or not node:
        raise ResolutionError(
            f"this is the batch step of Slurm job {env['SLURM_JOB_ID']} (SLURM_PROCID is set "
            f"but no SLURM_STEP_* variable): the job script itself, started once, not the "
            f"job's SLURM_NTASKS={env.get('SLURM_NTASKS', '?')} tasks. Start training with "
            "srun inside the script: `srun --mpi=pmix python train.py` (with MPICH or Intel "
            "MPI, `srun --mpi=pmi2`).")
    view = dict(env, SLURM_STEP_NUM_TASKS="1", SLURM_STEP_NODELIST=node,
                SLURM_STEP_TASKS_PER_NODE="1")
    return view, (f"the batch step of Slurm job {env['SLURM_JOB_ID']} (python without srun): "
                  f"resolved as one task on {node}; start more with srun.")
