"""check --deep on the command line: the framework's rehearsal (TensorFlow's or JAX's), and how
a rank ends after one that failed.

A failed rehearsal may leave a thread stuck (in an import, in the framework's start) that
cannot be stopped, and a rank that never came to a gather. Open MPI's MPI_Finalize, which
mpi4py calls at the interpreter's exit, waits for every rank: a rank that leaves without it
makes Slurm's PMIx plugin kill the step (status 137), or leaves the others waiting in it for
ever where the launcher does not notice. So after a failed --deep every rank ends alike:
MPI_Finalize (bounded by faulthandler's watchdog), then os._exit, which waits for no stuck
thread and no framework's exit hook (jax.distributed's shutdown barrier); a rank that lost
another at a gather does not call MPI_Finalize, which would wait for it, and exits at once.
"""

from __future__ import annotations

import argparse
import faulthandler
import os
import sys
from typing import Optional

from mpi_resolver.options import Options
from mpi_resolver.rehearsal.connect_check import ConnectReport
from mpi_resolver.rehearsal.deep_check import DeepReport
from mpi_resolver.resolve.resolution import Resolution

#: --framework's choices (the first is the default) and the names the reports use.
FRAMEWORKS = ("tensorflow", "jax")
_NAMES = {"tensorflow": "TensorFlow's workers", "jax": "JAX's processes"}
FINALIZE_WAIT = 30.0  # seconds MPI_Finalize may take before the watchdog ends the process


def run_deep_check(args: argparse.Namespace, res: Resolution, opts: Options,
                   connect: ConnectReport) -> Optional[DeepReport]:
    """Returns --deep's report (None without --deep; not run where --connect failed): the
    rehearsal of ``args.framework`` (JAX's imports neither TensorFlow nor needs it).

    Raises:
      ResolutionError: jobs the strategy does not take (TensorFlow); ExchangeTimeout: a rank
        did not arrive to set up the gathers.
    """
    if not args.deep:
        return None
    if connect.failures:
        return DeepReport([], res.num_tasks, _collective(args), args.timeout, 0.0,
                          connect.gathered, note="the connections above failed, and "
                          f"{_NAMES[args.framework]} would wait for them for ever.")
    if args.framework == "jax":
        from mpi_resolver.rehearsal.jax_deep import run_jax_deep

        return run_jax_deep(res, opts)
    from mpi_resolver.rehearsal.deep_tf import run_deep

    return run_deep(res, opts, args.collective, args.signal)


def _collective(args: argparse.Namespace) -> str:
    """Returns the report's collective: --collective for TensorFlow, 'jax' for JAX."""
    return "jax" if args.framework == "jax" else args.collective


def end_lost(status: int) -> int:
    """Returns ``status`` without MPI; with it, ends the process with ``status`` at once,
    output flushed: after an ExchangeTimeout a rank is missing, and MPI_Finalize at the
    interpreter's exit would wait for it."""
    from mpi_resolver.exchange.transport import mpi_initialized

    if not mpi_initialized():
        return status
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)
    return status  # only where a test stubs os._exit


def end_after_deep(deep: Optional[DeepReport], status: int) -> int:
    """Returns ``status`` where this rank may end as usual (no --deep, or it succeeded, or no
    MPI and no stuck thread); otherwise ends the process with it, output flushed: at once
    where a rank was lost at a gather or MPI is not running, else after MPI_Finalize (the
    watchdog ends it, status 1 and every thread's stack, after FINALIZE_WAIT seconds; a fatal
    signal in it prints every thread's stack too, before Open MPI's report)."""
    from mpi_resolver.exchange.transport import finalize, mpi_initialized

    if deep is None or deep.ok:
        return status
    running = mpi_initialized()
    if not running and not deep.left_running:
        return status
    sys.stdout.flush()
    sys.stderr.flush()
    if running and not deep.lost:
        faulthandler.enable(all_threads=True)  # a crash in it names itself (seen once: SIGSEGV)
        faulthandler.dump_traceback_later(FINALIZE_WAIT, exit=True)
        finalize()
    os._exit(status)
    return status  # only where a test stubs os._exit
