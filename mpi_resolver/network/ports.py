"""Ports of the ClusterSpec: TensorFlow's fixed ``port_base``, or ``'auto'`` ports that two
jobs sharing a node do not share.

Pure: the 'auto' range, the base derived from a job's identity, the candidates a rank tries,
which port each rank checks or claims, the messages. The edge that listens on this host's
ports is _port_sockets.SocketPorts (the ``Ports`` protocol here).

``port_base='auto'`` takes ports from ``AUTO_FIRST..AUTO_LAST`` (20000-32767), below Linux's
default ephemeral range (32768-60999), so the kernel never hands one of them to an outgoing
connection. Ranks on a node count up from a base derived from the job (SLURM_JOB_ID and
SLURM_STEP_ID; mpirun's job id elsewhere); with MPI, a rank whose port is taken tries others
and every rank learns every rank's port in the exchange.
"""

from __future__ import annotations

import hashlib
import random
from typing import Callable, Iterator, Mapping, Optional, Protocol, Tuple

from mpi_resolver.core.errors import ResolutionError
from mpi_resolver.launch.launchers import Launch, srun_advice
from mpi_resolver.placement.layout import Layout, Runs, count_runs
from mpi_resolver.options import Options
from mpi_resolver.core.values import PORT_MAX


AUTO_FIRST, AUTO_LAST = 20000, 32767
_SPAN = AUTO_LAST - AUTO_FIRST + 1
#: Ports a rank tries (its own, then others at random in the range) before it gives up.
TRIES = 64
#: Variables that name an mpirun job (Open MPI, PMIx); MPICH's and Intel MPI's Hydra set none.
KEY_VARIABLES = ("PMIX_NAMESPACE", "OMPI_MCA_ess_base_jobid")
#: Tasks on a node that an 'auto' base leaves room for where the job does not say (mpirun).
ROOM = 64

Release = Callable[[], None]


class Ports(Protocol):
    """This host's ports, as the resolver needs them; SocketPorts is the real one."""

    def hold(self, port: int) -> Optional[Release]:
        """Starts listening on ``port``; returns what stops it, or None where the port is in use.

        Raises:
          ResolutionError: this process may not listen on ``port`` (not "in use").
        """

    def ours(self, port: int) -> bool:
        """Returns True when this very process listens on ``port`` (a TensorFlow server an
        earlier resolver's job started here): in use, but not by another job."""


def step_key(env: Mapping[str, str]) -> Optional[str]:
    """Returns 'JOB.STEP' from SLURM_JOB_ID and SLURM_STEP_ID ('JOB.batch' in the batch step),
    or None outside a Slurm job."""
    job = env.get("SLURM_JOB_ID", "").strip()
    if not job:
        return None
    return f"{job}.{env.get('SLURM_STEP_ID', '').strip() or 'batch'}"


def job_key(env: Mapping[str, str], mpirun: bool = False) -> str:
    """Returns what names this job: step_key, else mpirun's job id (KEY_VARIABLES), else ''.
    ``mpirun``: the ranks of an mpirun, whose Slurm variables (inside an allocation) are its
    daemons' and differ between nodes: its job id first."""
    mpi = next((f"{name}={env[name]}" for name in KEY_VARIABLES if env.get(name)), "")
    if mpirun and mpi:
        return mpi
    key = step_key(env)
    return key if key is not None else mpi


def auto_base(key: str, tasks_on_node: int) -> int:
    """Returns the first 'auto' port of the job named ``key``: AUTO_FIRST + a hash of ``key``,
    leaving room for ``tasks_on_node`` ports up to AUTO_LAST.

    Raises:
      ResolutionError: more tasks on a node than the range has ports.
    """
    if tasks_on_node > _SPAN:
        raise ResolutionError(
            f"port_base='auto' has {_SPAN} ports ({AUTO_FIRST}-{AUTO_LAST}) but a node runs "
            f"{tasks_on_node} tasks; pass a number as port_base (--port-base).")
    digest = hashlib.blake2b(key.encode(errors="surrogateescape"), digest_size=8).digest()
    return AUTO_FIRST + int.from_bytes(digest, "little") % (_SPAN - max(tasks_on_node, 1) + 1)


def wrap(port: int) -> int:
    """Returns ``port`` folded into AUTO_FIRST..AUTO_LAST."""
    return AUTO_FIRST + (port - AUTO_FIRST) % _SPAN


def candidates(first: int, seed: str, tries: int = TRIES) -> Iterator[int]:
    """Yields ``first``, then ``tries - 1`` other ports of the range, drawn from ``seed``."""
    yield first
    rng = random.Random(seed)
    for _ in range(tries - 1):
        yield rng.randint(AUTO_FIRST, AUTO_LAST)


