"""The exit statuses of a long job, each defined once (pure): what the tasks exit with after
Slurm's signal, a failed save, a hang or a refused configuration, what ``mpi-resolver
supervise`` exits with, and which of them mean "do not requeue: it would fail the same way".

A shell's rule for a process killed by signal N is 128 + N; sysexits.h's codes are 64-78.
"""

from __future__ import annotations

import signal

__all__ = ["REQUEUE", "SAVE_FAILED", "TERMINATED", "HUNG", "CONFIG", "USAGE", "STOPPED",
           "fails_again", "killed_by", "signal_status"]

#: The checkpoint is saved and the job is to run again (sysexits' EX_TEMPFAIL, "try again
#: later"): supervise requeues it; also supervise's own status after a requeue.
REQUEUE = 75
#: The save on Slurm's signal failed (sysexits' EX_IOERR): the job resumes from the newest
#: whole checkpoint where one advanced in this run, else it ends (requeueing would redo the run
#: and fail the same save).
SAVE_FAILED = 74
#: After Slurm's SIGTERM the job ends (scancel, the time limit without requeue_on_time_limit,
#: Slurm's own requeue or preemption): 128 + SIGTERM, by the signal or by the tasks' own exit
#: after their save.
TERMINATED = 128 + int(signal.SIGTERM)
#: The step watchdog ended a hung step (GNU timeout's "timed out"): restarted.
HUNG = 124
#: A configuration the package refuses (a bad MPI_RESOLVER_* value, another job's checkpoint
#: directory, a checkpoint directory no node can write): sysexits' EX_CONFIG. Never restarted.
CONFIG = 78
#: A usage error (argparse's and the shell's status; a script that is not there). Never
#: restarted.
USAGE = 2
#: supervise stopped the job: it would fail the same way again (no progress in the last two
#: runs). The package's own, after sysexits' range: do not requeue.
STOPPED = 79


def fails_again(status: int) -> bool:
    """Returns whether a step that ended with ``status`` would fail the same way when run
    again, so that neither supervise nor a batch script may restart or requeue it: a usage
    error (2), sysexits' 64-78 but for 75 (run again) and 74 (a save that failed, which
    supervise judges by the progress made), and supervise's own STOPPED (79)."""
    return status == USAGE or (64 <= status <= STOPPED and status not in (REQUEUE,
                                                                          SAVE_FAILED))


def killed_by(status: int) -> int:
    """Returns the signal a status of 128 + N stands for (N), 0 where it is not one."""
    return status - 128 if 128 < status < 128 + 65 else 0


def signal_status(number: int) -> int:
    """Returns the status a shell gives a process killed by signal ``number``."""
    return 128 + int(number)
