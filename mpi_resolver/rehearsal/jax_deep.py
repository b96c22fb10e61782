"""`mpi-resolver check --deep --framework jax`: JAX's part of each rank, phase by
phase as a JAX training job runs it (import jax; the package's resolution for JAX;
jax.distributed.initialize; one all-reduce across every process), with the MPI gathers of
check --deep between the phases (deep_check runs them, deep_tf's Gather shares them).

JAX is imported only inside the phases, in their worker thread. JAX ends a process itself
(it aborts) when its connection to the coordinator times out: its initialization_timeout is
set past this rehearsal's deadline, so that the deadline comes first, the rank counts as
stuck and the table names it.
"""

from __future__ import annotations

import faulthandler
import math
import time
from dataclasses import dataclass, replace
from typing import Any, List, Optional

from mpi_resolver.core.errors import ExchangeTimeout
from mpi_resolver.options import Options
from mpi_resolver.rehearsal.deep_check import (ALL_REDUCE, DeepReport, PhaseRunner, Progress,
                                               RankOutcome, expected_sum, outcome_of,
                                               run_phases, sum_problem)
from mpi_resolver.resolve.resolution import Resolution

__all__ = ["JaxRehearsal", "JaxDeepReport", "run_jax_deep", "IMPORT_JAX", "RESOLVE_JAX",
           "START_JAX", "ALL_REDUCE_JAX"]

#: The stages; the all-reduce's is deep_check's own (RankOutcome.finished looks for it).
IMPORT_JAX, RESOLVE_JAX, START_JAX, ALL_REDUCE_JAX = (
    "import jax", "mpi_resolver.jax", "jax.distributed", ALL_REDUCE)
FIXES = {
    (IMPORT_JAX, "failed"): "install JAX for the Python this rank runs on that node (pip "
                            "install 'mpi_resolver[jax]'); the same version on every node",
    (IMPORT_JAX, "stuck"): "importing JAX is slow there (a shared file system, many ranks on "
                           "few cores): raise --timeout",
    (START_JAX, "failed"): "JAX's coordinator (task 0's address) could not be reached or "
                           "started: its port taken (--port-base auto), a proxy, a firewall",
    (START_JAX, "stuck"): "JAX waits for every process to reach the coordinator: a rank that "
                          "failed or is stuck, or the network between the nodes",
    (ALL_REDUCE_JAX, "failed"): "JAX's collectives across processes failed: on CPU-only "
                                "nodes JAX needs its gloo collectives (mpi_resolver.jax sets "
                                "them); on GPUs every process needs its devices",
    (ALL_REDUCE_JAX, "stuck"): "the all-reduce waits for the other processes: one is stuck, "
                               "or the network between them is",
}


@dataclass(frozen=True)
class JaxDeepReport(DeepReport):
    """check --deep's report, for JAX: the same outcomes and verdict, JAX's words."""

    def text(self) -> str:
        """Returns the report rank 0 prints (or each rank without MPI)."""
        if not self.ok:
            return DeepReport.text(self).replace("the first all-reduce",
                                                 "JAX's first all-reduce", 1)
        first = self.outcomes[0]
        versions = ", ".join(sorted({o.version or "?" for o in self.outcomes}))
        who = f"the job's {self.ranks} process(es)" if self.gathered else "this process"
        rows = [f"  rank {o.rank} on {o.host}: JAX started at {o.times.get(START_JAX, 0):.1f} "
                f"s, all-reduce at {o.times.get(ALL_REDUCE_JAX, 0):.1f} s"
                for o in self.outcomes]
        return (f"DEEP OK: JAX {versions} on {who}, {first.replicas} device(s): the first "
                f"all-reduce gave {expected_sum(first.replicas or 0)}, as expected, in "
                f"{self.seconds:.1f} s. Seconds since the start, on each rank:\n"
                + "\n".join(rows))


