"""The long jobs' options of examples/train.py and examples/train_ps.py, in one place: the
checkpoint directory, Slurm's warning signal and its grace period, and whether to requeue.

A bad --signal or --grace-period ends the script at once with argparse's usage error, before
TensorFlow starts.
"""

from __future__ import annotations

import argparse


def add_long_job_options(p: argparse.ArgumentParser, checkpoint_help: str) -> None:
    """Adds the long jobs' options: --checkpoint-dir DIR (``checkpoint_help`` says what the
    script keeps there), --signal, --grace-period, --no-requeue, --requeue-on-time-limit."""
    long = p.add_argument_group("long jobs: save on Slurm's signal, requeue, resume")
    long.add_argument("--checkpoint-dir", metavar="DIR", help=checkpoint_help)
    long.add_argument("--signal", default="USR1", metavar="NAME[@SECONDS]",
                      help="Slurm's warning signal, as #SBATCH --signal names it (default "
                           "USR1); @SECONDS gives the grace period")
    long.add_argument("--grace-period", type=float, metavar="SECONDS",
                      help="seconds between the warning signal and the end (--signal's "
                           "@SECONDS): a save that leaves too little of it is a warning")
    long.add_argument("--no-requeue", dest="requeue", action="store_false",
                      help="save on the signal and exit, without requeueing the job")
    long.add_argument("--requeue-on-time-limit", action="store_true",
                      help="also requeue after saving on the time limit's SIGTERM (never "
                           "after scancel)")


def check_long_job_options(p: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """--signal must name a signal Slurm's --signal takes; --grace-period is seconds >= 0,
    and the same as --signal's @SECONDS where both are given (the package's own rules)."""
    from mpi_resolver import ResolutionError
    from mpi_resolver.preemption.signals import grace_seconds, parse_signal

    try:
        grace_seconds(args.grace_period, parse_signal(args.signal, "--signal"),
                      "--grace-period", "--signal")
    except ResolutionError as e:
        p.error(str(e))
