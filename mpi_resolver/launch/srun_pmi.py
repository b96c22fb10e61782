"""What MPI libraries' own PMI-1 clients do wrong under ``srun --mpi=pmi2``, told before
MPI_Init (pure: reads the variables and the library's version text).

Slurm's pmi2 plugin also serves PMI-1, the wire protocol that MPICH's and Intel MPI's own PMI
clients speak there (both prefer PMI-1 when PMI_SIZE is set). Two faults, measured with Slurm
22.05 (the code is unchanged in Slurm 25), MPICH 5.0.2 and Intel MPI 2021.18 from PyPI:

- Slurm reads a PMI-1 request with a single read() of at most 1,024 bytes
  (src/plugins/mpi/pmi2/pmi1.c, "TODO: read until newline"). A longer put line is answered
  rc=0 but stored nowhere, and Slurm logs "mpi/pmi2: value not properly terminated in client
  request". MPICH's UCX netmod exchanges 4,096-byte address cards between nodes, hex-encoded
  in 511-byte segments: put lines of up to about 1,080 bytes, whose length depends on the
  memory the card was copied from. So a job of two or more nodes hangs or aborts in MPI_Init
  now and then, depending on the program and its environment. The OFI netmod puts only the
  real address (lines of about 100 bytes); PMI-2's wire protocol has no such limit.
- Intel MPI's own PMI-1 client does not ask Slurm where the ranks run: it takes them to be
  spread evenly in blocks (the first tasks % nodes nodes one more). Where Slurm placed them
  otherwise (``-N2 -n4`` gives 3,1; cyclic), ranks of different nodes try to share memory and
  MPI_Init fails ("unable to allocate shared memory"). Slurm's own PMI-2 library
  (I_MPI_PMI_LIBRARY=.../libpmi2.so) tells it the real placement.
"""

from __future__ import annotations

from typing import List, Mapping, Optional, Sequence

from mpi_resolver.core.errors import ResolutionError
from mpi_resolver.launch.launchers import Launch
from mpi_resolver.placement.layout import Runs, expand_runs, slurm_runs
from mpi_resolver.launch.mpi_library import MpiLibrary
from mpi_resolver.launch.slurm_step import SlurmStep


#: The variables these rules read besides Slurm's: how MPICH and Intel MPI talk to srun.
PMI_VARIABLES = ("MPIR_CVAR_CH4_NETMOD", "MPIR_CVAR_PMI_VERSION", "I_MPI_PMI_LIBRARY")
#: Slurm's limit on one PMI-1 request (MAX_READLINE in src/plugins/mpi/pmi2/pmi1.c).
PMI1_LINE_BYTES = 1024
_LIBPMI2 = ("I_MPI_PMI_LIBRARY set to Slurm's PMI-2 library (e.g. "
            "/usr/lib/x86_64-linux-gnu/libpmi2.so.0 from Debian's libpmi2-0)")


def even_blocks(tasks: int, nodes: int) -> List[int]:
    """Returns the tasks per node of an even block spread: 5 tasks on 2 nodes -> [3, 2]."""
    if nodes < 1:
        return []
    base, extra = divmod(tasks, nodes)
    return [base + 1 if i < extra else base for i in range(nodes)]


def intel_groups_cross_nodes(runs: Runs, nodes: int) -> bool:
    """Returns True when Intel MPI's even-block guess puts ranks of different nodes (as
    ``runs`` places them) into one shared-memory group of two or more."""
    placement = expand_runs(runs)
    start = 0
    for size in even_blocks(len(placement), nodes):
        if len(set(placement[start:start + size])) > 1:
            return True
        start += size
    return False


def _step_runs(env: Mapping[str, str]) -> Optional[tuple[Runs, int]]:
    """Returns (where Slurm placed each rank, the number of nodes), or None where the step's
    variables do not tell (malformed, or a plane/arbitrary distribution)."""
    step = SlurmStep(env)
    try:
        hosts, counts = step.hostlist(), step.tasks_per_node()
    except ResolutionError:
        return None
    if len(hosts) != len(counts):
        return None
    runs = slurm_runs(hosts, counts, step.distribution())
    return None if runs is None else (runs, len(hosts))