class JaxRehearsal:
    """JAX's part of one rank, as phases for PhaseRunner: ``load``, ``resolve``, ``start``,
    ``all_reduce``."""

    def __init__(self, opts: Options, deadline: float, comm: Any) -> None:
        self.opts, self.deadline, self.comm = opts, deadline, comm
        self.jax: Any = None
        self.args: Any = None

    def phases(self) -> List[Any]:
        return [self.load, self.resolve, self.start, self.all_reduce]

    def load(self, progress: Progress) -> None:
        progress.begin(IMPORT_JAX)
        import jax

        self.jax, progress.version = jax, jax.__version__
        progress.done()

    def resolve(self, progress: Progress) -> None:
        """Resolves as mpi_resolver.jax.initialize does, on the rehearsal's communicator."""
        progress.begin(RESOLVE_JAX)
        from mpi_resolver.jax.start import resolve_for_jax

        self.args = resolve_for_jax(self.opts, comm=self.comm).distributed
        progress.done()

    def start(self, progress: Progress) -> None:
        """Starts JAX's runtime; JAX's own timeout set past the deadline (it aborts)."""
        progress.begin(START_JAX)
        from mpi_resolver.jax.start import start_jax

        left = max(self.deadline - time.monotonic(), 1.0)
        start_jax(replace(self.args, initialization_timeout=math.ceil(2 * left) + 10))
        progress.replicas = len(self.jax.devices())
        progress.done()

    def all_reduce(self, progress: Progress) -> None:
        """Sums every device's global index + 1 across processes; checks the sum."""
        progress.begin(ALL_REDUCE_JAX)
        problem = sum_problem([device_sum(self.jax)], progress.replicas or 0)
        if problem is not None:
            raise problem
        progress.done()


def device_sum(jax: Any) -> float:
    """Returns the all-reduced sum of (global device index + 1) over every device of every
    process: a jitted sum of an array sharded over all of them."""
    import numpy as np
    from jax.sharding import Mesh, NamedSharding, PartitionSpec

    devices = jax.devices()
    sharding = NamedSharding(Mesh(np.array(devices), ("d",)), PartitionSpec("d"))
    local = np.array([devices.index(d) + 1.0 for d in jax.local_devices()], dtype=np.float32)
    array = jax.make_array_from_process_local_data(sharding, local, (len(devices),))
    replicated = NamedSharding(sharding.mesh, PartitionSpec())
    total = jax.jit(lambda x: x.sum(), out_shardings=replicated)(array)
    return float(np.asarray(total.addressable_data(0)))


def _outcome(result: Any, progress: Progress, rank: int, host: str, timeout: float
             ) -> RankOutcome:
    """Returns deep_check's outcome, with JAX's likely fix where it has none."""
    o = outcome_of(result, progress, rank, host, timeout)
    if o.fix is None and o.state != "ok":
        o = replace(o, fix=FIXES.get((o.stage, o.state)))
    return o


def run_jax_deep(res: Resolution, opts: Options) -> JaxDeepReport:
    """Returns this rank's report of --deep --framework jax: every rank's outcome, gathered
    over MPI where the resolution started it, else this rank's own; within ``opts.timeout``
    seconds and the gathers' few more. As check --deep for TensorFlow, faulthandler ends the
    process (status 1, every thread's stack) at three timeouts and 30 s: a phase stuck in C
    with the GIL held (an extension's import on a hung file system) stops every Python timer.

    Raises:
      ExchangeTimeout: a rank did not arrive to set up the gathers.
    """
    start = time.monotonic()
    faulthandler.dump_traceback_later(3 * opts.timeout + 30, exit=True)
    try:
        return _run(res, opts, start)
    finally:
        faulthandler.cancel_dump_traceback_later()


def _run(res: Resolution, opts: Options, start: float) -> JaxDeepReport:
    from mpi_resolver.exchange.transport import mpi_initialized
    from mpi_resolver.rehearsal.deep_tf import Gather, _mpi_parts

    host = res.layout.host_of(res.rank)[0]
    progress, deadline = Progress(start), start + opts.timeout
    gather: Optional[Gather]
    gather, comm = _mpi_parts(opts.timeout) if mpi_initialized() else (None, None)
    runner = PhaseRunner(progress)
    note, sync = None, gather or (lambda own: [own])
    try:
        everyone = run_phases(JaxRehearsal(opts, deadline, comm).phases(), runner, deadline,
                              sync, lambda r: _outcome(r, progress, res.rank, host,
                                                       opts.timeout))
    except ExchangeTimeout as e:  # a rank did not come to a gather
        assert gather is not None
        everyone, note = [gather.own or _outcome(None, progress, res.rank, host,
                                                 opts.timeout)], str(e)
    if gather is not None and note is None:
        gather.transport.close()
    return JaxDeepReport(everyone, res.num_tasks, "jax", opts.timeout,
                         time.monotonic() - start, gathered=note is None and gather is not None,
                         note=note, left_running=runner.left_running, lost=note is not None)
