"""Which nodes a job leaves out (pure): a node that failed FAILURES_TO_LEAVE_OUT times in the
job's runs (requeues included: the ledger remembers them) or that the site drained is left
out of the next run in the allocation where the job has spare nodes, and excluded from the
requeued job where the partition can do without it; and the spare nodes themselves
(``--spare-nodes``, the templates' SPARE_NODES), checked against the job's nodes.
"""

from __future__ import annotations

from typing import Dict, Iterable, List, Mapping, Optional, Sequence

from mpi_resolver.core.errors import FormatError
from mpi_resolver.core.values import whole_number

__all__ = ["FAILURES_TO_LEAVE_OUT", "lemons", "unwanted", "left_out", "kept_in", "unusable",
           "parse_spare_nodes", "excludable", "UNUSABLE_STATES"]

#: Failures of one node in a job after which it is left out (Meta's and the B200 study's
#: "lemon" nodes fail again: a few nodes cause most exclusions).
FAILURES_TO_LEAVE_OUT = 2
#: Slurm node state flags of a node not to ask for again (scontrol show node's State=; a
#: trailing '*' also says the node does not respond: 'IDLE*', 'DOWN*').
UNUSABLE_STATES = ("DRAIN", "DOWN", "FAIL", "NOT_RESPONDING", "REBOOT")


def lemons(blamed: Iterable[str]) -> List[str]:
    """Returns the nodes among ``blamed`` (each failure's node, oldest first) that failed
    FAILURES_TO_LEAVE_OUT times or more, the first to get there first."""
    counts: Dict[str, int] = {}
    out: List[str] = []
    for node in blamed:
        counts[node] = counts.get(node, 0) + 1
        if counts[node] == FAILURES_TO_LEAVE_OUT:
            out.append(node)
    return out


def unwanted(blamed: Iterable[str], drained: Sequence[str],
             allocation: Optional[Sequence[str]] = None) -> List[str]:
    """Returns the drained nodes, then the lemons, those of ``allocation`` alone where it
    is known (a requeued job's earlier allocation may have had others)."""
    nodes = dict.fromkeys([*drained, *lemons(blamed)])
    return [node for node in nodes if allocation is None or node in allocation]


def left_out(blamed: Iterable[str], drained: Sequence[str], spare: int,
             allocation: Optional[Sequence[str]] = None) -> List[str]:
    """Returns the nodes the next run in the allocation (its nodes: ``allocation``, None:
    not known) leaves out: the drained ones, then the lemons, at most ``spare`` (the
    allocation's nodes the step can do without)."""
    return unwanted(blamed, drained, allocation)[:max(spare, 0)]


def kept_in(blamed: Iterable[str], drained: Sequence[str], spare: int,
            allocation: Optional[Sequence[str]] = None) -> List[str]:
    """Returns the nodes that left_out would leave out but for the ``spare`` nodes: the next
    run keeps them."""
    return unwanted(blamed, drained, allocation)[max(spare, 0):]


def unusable(states: Mapping[str, str]) -> List[str]:
    """Returns the nodes whose scontrol State (``states``: node -> 'IDLE+DRAIN', ...) says
    the site took them out or that they do not respond, in the order given."""
    return [node for node, state in states.items() if state.endswith("*") or any(
        flag.startswith(UNUSABLE_STATES) for flag in state.upper().split("+"))]


def excludable(nodes: Sequence[str], partition_usable: Optional[int], job_nodes: int
               ) -> List[str]:
    """Returns the nodes to exclude from the requeued job: ``nodes``, as many as the
    partition's usable nodes (``partition_usable``; None: not known, then none) leave the job
    its ``job_nodes``."""
    if partition_usable is None:
        return []
    room = partition_usable - job_nodes
    return list(nodes)[:max(room, 0)]


def parse_spare_nodes(text: str, job_nodes: Optional[int]) -> int:
    """Returns ``--spare-nodes``' value (the templates' SPARE_NODES): a whole number of the
    job's ``job_nodes`` nodes the step does without, smaller than ``job_nodes``.

    Raises:
      FormatError: not a whole number, or not smaller than the job's nodes, naming both.
    """
    number = whole_number(text)
    nodes = "unknown" if job_nodes is None else str(job_nodes)
    if number is None or (number > 0 and (job_nodes is None or number >= job_nodes)):
        raise FormatError(
            f"--spare-nodes {text!r} (the templates' SPARE_NODES): expected a whole number of "
            f"nodes, 0 or more and smaller than the job's nodes (SLURM_JOB_NUM_NODES: "
            f"{nodes}), e.g. SPARE_NODES=1 with #SBATCH --nodes=3 for a step on 2 nodes.")
    return number
