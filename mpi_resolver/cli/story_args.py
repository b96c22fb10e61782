"""The command line's report and status: what a job went through, and where it is now."""

from __future__ import annotations

import argparse
from typing import Any

from mpi_resolver.core.values import whole_number

__all__ = ["add_story_commands"]


def _steps(text: str) -> int:
    """Returns --steps as a whole number > 0; argparse reports the error otherwise."""
    value = whole_number(text)
    if value is None or value < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number of steps > 0, got {text!r}")
    return value


def add_story_commands(sub: Any) -> None:
    """Adds report (DIR, --json, --plot FILE, --job ID) and status (DIR, --steps N)."""
    report = sub.add_parser(
        "report", help="what a job went through: its runs, restarts, requeues, steps lost, "
                       "ETTR (from its ledger)",
        description="Reads the job's ledger (mpi_resolver.ledger.jsonl in its checkpoint "
                    "directory: MPI_RESOLVER_CHECKPOINT_DIR) and prints a table of its runs "
                    "(start, length, steps from -> to, how each ended and on which node, what "
                    "followed), then the totals: runs, restarts, requeues, saves, steps done "
                    "and lost (trained twice), the time spent starting, training, saving, "
                    "redoing and between runs, and the ETTR (docs/long-jobs.md). It changes "
                    "nothing in DIR.")
    report.add_argument("directory", metavar="DIR", help="the job's checkpoint directory")
    report.add_argument("--json", action="store_true",
                        help="the same as one JSON object (keys in docs/long-jobs.md)")
    report.add_argument("--plot", metavar="FILE",
                        help="draw the job's timeline into FILE (.png or .svg): the step "
                             "reached against wall time, each run a band, saves as ticks, "
                             "restarts and requeues marked with their cause (needs "
                             "matplotlib: the 'plot' extra)")
    report.add_argument("--job", metavar="ID",
                        help="the job to report where the directory served several (default: "
                             "the ledger's last)")
    status = sub.add_parser(
        "status", help="where a running job is: newest checkpoint, last event, step rate, "
                       "expected end",
        description="Reads the job's ledger, manifest and progress file in DIR (its "
                    "checkpoint directory) and prints the newest checkpoint (step, age), the "
                    "last event, the current run's step and rate, and the expected end given "
                    "the plan. It changes nothing in DIR.")
    status.add_argument("directory", metavar="DIR", help="the job's checkpoint directory")
    status.add_argument("--steps", type=_steps, metavar="N",
                        help="the steps the training plans (for the expected end; default: "
                             "what the training told the ledger)")
