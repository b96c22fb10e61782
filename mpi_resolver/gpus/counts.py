"""How many GPUs each task takes: a node's part of a list, the fewest and most of a job, and
the one number every worker of a job takes where counts are evened out (pure)."""

from __future__ import annotations

from typing import Dict, List, Mapping, Optional, Sequence, Tuple

from mpi_resolver.core.errors import ResolutionError
from mpi_resolver.gpus.lists import Gpus
from mpi_resolver.gpus.mig import capped

#: Larger than any count of GPUs: "no limit" in a minimum.
NO_LIMIT = 1 << 40


def share_count(m: int, ranks: int) -> int:
    """Returns the GPUs each of ``ranks`` ranks that see a list of ``m`` takes, left to
    themselves: an equal part where there are enough, else all of them (shared)."""
    return m // ranks if m >= ranks else m


def job_counts(groups: Mapping[str, Mapping[Gpus, Sequence[int]]]) -> Tuple[int, int]:
    """Returns (fewest, most) GPUs any rank takes left to itself (share_count, one MIG device
    at most), over the nodes of ``groups`` ({host: group_lists}); (0, 0) for no ranks."""
    counts = [capped(share_count(len(gpus), len(ranks)), gpus) for by_list in groups.values()
              for gpus, ranks in by_list.items()]
    return min(counts, default=0), max(counts, default=0)


def even_count(groups: Mapping[str, Mapping[Gpus, Sequence[int]]],
                counts: Optional[Tuple[int, int]]) -> int:
    """Returns the GPUs every rank takes where counts are evened out: the fewest.

    Raises:
      ResolutionError: some ranks would have GPUs and others none.
    """
    fewest, most = counts if counts is not None else job_counts(groups)
    if fewest == 0 < most:
        hosts = {host: job_counts({host: by_list}) for host, by_list in groups.items()}
        raise ResolutionError(
            f"workers would get different numbers of GPUs: {_counts_text(hosts)}. "
            "MultiWorkerMirroredStrategy needs the same number on every worker (TensorFlow "
            "leaves the rest undefined). Run on GPU nodes only, pass gpus_per_task=0 "
            "(--gpus-per-task 0) to train on CPU, or uneven_gpus=True (--uneven-gpus) for "
            "jobs that need no equal counts (parameter servers).")
    return fewest


def _counts_text(hosts: Mapping[str, Tuple[int, int]]) -> str:
    """Returns '0 GPUs on cpu1, cpu2; 1 GPU per task on node1' (3 hosts at most each)."""
    by_count: Dict[str, List[str]] = {}
    for host, (fewest, most) in hosts.items():
        count = f"{fewest}" if fewest == most else f"{fewest} to {most}"
        by_count.setdefault(count, []).append(host)
    parts = []
    for count, names in sorted(by_count.items()):
        shown = ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
        parts.append(f"{count} GPU(s) per task on {shown}")
    return "; ".join(parts)


def group_lists(per_rank: Sequence[Gpus]) -> Dict[Gpus, List[int]]:
    """Returns {list: indices of the ranks that see it} for one node's ranks."""
    by_list: Dict[Gpus, List[int]] = {}
    for index, gpus in enumerate(per_rank):
        by_list.setdefault(gpus, []).append(index)
    return by_list


def divided_fit(by_list: Mapping[Gpus, Sequence[int]]) -> int:
    """Returns the GPUs per task a node can give where its ranks divide one list
    (len(list) // ranks, one MIG device at most), or a number larger than any such count where
    they do not."""
    if len(by_list) == 1:
        (gpus, ranks), = by_list.items()
        if len(gpus) >= len(ranks) > 0:
            return capped(len(gpus) // len(ranks), gpus)
    return NO_LIMIT