def mpich_default_netmod(library: MpiLibrary) -> Optional[str]:
    """Returns the netmod MPICH uses unless told otherwise: the first of its 'MPICH Device:'
    line ('ch4:ucx ofi' -> 'ucx'), or None where the text does not say."""
    for line in library.version.splitlines():
        if line.startswith("MPICH Device:"):
            words = line.split(":", 1)[1].split()
            if words and words[0].startswith("ch4:"):
                return words[0][len("ch4:"):].split(",")[0] or None
            return None
    return None


def _mpich_own_pmi1(library: MpiLibrary, env: Mapping[str, str]) -> bool:
    """Returns True when MPICH speaks PMI-1 to Slurm: its own PMI (no Slurm library named at
    configure time) and PMI-2 not asked for."""
    configure = next((line for line in library.version.splitlines()
                      if line.startswith("MPICH configure:")), "")
    if any(flag in configure for flag in ("--with-pmi", "--with-slurm")):
        return False
    version = env.get("MPIR_CVAR_PMI_VERSION")
    return version is None or version.strip() != "2"


def pmi1_warnings(launch: Launch, library: Optional[MpiLibrary],
                  env: Mapping[str, str]) -> List[str]:
    """Returns one-line warnings for a launch that may hang in MPI_Init through Slurm's PMI-1
    line limit: MPICH's UCX netmod under ``srun --mpi=pmi2`` on two or more nodes."""
    if launch.srun_plugin != "pmi2" or library is None or library.family != "mpich":
        return []
    netmod = env.get("MPIR_CVAR_CH4_NETMOD", "").strip().lower() or \
        mpich_default_netmod(library)
    nodes = len(_counts(env))
    if netmod != "ucx" or nodes < 2 or not _mpich_own_pmi1(library, env):
        return []
    return [f"{library.name} with its UCX netmod under srun --mpi=pmi2 on {nodes} nodes can "
            "hang in MPI_Init: it speaks PMI-1 there and sends its 4,096-byte UCX address "
            f"cards in lines of up to about 1,080 bytes, which Slurm's PMI-1 server cuts at "
            f"{PMI1_LINE_BYTES:,} ('mpi/pmi2: value not properly terminated in client "
            "request'). Set MPIR_CVAR_CH4_NETMOD=ofi (short cards; FI_PROVIDER for the "
            "fabric), or start the ranks with MPICH's mpiexec inside the allocation."]


def check_intel_placement(launch: Launch, library: Optional[MpiLibrary],
                          env: Mapping[str, str]) -> Optional[str]:
    """Returns a warning where Intel MPI's own PMI-1 client cannot be checked against the
    placement (a plane or arbitrary distribution), else None.

    Raises:
      ResolutionError: Intel MPI under ``srun --mpi=pmi2`` without I_MPI_PMI_LIBRARY where
        Slurm placed the ranks otherwise than evenly in blocks: MPI_Init would fail.
    """
    if launch.srun_plugin != "pmi2" or library is None or library.family != "intel" \
            or env.get("I_MPI_PMI_LIBRARY"):
        return None
    found = _step_runs(env)
    if found is None:
        counts = _counts(env)
        if len(counts) > 1 and max(counts) > 1:
            return (f"{library.name} under srun --mpi=pmi2 without I_MPI_PMI_LIBRARY takes "
                    "the ranks to be spread evenly in blocks over the nodes, which this "
                    f"distribution may not do; if MPI_Init fails, run with {_LIBPMI2}, or "
                    "use srun --mpi=pmix.")
        return None
    runs, nodes = found
    if not intel_groups_cross_nodes(runs, nodes):
        return None
    placed = ",".join(str(n) for n in _counts(env))
    raise ResolutionError(
        f"{library.name} under srun --mpi=pmi2 without I_MPI_PMI_LIBRARY takes the ranks to be "
        f"spread evenly in blocks ({','.join(map(str, even_blocks(len(expand_runs(runs)), nodes)))}"
        f" tasks per node), but Slurm placed them otherwise (SLURM_STEP_TASKS_PER_NODE="
        f"{placed}, distribution {SlurmStep(env).distribution()}): ranks of different nodes "
        "would try to share memory and MPI_Init would fail ('unable to allocate shared "
        f"memory'). Run with {_LIBPMI2}, or use srun --mpi=pmix.")


def _counts(env: Mapping[str, str]) -> Sequence[int]:
    """Returns SLURM_STEP_TASKS_PER_NODE expanded, or () where it cannot be read."""
    try:
        return SlurmStep(env).tasks_per_node()
    except ResolutionError:
        return ()
