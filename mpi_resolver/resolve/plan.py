"""The plan: which sources a resolution reads (Slurm's step, MPI, both), decided from the
options and the variables alone, before MPI starts (pure but for the ``library`` it is given).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, List, Mapping, Optional, Tuple

from mpi_resolver.core.errors import ResolutionError
from mpi_resolver.launch.launchers import Launch, check_pairing, detect_launch, srun_advice
from mpi_resolver.launch.mpi_library import MpiLibrary
from mpi_resolver.options import Options
from mpi_resolver.launch.slurm_step import SlurmStep, batch_step_view, slurm_describes_ranks
from mpi_resolver.launch.srun_pmi import check_intel_placement, pmi1_warnings


@dataclass(frozen=True, kw_only=True)
class Plan:
    """Which sources a resolution uses, and the variables it resolves from."""

    use_slurm: bool          # Slurm's step variables give rank, tasks and nodes
    use_mpi: bool            # MPI is started and every rank's record exchanged
    verify: bool             # Slurm and MPI are compared
    launch: Launch
    env: Mapping[str, str]   # the variables (a batch step's as one task: batch_step_view)
    notes: Tuple[str, ...] = ()     # one-line logs (why a source was chosen, a skipped check)
    #: what to say before MPI starts, as MPI_Init may hang or abort (srun_pmi's faults)
    warnings: Tuple[str, ...] = ()

    @property
    def uses(self) -> str:
        """Returns what the resolution reads: 'slurm' or 'mpi', '+check' where it compares
        Slurm with MPI."""
        return ("slurm" if self.use_slurm else "mpi") + ("+check" if self.verify else "")


@dataclass(frozen=True)
class _Task:
    """What the plan's rules look at."""

    opts: Options
    env: Mapping[str, str]
    launch: Launch
    library: Optional[MpiLibrary]
    in_step: bool        # a task of a Slurm step (SLURM_PROCID is set)
    slurm_ranks: bool    # Slurm's variables describe the MPI ranks (not an mpirun's daemons)
    mpi_ok: bool         # MPI may be started here

    @property
    def advice(self) -> str:
        return srun_advice(self.launch.name, self.library)


def _use_slurm(task: _Task) -> Tuple[bool, List[str]]:
    """Returns (whether Slurm's variables give rank and placement, notes).

    Raises:
      ResolutionError: source='mpi' in a Slurm task without MPI wiring.
    """
    source = task.opts.source
    if source == "slurm":
        return True, []
    if source == "mpi":
        if not task.mpi_ok:
            raise ResolutionError(
                "source='mpi', but this process is a Slurm task without MPI wiring (no "
                "PMIX_RANK, PMI_RANK or OMPI_COMM_WORLD_RANK): starting MPI here would give "
                f"each task a world of its own. Launch with {task.advice}, or use "
                "source='slurm'.")
        return False, []
    if task.in_step and not task.slurm_ranks:
        return False, [
            f"mpirun/mpiexec ({task.launch.name}) inside a Slurm allocation: SLURM_PROCID and "
            "SLURM_STEP_NUM_TASKS describe its launcher daemons, not the ranks; using MPI."]
    return task.slurm_ranks, []


def _verify(task: _Task, batch: bool) -> Tuple[bool, List[str]]:
    """Returns (whether Slurm is compared with MPI, notes).

    Raises:
      ResolutionError: verify=True where there is no step to check, or no MPI to check with.
    """
    verify = task.opts.verify
    if verify is True:
        if not task.in_step:
            raise ResolutionError(
                "verify=True: there is no Slurm step to check against MPI (SLURM_PROCID is "
                f"not set). Run under {task.advice}, or use verify='auto'.")
        if not task.mpi_ok:
            why = ("source='slurm' never starts MPI" if task.opts.source == "slurm" else
                   "this Slurm task has no MPI wiring (srun --mpi=none?)")
            raise ResolutionError(
                f"verify=True needs MPI, but {why}. Launch with {task.advice} and "
                "source='auto', or use verify='auto'.")
        return True, []
    if verify != "auto":
        return False, []
    if task.slurm_ranks and not task.mpi_ok and task.opts.source != "slurm" and not batch:
        return False, [
            "Slurm step without MPI wiring (no PMIX_RANK or PMI_RANK): the cross-check of "
            f"Slurm against MPI is skipped. Launch with {task.advice} to enable it, or pass "
            "verify=False to silence this."]
    return task.slurm_ranks and task.mpi_ok, []


def _before_mpi(task: _Task) -> List[str]:
    """Returns the warnings to give before MPI_Init.

    Raises:
      ResolutionError: a pairing of srun plugin and MPI whose MPI_Init would abort or fail.
    """
    check_pairing(task.launch, task.library)
    intel = check_intel_placement(task.launch, task.library, task.env)
    return ([intel] if intel else []) + pmi1_warnings(task.launch, task.library, task.env)


def make_plan(opts: Options, env: Mapping[str, str], *, have_comm: bool = False,
         mpi_running: bool = False,
         library: Callable[[], Optional[MpiLibrary]] = lambda: None) -> Plan:
    """Returns the sources to use. ``library()`` reads which MPI mpi4py loads, without
    starting it; it is asked only in a Slurm task that may start MPI for the first time.

    Raises:
      ResolutionError: source='mpi' or verify=True where MPI cannot be started safely,
        verify=True where there is no Slurm step to check, the batch step of a job of several
        tasks (see slurm_step.batch_step_view), or a launch whose MPI_Init would fail.
    """
    view, batch_note = batch_step_view(env)
    launch = detect_launch(view)
    in_step = SlurmStep.present(view)
    started = have_comm or mpi_running
    lib = None
    if opts.source != "slurm" and in_step and (launch.srun_plugin or not launch.wired) \
            and not started:
        lib = library()
    # MPI may be started unless this is a Slurm task without MPI wiring (srun --mpi=none):
    # there MPI_Init can abort the process or start a silent world of one.
    mpi_ok = opts.source != "slurm" and (started or launch.wired or not in_step)
    task = _Task(opts, view, launch, lib, in_step, slurm_describes_ranks(view, launch), mpi_ok)
    use_slurm, source_notes = _use_slurm(task)
    verify, verify_notes = _verify(task, batch_note is not None)
    use_mpi = (not use_slurm) or verify
    return Plan(use_slurm=use_slurm, use_mpi=use_mpi, verify=verify, launch=launch, env=view,
                notes=tuple(([batch_note] if batch_note else []) + source_notes
                            + verify_notes),
                warnings=tuple(_before_mpi(task)) if use_mpi else ())
