"""srun's own options on a step's command line (pure): how many nodes the step asks for
(``-N``), which nodes it names or leaves out, and the same line with more nodes left out
(``--exclude``), for ``mpi-resolver supervise``'s spare nodes: one ``--exclude=`` added
after srun's own options, of their nodes and the new ones (measured with Slurm 22.05: srun
takes the last ``--exclude`` given).

srun's options are those before the program (``srun -N2 --mpi=pmix python train.py -x 1``:
the program's ``-x`` is not srun's). Which options take a value is srun 22.05's manual's
list; abbreviated long options (``--nod=2``, which srun accepts) are not read.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import List, Mapping, Optional, Sequence, Tuple

from mpi_resolver.core.values import whole_number

__all__ = ["SrunLine", "read_srun", "job_nodes", "job_nodelist", "tasks_per_node",
           "JOB_NODES"]

#: The allocation's node count, as sbatch and salloc set it (srun reads it as its -N).
JOB_NODES = "SLURM_JOB_NUM_NODES"

#: Short options that take a value (``-N 2`` or ``-N2``); I, K and k take one only attached.
_VALUE_SHORT = set("ABCDFGJLMNSTWbcdeimnopqrtwx")
_OPTIONAL_SHORT = set("IKk")
_VALUE_LONG = set("""accel-bind account acctg-freq bb bbf bcast-exclude begin chdir
cluster-constraint clusters comment constraint container core-spec cores-per-socket cpu-bind
cpu-freq cpus-per-gpu cpus-per-task deadline delay-boot dependency distribution epilog error
exclude export extra-node-info gid gpu-bind gpu-freq gpus-per-node gpus-per-socket
gpus-per-task gpus gres-flags gres het-group hint input job-name jobid licenses mail-type
mail-user mcs-label mem-bind mem-per-cpu mem-per-gpu mem mincpus mpi msg-timeout network
nodefile nodelist nodes ntasks-per-core ntasks-per-gpu ntasks-per-node ntasks-per-socket ntasks
open-mode output partition power prefer priority profile prolog qos relative reservation signal
slurmd-debug sockets-per-node switches task-epilog task-prolog thread-spec threads-per-core
threads time-min time tmp uid wait wckey""".split())
_LONG = {"N": "nodes", "x": "exclude", "w": "nodelist", "F": "nodefile", "r": "relative"}
Option = Tuple[str, Optional[str]]  # the long name (a short one's without), its value


def _short(argv: Sequence[str], i: int) -> Tuple[List[Option], int]:
    """Returns the options of the short cluster at ``argv[i]`` ('-lN2', '-N', '2'), and the
    index after it."""
    token = argv[i]
    out: List[Option] = []
    for at in range(1, len(token)):
        char, rest = token[at], token[at + 1:]
        if char in _VALUE_SHORT and rest:
            return out + [(_LONG.get(char, char), rest)], i + 1
        if char in _VALUE_SHORT:
            value = argv[i + 1] if i + 1 < len(argv) else None
            return out + [(_LONG.get(char, char), value)], i + 2
        if char in _OPTIONAL_SHORT:
            return out + [(char, rest or None)], i + 1
        out.append((char, None))
    return out, i + 1


def _long(argv: Sequence[str], i: int) -> Tuple[Option, int]:
    """Returns the long option at ``argv[i]`` ('--nodes=2', or '--nodes' '2'), and the index
    after it."""
    name, equals, value = argv[i][2:].partition("=")
    if equals:
        return (name, value), i + 1
    if name not in _VALUE_LONG:
        return (name, None), i + 1
    return (name, argv[i + 1] if i + 1 < len(argv) else None), i + 2


def _options(argv: Sequence[str]) -> Tuple[List[Option], int]:
    """Returns srun's own options in ``argv`` (argv[0] is srun), and the index after them:
    the program's."""
    out: List[Option] = []
    i = 1
    while i < len(argv) and argv[i].startswith("-") and argv[i] not in ("-", "--"):
        if argv[i].startswith("--"):
            option, i = _long(argv, i)
            out.append(option)
        else:
            options, i = _short(argv, i)
            out += options
    return out, min(i, len(argv))


