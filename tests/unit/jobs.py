"""Fake jobs for the unit tables: every rank's variables as srun gives them, and every rank's
resolution run in a thread of a fake MPI world (the real protocol, a fake transport)."""

from __future__ import annotations

import threading
from typing import Any, Callable, Dict, Iterable, List, Optional

from mpi_resolver.options import make_options
from mpi_resolver.resolve.resolution import resolve_job


def srun_env(rank: int, hosts: List[str], counts: List[int], placement: List[str],
             mpi: str = "pmix", **extra: str) -> Dict[str, str]:
    """The variables `srun --mpi=<mpi>` gives task ``rank`` placed on placement[rank]."""
    node = placement[rank]
    env = {"SLURM_PROCID": str(rank), "SLURM_STEP_NUM_TASKS": str(len(placement)),
           "SLURM_STEP_NODELIST": ",".join(hosts),
           "SLURM_STEP_TASKS_PER_NODE": ",".join(map(str, counts)),
           "SLURMD_NODENAME": node, "SLURM_JOB_ID": "42", "SLURM_STEP_ID": "0",
           "SLURM_LOCALID": str(placement[:rank].count(node)),
           "SLURM_GTIDS": ",".join(str(r) for r, h in enumerate(placement) if h == node)}
    if mpi == "pmix":
        env["PMIX_RANK"] = str(rank)
    elif mpi == "pmi2":
        env.update(PMI_RANK=str(rank), PMI_SIZE=str(len(placement)))
    env.update(extra)
    return env


class ThreadWorld:
    """An MPI world of ``size`` ranks as threads of this process, with the protocol.Transport
    of each rank: every rank runs exactly the code it runs under real MPI."""

    def __init__(self, size: int, timeout: float = 20.0) -> None:
        self.size = size
        self.timeout = timeout
        self._barrier = threading.Barrier(size, timeout=timeout)
        self._slots: List[Any] = [None] * size
        self._mail: Dict[tuple, bytes] = {}
        self._cond = threading.Condition()
        self.collectives = [0] * size
        self.messages = [0] * size
        self.received = [0] * size          # bytes each rank's receive buffers take, as MPI's
        #: each rank's collectives in order: (kind, bytes its receive buffer took)
        self.kinds: List[List[tuple]] = [[] for _ in range(size)]
        self.closed = [False] * size        # as mpi.MpiTransport.close: the duplicate freed

    def transport(self, rank: int) -> "_ThreadTransport":
        """Returns rank ``rank``'s new transport (a new duplicate, open until its close())."""
        self.closed[rank] = False
        return _ThreadTransport(self, rank)


class _ThreadTransport:
    def __init__(self, world: ThreadWorld, rank: int) -> None:
        self.world, self.rank, self.size = world, rank, world.size

    def close(self) -> None:
        self.world.closed[self.rank] = True

    def _all(self, value: Any, kind: str) -> List[Any]:
        w = self.world
        if w.closed[self.rank]:
            raise AssertionError(f"rank {self.rank}: a collective after close()")
        w._slots[self.rank] = value
        w._barrier.wait()
        out = list(w._slots)
        w._barrier.wait()
        w.collectives[self.rank] += 1
        w.kinds[self.rank].append((kind, 0))
        return out

    def _took(self, n: int) -> None:
        """Counts ``n`` bytes received by the last collective."""
        w = self.world
        w.received[self.rank] += n
        kind, _ = w.kinds[self.rank][-1]
        w.kinds[self.rank][-1] = (kind, n)

    def allreduce_min(self, values):
        vectors = self._all(list(values), "allreduce")
        if len({len(v) for v in vectors}) != 1:  # MPI would reduce garbage
            raise AssertionError(f"reduction of vectors of different lengths: {vectors}")
        self._took(8 * len(values))
        return [min(column) for column in zip(*vectors, strict=True)]

    def allgather(self, payload, width):
        """As mpi.MpiTransport: at most ``width`` bytes from each rank, the same width on every
        rank (MPI would mix up the ranks' slots otherwise)."""
        if len(payload) > width:
            raise AssertionError(f"rank {self.rank}: {len(payload)} bytes, more than {width}")
        got = self._all((width, bytes(payload)), "allgather")
        if len({w for w, _ in got}) != 1:
            raise AssertionError(f"allgather with different widths: {[w for w, _ in got]}")
        self._took((width + 4) * self.size)
        return [p for _, p in got]

    def allgatherv(self, payload, counts):
        """As MPI: every rank passes the same counts, and sends exactly counts[rank] bytes."""
        got = self._all((list(counts), bytes(payload)), "allgatherv")
        if any(c != list(counts) for c, _ in got) or len(got) != len(counts):
            raise AssertionError("allgatherv with different counts on different ranks")
        if any(len(p) != counts[r] for r, (_, p) in enumerate(got)):
            raise AssertionError(f"allgatherv: a rank sent other than its count: {counts}")
        self._took(sum(counts))
        return [p for _, p in got]

    def exchange(self, peers, payload):
        w = self.world
        with w._cond:
            for p in peers:
                w._mail[(self.rank, p)] = bytes(payload)
            w.messages[self.rank] += len(peers)
            w._cond.notify_all()
            if not w._cond.wait_for(lambda: all((p, self.rank) in w._mail for p in peers),
                                    timeout=w.timeout):
                raise TimeoutError("a peer never sent its record")
            out = {p: w._mail.pop((p, self.rank)) for p in peers}
            w.received[self.rank] += sum(len(v) for v in out.values())
            return out


