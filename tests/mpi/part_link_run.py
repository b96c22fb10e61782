"""Run under mpirun -n 3 by tests/test_part_link.py: PartLink's transfers on real ranks, one
line of JSON per rank and transfer."""

import json
import mmap
import sys
import tempfile
import time

from mpi4py import MPI

from mpi_resolver.exchange.part_link import PartLink

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
link = PartLink(comm, 30.0)
big = 8 * 1024 * 1024  # past every eager limit: a send completes only once it is taken


def show(name: str, received: dict, late: list, **more: object) -> None:
    sys.stdout.write(json.dumps({"rank": rank, "transfer": name, "late": late, "received": {
        str(k): [len(v), bytes(v[:12]).decode(errors="replace")] for k, v in received.items()},
        **more}) + "\n")
    sys.stdout.flush()


ring = (rank + 1) % size, (rank - 1) % size
show("ring", *link.transfer({ring[0]: b"part of %d" % rank}, [ring[1]], 30.0))
show("big", *link.transfer({ring[0]: b"%d" % rank * big}, [ring[1]], 30.0))
show("none", *link.transfer({}, [], 30.0))
show("empty", *link.transfer({ring[0]: b""}, [ring[1]], 30.0))  # a rank with no part to give
with tempfile.TemporaryFile() as f:  # from a file's read-only mapping into the receiver's own
    f.write(b"M%d" % rank * (big // 2))
    f.flush()
    out = mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ)
asked = []
received, late = link.transfer({ring[0]: out}, [ring[1]], 30.0,
                               lambda source, n: asked.append([source, n]) or mmap.mmap(-1, n))
show("mapped", received, late, asked=asked, types=[type(v).__name__ for v in received.values()])
if rank == 2:  # late past the others' deadline
    time.sleep(4.0)
show("late", *link.transfer({ring[0]: b"L" * big}, [ring[1]], 1.0))
show("after", *link.transfer({ring[0]: b"after %d" % rank}, [ring[1]], 30.0))
