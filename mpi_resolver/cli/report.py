"""mpi-resolver report and status: the job's ledger, manifest and progress file read from its
checkpoint directory (the edge: the files, the clock, print), told by the pure
long_jobs.report_text and long_jobs.status; nothing in the directory is changed."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import List, Optional, Tuple

from mpi_resolver.long_jobs import ledger
from mpi_resolver.long_jobs.journal import read_progress
from mpi_resolver.long_jobs.manifest import read_manifest
from mpi_resolver.long_jobs.report import as_json
from mpi_resolver.long_jobs.report_text import report_text
from mpi_resolver.long_jobs.status import status_lines
from mpi_resolver.long_jobs.story import NewerLedger, Story, story_of

__all__ = ["story_command", "report_main", "status_main", "NOT_FOUND"]

#: report's and status's exit status where DIR holds no ledger, or one this release refuses.
NOT_FOUND = 1


def _err(text: str) -> None:
    print(f"mpi-resolver: {text}", file=sys.stderr)


def load_story(directory: str, job: Optional[str] = None) -> Tuple[Optional[Story], List[str]]:
    """Returns (the story of ``job`` in ``directory``'s ledger, the warnings: a torn line
    passed over); (None, the error) where there is no ledger or it cannot be read."""
    path = os.path.join(directory, ledger.LEDGER)
    if not os.path.isdir(directory):
        return None, [f"{directory} is not a directory: give the job's checkpoint directory "
                      "(the one MPI_RESOLVER_CHECKPOINT_DIR named)"]
    if not os.path.isfile(path):
        return None, [f"{directory} holds no {ledger.LEDGER}: it is not the checkpoint "
                      "directory of a job run by this release of mpi_resolver (supervise or "
                      "worker 0 writes it), or its job has not started yet"]
    try:
        records, torn = ledger.read_counted(directory)
        story = story_of(records, job)
    except NewerLedger as e:
        return None, [f"{path}: {e}"]
    except OSError as e:
        return None, [f"{path} cannot be read ({e.strerror or e})"]
    warnings = [f"{path}: {torn} line(s) not whole (a crash in the middle of a record?) "
                "passed over"] if torn else []
    if job is not None and not story.runs:
        return None, [f"{path} holds no run of job {job}; its jobs: "
                      + ", ".join(str(j) for j in story.other_jobs)]
    return story, warnings


def report_main(directory: str, as_json_too: bool, plot: Optional[str],
                job: Optional[str]) -> int:
    """Prints the report of the job in ``directory``; draws ``plot``; returns the status (0;
    1 no ledger; 2 a bad --plot)."""
    if plot is not None:
        from mpi_resolver.cli.plot import plot_problem

        problem = plot_problem(plot)
        if problem:
            _err(problem)
            return 2
    story, said = load_story(directory, job)
    for line in said:
        _err(line)
    if story is None:
        return NOT_FOUND
    if as_json_too:
        print(json.dumps(as_json(story, directory), indent=1, sort_keys=True))
    else:
        print("\n".join(report_text(story, directory, os.path.join(directory, ledger.LEDGER))))
    if plot is not None:
        from mpi_resolver.cli.plot import draw

        draw(story, plot)
        print(f"the job's timeline: {plot}", file=sys.stderr if as_json_too else sys.stdout)
    return 0


def status_main(directory: str, steps: Optional[int]) -> int:
    """Prints where the job in ``directory`` is now; returns the status (0; 1 no ledger)."""
    story, said = load_story(directory)
    for line in said:
        _err(line)
    if story is None:
        return NOT_FOUND
    progress = read_progress(directory)
    if progress is not None and progress.get("job") != story.job:
        progress = None  # another job's, left behind
    print("\n".join(status_lines(story, read_manifest(directory), progress, time.time(),
                                 directory, steps)))
    return 0


def story_command(args: argparse.Namespace) -> int:
    """Runs report or status with ``args``; returns the exit status."""
    if args.command == "report":
        return report_main(args.directory, args.json, args.plot, args.job)
    return status_main(args.directory, args.steps)