class FakePorts:
    """The ports of fake hosts, held as the kernel holds them: ``busy`` {host: ports another
    process listens on}; a port held by one rank is in use for the others of its host."""

    def __init__(self, busy: Optional[Dict[str, Iterable[int]]] = None,
                 ours: Optional[Dict[str, Iterable[int]]] = None) -> None:
        self.busy = {h: set(p) for h, p in (busy or {}).items()}
        self.own = {h: set(p) for h, p in (ours or {}).items()}  # this process's listeners
        self.held: Dict[str, set] = {}
        self.tried: List[tuple] = []   # (host, port) in the order ranks tried them
        self._lock = threading.Lock()

    def on(self, host: str) -> "_HostPorts":
        """Returns the ports.Ports of ``host``."""
        return _HostPorts(self, host)


class _HostPorts:
    def __init__(self, table: FakePorts, host: str) -> None:
        self.table, self.host = table, host

    def hold(self, port: int):
        t = self.table
        with t._lock:
            t.tried.append((self.host, port))
            held = t.held.setdefault(self.host, set())
            if port in held or port in t.busy.get(self.host, ()):
                return None
            held.add(port)

        def release() -> None:
            with t._lock:
                held.discard(port)
        return release

    def ours(self, port: int) -> bool:
        return port in self.table.own.get(self.host, ())


class PerRank:
    """An argument of run_world that differs between ranks: ``values[rank]``."""

    def __init__(self, *values: Any) -> None:
        self.values = values


def run_world(envs: List[Dict[str, str]], hosts_by_rank: List[str], probe=None,
              smi: int = 4, details: Optional[bool] = None, ports: Optional[FakePorts] = None,
              events: Optional[List[Any]] = None, **kwargs) -> List[Any]:
    """Resolves every rank of a job whose ranks see ``envs`` and run on ``hosts_by_rank``, each
    in a thread of one ThreadWorld; returns each rank's Resolution or the exception it raised.
    ``probe`` stands for nvidia-smi (default: ``smi`` GPUs); ``ports`` for each host's ports
    (default: all free); ``details`` is passed where given (else resolve_job's default).
    ``events``: a list that gets (rank, 'GPUs before MPI', GPUs) and (rank, 'MPI starts') in
    the order they happen."""
    probe = probe or (lambda: (smi, False))
    ports = ports or FakePorts()
    world = ThreadWorld(len(envs))

    def one(rank: int) -> Any:
        opts = make_options(**{k: v.values[rank] if isinstance(v, PerRank) else v
                               for k, v in kwargs.items()})
        more: Dict[str, Any] = {} if details is None else {"details": details}
        if events is not None:
            more["before_mpi"] = lambda gpus: events.append((rank, "GPUs before MPI", gpus))

        def transport():
            if events is not None:
                events.append((rank, "MPI starts"))
            return world.transport(rank)

        return resolve_job(opts, envs[rank], transport=transport,
                           probe=probe, hostname=lambda: hosts_by_rank[rank],
                           ports=ports.on(hosts_by_rank[rank]), **more)

    out = each_rank(len(envs), one)
    run_world.last = world  # type: ignore[attr-defined]
    return out


def each_rank(size: int, one: Callable[[int], Any]) -> List[Any]:
    """Returns ``one(rank)`` of every rank, each run in a thread of its own at once (as the
    ranks of a ThreadWorld must be), or the exception it raised."""
    out: List[Any] = [None] * size

    def run(rank: int) -> None:
        try:
            out[rank] = one(rank)
        except Exception as e:  # noqa: BLE001 - handed to the caller
            out[rank] = e

    threads = [threading.Thread(target=run, args=(r,)) for r in range(size)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return out


def run_job(envs: List[Dict[str, str]], hosts_by_rank: List[str], rank: int,
            mpi_size: Optional[int] = None, smi: int = 4, probe=None, **kwargs):
    """Returns rank ``rank``'s Resolution (or raises its exception) of ``run_world``; with
    ``mpi_size=1`` that rank alone, as a world of one (srun without MPI wiring)."""
    if mpi_size == 1:
        env = dict(envs[rank])
        result = run_world([env], [hosts_by_rank[rank]], probe=probe, smi=smi, **kwargs)[0]
    else:
        result = run_world(envs, hosts_by_rank, probe=probe, smi=smi, **kwargs)[rank]
    if isinstance(result, Exception):
        raise result
    return result
