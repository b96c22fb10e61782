"""What `mpi-resolver check --deep --framework jax` would run on each rank (the command line is
not changed yet: see mpi_resolver/rehearsal/jax_deep.py): resolve as the command line does
(MPI exchange), then the JAX rehearsal; rank 0 prints the report and a short JSON line
(srun cuts long lines).

    python deep_driver.py TIMEOUT
"""

from __future__ import annotations

import json
import os
import sys

from mpi_resolver.exchange.transport import MpiTransport, mpi_library, world
from mpi_resolver.options import make_options
from mpi_resolver.rehearsal.jax_deep import run_jax_deep
from mpi_resolver.resolve.environment import snapshot
from mpi_resolver.resolve.resolution import resolve_job


def main() -> None:
    opts = make_options(port_base="auto", timeout=float(sys.argv[1]), gpus_per_node=0)
    res = resolve_job(opts, snapshot(), library=mpi_library,
                      transport=lambda: MpiTransport(world()[0], opts.timeout))
    report = run_jax_deep(res, opts)
    if res.rank == 0:
        short = {"ok": report.ok, "gathered": report.gathered, "missing": report.missing,
                 "outcomes": [{"rank": o.rank, "state": o.state, "stage": o.stage}
                              for o in report.outcomes]}
        sys.stdout.write(report.text() + "\n")
        sys.stdout.write("JSON " + json.dumps(short, separators=(",", ":")) + "\n")
        sys.stdout.flush()
    os._exit(0 if report.ok else 1)  # a stuck phase's thread is left behind: do not wait


if __name__ == "__main__":
    main()
