"""What Slurm says of the job's nodes, for supervise's spare nodes and exclusions: each node's
state (``scontrol show node -o``: a drained or down node is not asked for again), the
partition's usable nodes, and the requeued job's ExcNodeList (``scontrol update``). Pure
readers of scontrol's text, and the calls through requeue.run_scontrol (the edge), which
never raise: an answer scontrol cannot give is None or a failed outcome.
"""

from __future__ import annotations

import subprocess
from typing import Dict, List, Optional, Sequence, Tuple

from mpi_resolver.long_jobs.nodes import unusable
from mpi_resolver.long_jobs.requeue import SCONTROL_TIMEOUT, Runner, job_fields, run_scontrol

__all__ = ["SHOW_TIMEOUT", "read_nodes", "node_states", "usable_in", "partition_usable",
           "exclude", "merged_exclusions", "current_exclusions", "job_partition", "drained"]

#: Seconds a question to scontrol may take (supervise does without the answer after it).
SHOW_TIMEOUT = 10.0


def read_nodes(text: str) -> Dict[str, Dict[str, str]]:
    """Returns ``scontrol show node -o``'s nodes (one a line): name -> its fields."""
    nodes: Dict[str, Dict[str, str]] = {}
    for line in text.splitlines():
        fields = job_fields(line)
        if fields.get("NodeName"):
            nodes[fields["NodeName"]] = fields
    return nodes


def usable_in(nodes: Dict[str, Dict[str, str]], partition: str) -> int:
    """Returns how many of ``nodes`` are in ``partition`` and not drained, down or failing."""
    members = {name: f.get("State", "") for name, f in nodes.items()
               if partition in f.get("Partitions", "").split(",")}
    return len(members) - len(unusable(members))


def merged_exclusions(current: str, nodes: Sequence[str]) -> str:
    """Returns the ExcNodeList that keeps the job's ``current`` one ('(null)' or '' for
    none) and adds ``nodes``."""
    kept = [] if current in ("", "(null)") else current.split(",")
    return ",".join(dict.fromkeys([*kept, *nodes]))


def _show(args: Sequence[str], run: Runner, timeout: float) -> Optional[str]:
    """Returns scontrol's output for ``args``, None where it fails or cannot run."""
    try:
        done = run(list(args), timeout)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout if done.returncode == 0 else None


def node_states(nodelist: str, run: Runner = run_scontrol,
                timeout: float = SHOW_TIMEOUT) -> Optional[Dict[str, str]]:
    """Returns the State of each node of ``nodelist`` (a hostlist: 'node[1-3]'), None where
    scontrol cannot say."""
    text = _show(["show", "node", "-o", nodelist], run, timeout)
    return None if text is None else {n: f.get("State", "") for n, f in read_nodes(text).items()}


def partition_usable(partition: str, run: Runner = run_scontrol,
                     timeout: float = SHOW_TIMEOUT) -> Optional[int]:
    """Returns how many nodes of ``partition`` are usable, None where scontrol cannot say."""
    text = _show(["show", "node", "-o"], run, timeout)
    return None if text is None else usable_in(read_nodes(text), partition)


def current_exclusions(target: str, run: Runner = run_scontrol,
                       timeout: float = SHOW_TIMEOUT) -> str:
    """Returns job ``target``'s ExcNodeList ('' where it has none or scontrol cannot say)."""
    current = job_fields(_show(["show", "job", "-o", target], run, timeout) or "")
    return "" if current.get("ExcNodeList", "(null)") == "(null)" else current["ExcNodeList"]


def exclude(target: str, exclusions: str, run: Runner = run_scontrol,
            timeout: float = SCONTROL_TIMEOUT) -> Tuple[bool, str]:
    """Sets job ``target``'s ExcNodeList to ``exclusions`` (a pending job: the requeued one;
    Slurm refuses it for a running job); returns (done, what scontrol did, in one phrase)."""
    args = ["update", f"JobId={target}", f"ExcNodeList={exclusions}"]
    try:
        done = run(args, timeout)
    except (OSError, subprocess.SubprocessError) as e:
        return False, f"scontrol {' '.join(args)} could not run ({e})"
    if done.returncode != 0:
        said = " ".join((done.stdout + done.stderr).split()) or "no output"
        return False, f"scontrol {' '.join(args)} failed (exit {done.returncode}: {said})"
    return True, f"scontrol {' '.join(args)}"


def job_partition(target: str, run: Runner = run_scontrol,
                  timeout: float = SHOW_TIMEOUT) -> Optional[str]:
    """Returns job ``target``'s partition, None where scontrol cannot say."""
    text = _show(["show", "job", "-o", target], run, timeout)
    return job_fields(text or "").get("Partition") or None


def drained(states: Optional[Dict[str, str]]) -> List[str]:
    """Returns the drained or down nodes among ``states`` (None: none known)."""
    return unusable(states or {})
