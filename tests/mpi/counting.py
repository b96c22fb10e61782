"""A communicator wrapper that records the collectives started through it."""


class CountingComm:
    """Wraps a communicator and records every collective started through it."""

    COLLECTIVES = {"Barrier", "Bcast", "Gather", "Allgather", "Iallgather", "Allreduce",
                   "allgather", "bcast", "gather", "allreduce", "Ibcast", "Igather",
                   "Iallreduce", "Split", "Split_type", "Dup", "Alltoall", "barrier"}

    def __init__(self, comm):
        self._comm = comm
        self.collectives = []

    def __getattr__(self, name):
        attr = getattr(self._comm, name)
        if name in self.COLLECTIVES:
            self.collectives.append(name)
        return attr
