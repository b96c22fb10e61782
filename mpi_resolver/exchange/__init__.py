"""The MPI edge and the exchange over it: each rank's record, the wire format (records);
mpi4py imported lazily and the bounded-time transport on a duplicate communicator
(transport); the few collectives that gather O(nodes) bytes per rank (collectives); the
cross-check of Slurm's variables against MPI and its likely cause (crosscheck).

Only transport imports mpi4py, and only when MPI is needed. May import core, placement,
options, gpus and launch. network/, resolve/, rehearsal/ and cli/ import it; nothing below
may.
"""
