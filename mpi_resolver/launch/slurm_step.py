"""What Slurm's step variables say of the job, read and checked against each other (pure)."""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from typing import Dict, List, Mapping, Optional, Tuple

from mpi_resolver.core.errors import FormatError, MismatchError, ResolutionError
from mpi_resolver.placement.host_names import HostIndex
from mpi_resolver.placement.hostlist import expand_hostlist, expand_tasks_per_node
from mpi_resolver.launch.launchers import Launch, placement_fix, srun_advice
from mpi_resolver.placement.layout import (Runs, check_own_placement, expand_runs, slurm_runs,
                                           tf_runs)
from mpi_resolver.options import Options
from mpi_resolver.core.values import require_whole, whole_number

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
#: Slurm variables read besides SLURM_VARS (the job's identity, a batch step's size).
JOB_VARS = ("SLURM_JOB_ID", "SLURM_STEP_ID", "SLURM_NTASKS")

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
        return require_whole(self.env.get("SLURM_PROCID"), name="SLURM_PROCID",
                             fix=_NOT_IN_STEP)

    def num_tasks(self) -> int:
        """Returns SLURM_STEP_NUM_TASKS (>= 1)."""
        return require_whole(self.env.get("SLURM_STEP_NUM_TASKS"), name="SLURM_STEP_NUM_TASKS",
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
        value = self.env.get("SLURM_DISTRIBUTION", "")
        return value.partition(":")[0].partition("=")[0].strip().lower() or "block"

    def gtids(self) -> Optional[Tuple[int, ...]]:
        """Returns SLURM_GTIDS (the step ranks on this node), or None where it is not set."""
        value = self.env.get("SLURM_GTIDS")
        if not value:
            return None
        numbers = tuple(whole_number(v) for v in value.split(","))
        if None in numbers:
            raise FormatError(f"SLURM_GTIDS={value!r} is not a list of whole numbers; expected "
                              "the step's ranks on this node, e.g. 0,2,3.")
        return tuple(n for n in numbers if n is not None)

    def digest(self) -> str:
        """Returns a short hash of the job-wide step variables, equal on all ranks of one step."""
        keys = ("SLURM_JOB_ID", "SLURM_STEP_ID", "SLURM_STEP_NODELIST",
                "SLURM_STEP_TASKS_PER_NODE", "SLURM_STEP_NUM_TASKS", "SLURM_DISTRIBUTION")
        text = "\0".join(self.env.get(k, "") for k in keys)
        return format(zlib.crc32(text.encode(errors="replace")), "08x")  # UTF-8


def step_of(env: Mapping[str, str]) -> Optional[SlurmStep]:
    """Returns the SlurmStep of ``env``, or None outside a Slurm step."""
    return SlurmStep(env) if SlurmStep.present(env) else None


def slurm_describes_ranks(env: Mapping[str, str], launch: Launch) -> bool:
    """Returns True when Slurm's step variables describe this process's MPI rank.

    False outside a step, and under an mpirun/mpiexec (Open MPI, Hydra, MVAPICH) started
    inside an allocation: there every rank inherits SLURM_PROCID and SLURM_STEP_NUM_TASKS of
    the launcher daemon that srun started on its node.
    """
    return SlurmStep.present(env) and not launch.mpirun


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
    tasks = whole_number(env.get("SLURM_NTASKS"))
    node = env.get("SLURMD_NODENAME")
    if tasks not in (None, 1) or not node:
        raise ResolutionError(
            f"this is the batch step of Slurm job {env['SLURM_JOB_ID']} (SLURM_PROCID is set "
            f"but no SLURM_STEP_* variable): the job script itself, started once, not the "
            f"job's SLURM_NTASKS={env.get('SLURM_NTASKS', '?')} tasks. Start training with "
            f"srun inside the script: {srun_advice(None, command='python train.py')}.")
    view = dict(env, SLURM_STEP_NUM_TASKS="1", SLURM_STEP_NODELIST=node,
                SLURM_STEP_TASKS_PER_NODE="1")
    return view, (f"the batch step of Slurm job {env['SLURM_JOB_ID']} (python without srun): "
                  f"resolved as one task on {node}; start more with srun.")


@dataclass(frozen=True)
class SlurmView:
    """What Slurm's step variables say of the job, read once."""

    rank: int
    hosts: List[str]
    counts: List[int]
    tf_assumed: Runs       # where TensorFlow's resolver puts the ranks
    runs: Optional[Runs]   # where Slurm put them, where its variables say
    declared: bool         # tasks_per_node was given: the layout is the caller's


def read_slurm(opts: Options, step: SlurmStep) -> SlurmView:
    """Returns what Slurm's step variables say, checked against each other.

    Raises:
      ResolutionError, FormatError: a variable missing, malformed or contradicting another.
    """
    rank = step.procid()
    nodes = slurm_configuration(opts, step)
    hosts, counts = list(nodes), list(nodes.values())
    total = sum(counts)
    if opts.jobs is None and opts.tasks_per_node is None:
        num_tasks = step.num_tasks()
        if num_tasks != total:
            raise FormatError(
                f"SLURM_STEP_NUM_TASKS={num_tasks} but SLURM_STEP_TASKS_PER_NODE="
                f"{step.env.get('SLURM_STEP_TASKS_PER_NODE')!r} adds up to {total}; "
                "they must agree.")
    if rank >= total:
        raise ResolutionError(
            f"SLURM_PROCID={rank} is outside the step's {total} tasks (0..{total - 1}).")
    tf_assumed = tf_runs(nodes)
    declared = opts.tasks_per_node is not None
    # a declared layout is the caller's, as in TensorFlow
    runs = tf_assumed if declared else slurm_runs(hosts, counts, step.distribution())
    return SlurmView(rank, hosts, counts, tf_assumed, runs, declared)


def _check_declared_hosts(declared: Mapping[str, int], step: SlurmStep) -> None:
    """Checks the hosts of a tasks_per_node dict against SLURM_STEP_NODELIST."""
    if "SLURM_STEP_NODELIST" in step.env:
        known = HostIndex(step.hostlist())
        unknown = [h for h in declared if known.find(h) is None]
        if unknown:
            raise ResolutionError(
                f"tasks_per_node names {', '.join(unknown)}, which are not in "
                f"SLURM_STEP_NODELIST={step.env['SLURM_STEP_NODELIST']!r}; name the "
                "step's nodes, or leave tasks_per_node unset to read them from Slurm.")


def slurm_configuration(opts: Options, step: SlurmStep) -> Dict[str, int]:
    """Returns {host: its tasks}, in the step's order, as TensorFlow would read them, checked."""
    if isinstance(opts.tasks_per_node, dict):
        _check_declared_hosts(opts.tasks_per_node, step)
        return dict(opts.tasks_per_node)
    hosts = step.hostlist()
    seen = set()
    for h in hosts:
        if h in seen:
            raise FormatError(
                f"SLURM_STEP_NODELIST={step.env['SLURM_STEP_NODELIST']!r} lists {h} twice; a "
                "step's node list names each node once.")
        seen.add(h)
    if isinstance(opts.tasks_per_node, int):
        return dict.fromkeys(hosts, opts.tasks_per_node)
    counts = step.tasks_per_node()
    try:
        return dict(zip(hosts, counts, strict=True))
    except ValueError:
        raise FormatError(
            f"SLURM_STEP_NODELIST={step.env['SLURM_STEP_NODELIST']!r} has {len(hosts)} nodes "
            f"but SLURM_STEP_TASKS_PER_NODE={step.env['SLURM_STEP_TASKS_PER_NODE']!r} has "
            f"{len(counts)} entries; they must describe the same nodes.") from None


def slurm_truth(view: SlurmView, step: SlurmStep, launcher: Optional[str]) -> Runs:
    """Returns where ranks run, from Slurm's variables alone, checked against this rank's own
    SLURMD_NODENAME and SLURM_GTIDS; raises MismatchError where they cannot say."""
    if view.runs is None:
        raise MismatchError(
            f"SLURM_DISTRIBUTION={step.env.get('SLURM_DISTRIBUTION')!r}: Slurm's step "
            "variables do not say on which node each rank runs, and TensorFlow's "
            "block layout would give ranks addresses on hosts where they do not run. "
            + placement_fix(launcher))
    if not view.declared:
        check_own_placement(view.runs, view.rank, step.nodename(), step.gtids(),
                            placement_fix(launcher))
    return view.runs


def why_not_tf(runs: Runs, tf_assumed: Runs, step: SlurmStep) -> Optional[str]:
    """Returns the one-line note that says why the layout (``runs``: where ranks run) differs
    from TensorFlow's (``tf_assumed``), or None where it does not.

    Raises:
      ValueError: the two of different numbers of ranks, alike as far as the shorter goes.
    """
    if runs == tf_assumed:
        return None
    placement, tf = expand_runs(runs), expand_runs(tf_assumed)
    first = next(i for i, (a, b) in enumerate(zip(placement, tf, strict=True)) if a != b)
    nodes = step.env.get("SLURM_STEP_NODELIST", "?")
    nodes = nodes if len(nodes) <= 80 else nodes[:77] + "..."
    return (f"the ClusterSpec differs from TensorFlow's SlurmClusterResolver: it would put rank "
            f"{first} on {tf[first]}, but rank {first} runs on {placement[first]} "
            f"(SLURM_DISTRIBUTION={step.env.get('SLURM_DISTRIBUTION', 'block')}, node order "
            f"{nodes}); using where ranks run.")
