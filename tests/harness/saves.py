"""Waits for a long job's save to be on disk, as worker 0's ledger records it (test harness):
a save written in the background is recorded once its write has ended, so that a test that
kills a worker after it loses at most one interval, never the write in flight too."""

from __future__ import annotations

import time
from pathlib import Path
from typing import List, Tuple, Union

from mpi_resolver.long_jobs import ledger

__all__ = ["wait_saved", "assert_first_tier_run"]


def wait_saved(directory: Union[str, Path], step: int, timeout: float) -> None:
    """Returns once the ledger in ``directory`` records a whole save at ``step``.

    Raises:
      TimeoutError: not within ``timeout`` seconds (the step and the saves seen, named).
    """
    deadline = time.monotonic() + timeout
    while True:
        saves = [r.get("step") for r in ledger.read(str(directory)) if r.get("event") == "save"]
        if step in saves:
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"no save at step {step} in {directory}'s ledger within "
                               f"{timeout:g} s (saves seen: {saves})")
        time.sleep(0.05)


def assert_first_tier_run(tmp: Path, expected: List[Tuple[int, str]], mode: str, sure: int,
                          context: str, replicated: bool = False) -> None:
    """Asserts what a node-local tier's first run left before its kill (tests/jax and
    tests/cluster's test_*local_tier.py): the ledger's saves in ``tmp``/ckpt are ``expected``
    (in the background, ``mode`` "async", the first ``sure`` of them and maybe others: a write
    is recorded once it ended and the training was told, maybe not before the kill); each
    node's directory ``tmp``/local-<node> holds the last step's two parts, its own and its
    partner's copy (``replicated``: its own alone, process 0's on node1, 1's on node2)."""
    saves = [(r["step"], r["checkpoint"]) for r in ledger.read(str(tmp / "ckpt"))
             if r["event"] == "save"]
    if mode == "async":
        assert set(saves) <= set(expected) and saves[:sure] == expected[:sure], context
    else:
        assert saves == expected, context
    last = expected[-1][0]
    for rank, node in enumerate(("node1", "node2")):
        assert sorted(p.name for p in (tmp / f"local-{node}" / str(last)).iterdir()) == \
            ([f"part-{rank}"] if replicated else ["part-0", "part-1"]), context