def claim(ports: Ports, first: int, seed: str, host: str,
          tries: int = TRIES) -> Tuple[int, Release]:
    """Returns (a port of the 'auto' range this rank now listens on, what releases it): the
    first of ``candidates`` that is free, or that this process's own server listens on (a
    resolver before this one took it: the candidates are the same each time).

    Raises:
      ResolutionError: none of ``tries`` ports was free.
    """
    for port in candidates(first, seed, tries):
        release = ports.hold(port)
        if release is not None:
            return port, release
        if ports.ours(port):
            return port, _stays
    raise ResolutionError(
        f"port_base='auto': none of {tries} ports tried in {AUTO_FIRST}-{AUTO_LAST} is free "
        f"on {host} (first {first}); free ports there, or pass a number as port_base "
        "(--port-base).")


def _stays() -> None:
    """The release of a port this process's own server listens on: it stays open."""


def in_use(port: int, host: str, how: str, fix: str) -> str:
    """Returns the message for ``port`` found in use on ``host``; ``how`` says where the port
    came from, ``fix`` what to do."""
    return (f"port {port} on {host} ({how}) is in use: another job on this node, or a "
            "process left over, listens there, and TensorFlow's server would stop with "
            f"'Could not start gRPC server'. {fix}")


# ------------------------------------------------------------------- which port a rank takes
FIX_FIXED = ("Pass port_base='auto' (mpi-resolver --port-base auto): with MPI each node's "
             "ranks pick ports free there, without it they are derived from the job and "
             "step; or pass another port_base.")


def slurm_port_base(opts: Options, env: Mapping[str, str], runs: Runs) -> int:
    """Returns the port_base of a resolution from Slurm's variables alone: the given one, or
    for 'auto' the one SLURM_JOB_ID and SLURM_STEP_ID give (auto_base).

    Raises:
      ResolutionError: 'auto' outside a Slurm job.
    """
    if isinstance(opts.port_base, int):
        return opts.port_base
    key = step_key(env)
    if key is None:
        raise ResolutionError(
            "port_base='auto' without MPI derives the ports from SLURM_JOB_ID and "
            "SLURM_STEP_ID, but SLURM_JOB_ID is not set; launch with MPI (srun --mpi=pmix, "
            "mpirun) or pass a number as port_base.")
    return auto_base(key, max(count_runs(runs).values()))


def check_free(ports: Ports, port: int, host: str, how: str, fix: str) -> None:
    """Raises ResolutionError (in_use) where another process listens on ``port`` here."""
    release = ports.hold(port)
    if release is not None:
        release()
    elif not ports.ours(port):  # this process's own server (an earlier resolver's) is fine
        raise ResolutionError(in_use(port, host, how, fix))


def check_own_port(opts: Options, env: Mapping[str, str], layout: Layout, rank: int,
                   ports: Ports, launch: Launch) -> None:
    """Raises ResolutionError where this rank's port (from Slurm's variables alone) is in
    use; without MPI the ranks cannot move to other ports together, so the message says how
    to launch with it."""
    if isinstance(opts.port_base, int):
        how, fix = f"port_base={opts.port_base}", FIX_FIXED
    else:
        how = (f"port_base='auto' from SLURM_JOB_ID and SLURM_STEP_ID {step_key(env)}, "
               "without MPI")
        how_mpi = ("leave out source='slurm' (--source slurm)" if launch.wired else
                   f"launch with {srun_advice(launch.name, None)}")
        fix = (f"Without MPI the ranks cannot agree on other ports: {how_mpi} so that they "
               "pick free ports together, or pass a free port_base.")
    check_free(ports, layout.port_of(rank), layout.host_of(rank)[0], how, fix)


def pick_port(opts: Options, env: Mapping[str, str], tasks_on_node: Optional[int],
              launch: Launch, host: str, rank: int, ports: Ports
              ) -> Tuple[Optional[int], Optional[Release], Optional[int]]:
    """Returns (the port this rank now listens on, what releases it, the base it aimed at)
    for port_base='auto' (``tasks_on_node``: the most of any node, where Slurm says); (None,
    None, None) for a number, after checking this rank's own port where the launcher says its
    index on the node.

    Raises:
      ResolutionError: that port is in use, or no free port was found (claim).
    """
    local = launch.local_rank
    if isinstance(opts.port_base, int):
        port = opts.port_base + (local or 0)
        if local is not None and port <= PORT_MAX:
            check_free(ports, port, host, f"port_base={opts.port_base} + local rank {local}",
                       FIX_FIXED)
        return None, None, None
    key = job_key(env, mpirun=launch.mpirun)
    base = auto_base(key, tasks_on_node if tasks_on_node is not None else ROOM)
    port, release = claim(ports, wrap(base + (local or 0)), f"{key}/{host}/{rank}", host)
    return port, release, base