@dataclass(frozen=True)
class SrunLine:
    """An srun command line: srun's own options (each its long name and value) and the index
    of the program after them; the most nodes its step asks for (None where it does not say:
    then every node of the job), the nodes it leaves out itself (``--exclude``), and whether it
    names its nodes (``--nodelist``, ``--nodefile``, ``--relative``: nothing may be left out
    then)."""

    argv: Tuple[str, ...]
    options: Tuple[Option, ...]
    program_at: int
    nodes: Optional[int]
    excluded: Tuple[str, ...]
    names_nodes: bool

    @property
    def names_tasks(self) -> bool:
        """Returns whether the line gives the step's task count (-n, --ntasks)."""
        return any(name in ("n", "ntasks") for name, _ in self.options)

    def spare(self, job_nodes: Optional[int]) -> int:
        """Returns how many of the job's ``job_nodes`` nodes this step could do without (0
        where either count is unknown, or the step names its nodes or excludes a file)."""
        if job_nodes is None or self.nodes is None or self.names_nodes:
            return 0
        if any("/" in node for node in self.excluded):
            return 0  # --exclude=FILE: its nodes are not known here
        return max(job_nodes - self.nodes - len(self.excluded), 0)

    def with_nodes(self, count: int, tasks_per_node: Optional[int] = None) -> List[str]:
        """Returns the command line with ``--nodes=COUNT`` after srun's own options (the step
        on the job's nodes less its spare ones), and ``--ntasks`` for ``tasks_per_node`` on
        each where the job gives that and the line names no task count (srun would take the
        job's own, for every node of the job)."""
        at = self.program_at
        more = [f"--nodes={count}"]
        if tasks_per_node is not None and not self.names_tasks:
            more.append(f"--ntasks={count * tasks_per_node}")
        return [*self.argv[:at], *more, *self.argv[at:]]

    def leaving_out(self, nodes: Sequence[str]) -> List[str]:
        """Returns the command line with ``nodes`` left out too: one ``--exclude=`` of its own
        excluded nodes and ``nodes`` after srun's options (srun takes the last --exclude)."""
        if not nodes:
            return list(self.argv)
        merged = ",".join(dict.fromkeys([*self.excluded, *nodes]))
        at = self.program_at
        return [*self.argv[:at], f"--exclude={merged}", *self.argv[at:]]


def _max_nodes(value: Optional[str]) -> Optional[int]:
    """Returns the most nodes ``-N`` asks for ('2', '2-3': 3), None where it is not a count."""
    high = str(value).rpartition("-")[2]
    return int(high) if high.isdigit() else None


def read_srun(argv: Sequence[str]) -> Optional[SrunLine]:
    """Returns ``argv`` read as an srun command line, or None where argv[0] is not srun."""
    if not argv or os.path.basename(argv[0]) != "srun":
        return None
    options, program_at = _options(argv)
    nodes = [_max_nodes(value) for name, value in options if name == "nodes"]
    excluded = [node for name, value in options if name == "exclude" and value
                for node in value.split(",") if node]
    names = any(name in ("nodelist", "nodefile", "relative") for name, _ in options)
    return SrunLine(tuple(argv), tuple(options), program_at, nodes[-1] if nodes else None,
                    tuple(excluded), names)


def job_nodes(env: Mapping[str, str]) -> Optional[int]:
    """Returns the job's node count from ``env`` (JOB_NODES), None where unset or not a
    whole number."""
    return whole_number(env.get(JOB_NODES))


def job_nodelist(env: Mapping[str, str]) -> Optional[str]:
    """Returns the job's nodes as Slurm's hostlist ('node[1-3]', SLURM_JOB_NODELIST), None
    outside a Slurm job."""
    return env.get("SLURM_JOB_NODELIST", "").strip() or None


def tasks_per_node(env: Mapping[str, str]) -> Optional[int]:
    """Returns the job's tasks a node where it asked for a number (SLURM_NTASKS_PER_NODE, as
    sbatch --ntasks-per-node sets it), None where it did not."""
    return whole_number(env.get("SLURM_NTASKS_PER_NODE"))
