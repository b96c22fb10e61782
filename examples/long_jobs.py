"""The long jobs' options of examples/train.py and examples/train_ps.py, in one place: the
checkpoint directory, Slurm's warning signal and its grace period, whether to requeue, and the
periodic saves (how often, how many kept).

A bad --signal or --grace-period ends the script at once with argparse's usage error, before
TensorFlow starts.
"""

from __future__ import annotations

import argparse


def add_long_job_options(p: argparse.ArgumentParser, checkpoint_help: str,
                         periodic: bool = True, background: bool = False) -> None:
    """Adds the long jobs' options: --checkpoint-dir DIR (``checkpoint_help`` says what the
    script keeps there), --signal, --grace-period, --no-requeue, --requeue-on-time-limit, and
    where ``periodic``, --checkpoint-every, --keep and --node-mtbf-hours (train_ps.py has its
    own periodic checkpoints), and where ``background``, --checkpoint-async and
    --no-checkpoint-async (the scripts whose saves can be written in the background)."""
    long = p.add_argument_group("long jobs: save on Slurm's signal, requeue, resume")
    long.add_argument("--checkpoint-dir", metavar="DIR",
                      help=checkpoint_help + " (default: $MPI_RESOLVER_CHECKPOINT_DIR)")
    long.add_argument("--signal", metavar="NAME[@SECONDS]",
                      help="Slurm's warning signal, as #SBATCH --signal names it (default "
                           "$MPI_RESOLVER_SIGNAL, else USR1); @SECONDS gives the grace period")
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
    long.add_argument("--keep", type=int, metavar="K",
                      help="checkpoints kept (default $MPI_RESOLVER_KEEP, else 2: a torn "
                           "newest one leaves one to resume from)")
    long.add_argument("--node-mtbf-hours", type=float, default=None, metavar="HOURS",
                      help="a node's mean time between failures, for --checkpoint-every auto "
                           "(default $MPI_RESOLVER_NODE_MTBF_HOURS, else 6000, from Meta's "
                           "Llama 3 report)")
    if background:
        long.add_argument("--checkpoint-async", action=argparse.BooleanOptionalAction,
                          default=None,
                          help="write the periodic checkpoints in the background: the step "
                               "pays only the snapshot of the state (default "
                               "$MPI_RESOLVER_CHECKPOINT_ASYNC, else on)")


def check_long_job_options(p: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """--signal must name a signal Slurm's --signal takes; --grace-period is seconds >= 0,
    and the same as --signal's @SECONDS where both are given (the package's own rules).
    What is not given comes from the batch script's MPI_RESOLVER_* variables (the templates
    set them) as the package reads them, and is filled into ``args``."""
    from mpi_resolver import ResolutionError, long_job_settings

    periodic = hasattr(args, "keep")
    names = {"signal": "--signal", "grace_period": "--grace-period",
             "checkpoint_every": "--checkpoint-every", "keep": "--keep",
             "checkpoint_async": "--checkpoint-async"}
    background = {"checkpoint_async": args.checkpoint_async} \
        if hasattr(args, "checkpoint_async") else {}
    try:
        given = long_job_settings(
            signal=args.signal, grace_period=args.grace_period,
            checkpoint_dir=args.checkpoint_dir, names=names,
            **({"checkpoint_every": args.checkpoint_every, "keep": args.keep,
                "node_mtbf_hours": args.node_mtbf_hours} if periodic else {}), **background)
    except ResolutionError as e:
        p.error(str(e))
    args.signal, args.checkpoint_dir = given.signal, given.checkpoint_dir
    if periodic:
        args.checkpoint_every, args.keep = given.checkpoint_every, given.keep
        args.node_mtbf_hours = given.node_mtbf_hours
    if background:
        args.checkpoint_async = given.checkpoint_async
    if periodic and args.checkpoint_every and not args.checkpoint_dir:
        p.error("--checkpoint-every saves into --checkpoint-dir, which is not given, and "
                "MPI_RESOLVER_CHECKPOINT_DIR is not set: give the directory")
