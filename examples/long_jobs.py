"""The long jobs' options of examples/train.py and examples/train_ps.py, in one place: the
checkpoint directory, Slurm's warning signal and its grace period, whether to requeue, and the
periodic saves (how often, how many kept).

A bad --signal or --grace-period ends the script at once with argparse's usage error, before
TensorFlow starts.
"""

from __future__ import annotations

import argparse


def add_long_job_options(p: argparse.ArgumentParser, checkpoint_help: str,
                         periodic: bool = True) -> None:
    """Adds the long jobs' options: --checkpoint-dir DIR (``checkpoint_help`` says what the
    script keeps there), --signal, --grace-period, --no-requeue, --requeue-on-time-limit, and
    where ``periodic``, --checkpoint-every, --keep and --node-mtbf-hours (train_ps.py has its
    own periodic checkpoints)."""
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
    if not periodic:
        return
    long.add_argument("--checkpoint-every", metavar="N|DURATION|auto",
                      help="also save every N steps, every DURATION of worker 0's clock "
                           "('90s', '10m', '2h'), or 'auto' (Young's interval from the "
                           "measured save time and the job's failure rate): for the endings "
                           "nobody announces (a worker killed, a node lost)")
    long.add_argument("--keep", type=int, default=2, metavar="K",
                      help="checkpoints kept (default 2: a torn newest one leaves one to "
                           "resume from)")
    long.add_argument("--node-mtbf-hours", type=float, default=None, metavar="HOURS",
                      help="a node's mean time between failures, for --checkpoint-every auto "
                           "(default 6000, from Meta's Llama 3 report)")


def check_long_job_options(p: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """--signal must name a signal Slurm's --signal takes; --grace-period is seconds >= 0,
    and the same as --signal's @SECONDS where both are given (the package's own rules)."""
    from mpi_resolver import ResolutionError
    from mpi_resolver.preemption.interval import (DEFAULT_NODE_MTBF_HOURS, job_mtbf, parse_every,
                                                  parse_keep)
    from mpi_resolver.preemption.signals import grace_seconds, parse_signal

    periodic = hasattr(args, "keep")
    if periodic and args.node_mtbf_hours is None:
        args.node_mtbf_hours = DEFAULT_NODE_MTBF_HOURS
    try:
        grace_seconds(args.grace_period, parse_signal(args.signal, "--signal"),
                      "--grace-period", "--signal")
        if periodic:
            parse_every(args.checkpoint_every, "--checkpoint-every")
            parse_keep(args.keep, "--keep")
            job_mtbf(1, args.node_mtbf_hours)
    except ResolutionError as e:
        p.error(str(e))
    if periodic and args.checkpoint_every and not args.checkpoint_dir:
        p.error("--checkpoint-every saves into --checkpoint-dir: give both")
