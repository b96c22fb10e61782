"""Waits for a long job's save to be on disk, as worker 0's ledger records it (test harness):
a save written in the background is recorded once its write has ended, so that a test that
kills a worker after it loses at most one interval, never the write in flight too."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Union

from mpi_resolver.long_jobs import ledger

__all__ = ["wait_saved"]


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
