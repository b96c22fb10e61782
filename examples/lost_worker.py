"""A worker lost mid-training (killed, stopped, its node gone): name it and end at once.

MultiWorkerMirroredStrategy notices a lost worker by itself, on TensorFlow 2.15.1 as on 2.21:
the survivors' next all-reduce fails with an ``UnavailableError``, either at once (the dead
worker's connections close: "Connection reset by peer", "Socket closed", "failed to connect to
all addresses") or when TensorFlow's coordination service misses its heartbeats (a stopped
worker, and a dead one that no collective was talking to at that moment), about 10 s later.
Two things are left to the script, and ``install`` does them:

* Naming the lost worker. TensorFlow names a task (``/job:worker/replica:0/task:1``, in
  every loss measured), an address (``ipv4:10.0.0.3:8888``), or nobody (a collective that
  ran into ``--collective-timeout``: "Collective has timed out during execution"). ``install``
  prints one line that names the lost worker's task, rank, node and address, as
  MPIClusterResolver placed them; where TensorFlow names nobody, it asks every other worker
  whether it answers (TensorFlow's own peer probe, a few seconds at most).
* Ending at once. After the error, the Python process took 0.6 s to 12 s more to exit
  (measured on 2 cores: TensorFlow tears down its input pipelines and servers first; a
  debugger showed the main thread waiting for tf.data's threads), and Slurm's
  ``--kill-on-bad-exit`` does not hurry it: TensorFlow's coordination service catches SIGTERM
  ("SIGTERM caught", preemption_notifier.cc), so Slurm's SIGKILL comes only after KillWait
  (30 s by default). ``install`` ends the process with exit status 1 right after its line.

Use: ``lost_worker.install(tf, resolver)`` once the strategy exists. It hooks
``sys.excepthook``, so it acts only on an exception that would end the program anyway; any
other error keeps its usual traceback and exit.
"""

from __future__ import annotations

import os
import re
import socket
import sys
import threading
from typing import Callable, Dict, Iterable, List, Optional, Sequence, Tuple

__all__ = ["EXIT_STATUS", "install", "lost_tasks", "named_tasks", "describe", "summary"]

#: The exit status of a worker that lost a peer.
EXIT_STATUS = 1
#: Seconds the probe waits for each peer's answer, where TensorFlow's error names nobody.
PROBE_SECONDS = 3.0

Task = Tuple[str, int]
_TASK = re.compile(r"/job:([A-Za-z0-9_]+)/(?:replica:\d+/)?task:(\d+)")
_IPV4 = re.compile(r"ipv4:(\d{1,3}(?:\.\d{1,3}){3}):(\d+)")
NAMED = "named by TensorFlow"
_ABORTED_BY = re.compile(r"Collective ops is aborted by: (.*)")
_FRAME = ("Graph execution error", "Detected at node", "[[")


def is_peer_loss(tf, error: BaseException) -> bool:
    """Whether ``error`` is how TensorFlow reports a peer lost in a collective."""
    return (isinstance(error, (tf.errors.UnavailableError, tf.errors.DeadlineExceededError))
            or (isinstance(error, tf.errors.OpError)
                and "Collective ops is aborted" in str(error)))


def named_tasks(message: str, cluster: Dict[str, List[str]], own: Task,
                addresses: Optional[Dict[str, Task]] = None) -> List[Task]:
    """Returns the tasks of ``cluster`` (other than ``own``) that TensorFlow's ``message``
    names, in order of mention: ``/job:worker/replica:0/task:1``, ``/job:worker/task:1``, or
    ``ipv4:10.0.0.3:8888`` (``addresses`` maps 'ip:port' to a task)."""
    found: List[Task] = []
    for job, index in _TASK.findall(message):
        task = (job, int(index))
        if task != own and int(index) < len(cluster.get(job, ())) and task not in found:
            found.append(task)
    for ip, port in _IPV4.findall(message):
        task = (addresses or {}).get(f"{ip}:{port}")
        if task is not None and task != own and task not in found:
            found.append(task)
    return found


def ip_addresses(cluster: Dict[str, List[str]]) -> Dict[str, Task]:
    """Returns {'ip:port': task} for every task of ``cluster`` whose host resolves (IPv4)."""
    out: Dict[str, Task] = {}
    for job, addresses in cluster.items():
        for index, address in enumerate(addresses):
            host, _, port = address.rpartition(":")
            try:
                infos = socket.getaddrinfo(host, int(port), socket.AF_INET, socket.SOCK_STREAM)
            except (OSError, ValueError):
                continue
            for info in infos:
                out.setdefault(f"{info[4][0]}:{port}", (job, index))
    return out


def probe(tasks: Sequence[Task], check: Callable[[str, int], None],
          seconds: float = PROBE_SECONDS) -> List[Task]:
    """Returns the ``tasks`` that do not answer ``check(task name, timeout in ms)`` (it
    raises, or has not returned after ``seconds`` + 1), asking all of them at once."""
    answered: Dict[Task, bool] = {}

    def ask(task: Task) -> None:
        try:
            check(f"/job:{task[0]}/replica:0/task:{task[1]}", int(seconds * 1000))
            answered[task] = True
        except Exception:  # noqa: BLE001 -- any failure to answer counts as lost
            answered[task] = False

    threads = [threading.Thread(target=ask, args=(t,), daemon=True) for t in tasks]
    for t in threads:
        t.start()
    for t in threads:
        t.join(seconds + 1.0)
    return [t for t in tasks if not answered.get(t, False)]


def lost_tasks(message: str, cluster: Dict[str, List[str]], own: Task,
               check: Optional[Callable[[str, int], None]] = None) -> Tuple[List[Task], str]:
    """Returns (the lost tasks, how they were found): those TensorFlow's ``message`` names
    (NAMED), else those that do not answer ``check`` ('did not answer a probe ...'); ([], why)
    where neither says."""
    named = named_tasks(message, cluster, own)
    if not named and _IPV4.search(message):
        named = named_tasks(message, cluster, own, ip_addresses(cluster))
    if named:
        return named, NAMED
    if check is None:
        return [], "TensorFlow's error names no task"
    others = [(job, i) for job, addresses in cluster.items() for i in range(len(addresses))
              if (job, i) != own]
    silent = probe(others, check)
    if silent:
        return silent, f"did not answer a probe within {PROBE_SECONDS:g} s"
    return [], "TensorFlow's error names no task, and every other task answered a probe"


def describe(resolution, task: Task) -> str:
    """Returns 'worker:1 (rank 1 on node2, node2:8888)': the task as MPIClusterResolver placed
    it (``resolution``: the resolver's ``resolution``)."""
    job, index = task
    layout = resolution.layout
    for name, start, count in layout.jobs:
        if name == job and index < count:
            rank = start + index
            return (f"{job}:{index} (rank {rank} on {layout.placement[rank]}, "
                    f"{layout.addresses[rank]})")
    return f"{job}:{index}"


def reason(message: str) -> str:
    """Returns TensorFlow's reason in one short line: the first sentence of what the
    collective was aborted by, else of the message's first line that is not its frame (a
    "Graph execution error" names the node and the stack first)."""
    m = _ABORTED_BY.search(message)
    if m:
        text = m.group(1)
    else:
        lines = [ln.strip() for ln in message.splitlines()
                 if ln.strip() and not ln.startswith((" ", "\t"))]
        text = next((ln for ln in lines if not ln.startswith(_FRAME)), lines[0] if lines else "")
    text = re.sub(r"^Error reported from /job:\S+: ", "", text.strip())
    text = re.split(r"(?<=[a-z)])\. ", text, maxsplit=1)[0].rstrip(" .:")
    return text if len(text) <= 160 else text[:157] + "..."


def summary(resolution, own: Task, lost: Iterable[Task], how: str, message: str,
            error_name: str) -> str:
    """Returns the one line printed for a lost peer, e.g. ``train.py: lost worker:1 (rank 1
    on node2, node2:8888). TensorFlow: UnavailableError: ... This worker, worker:0 (rank 0 on
    node1, node1:8888), exits 1 now.``"""
    lost = list(lost)
    if not lost:
        who = f"a worker ({how})"
    else:
        who = ", ".join(describe(resolution, t) for t in lost)
        who += "" if how == NAMED else f", which {how}"
    return (f"train.py: lost {who}. TensorFlow: {error_name}: {reason(message)}. "
            f"This worker, {describe(resolution, own)}, exits {EXIT_STATUS} now.")


def install(tf, resolver, *, stream=None, exit: Callable[[int], None] = os._exit) -> None:
    """Hooks ``sys.excepthook``: an uncaught error that reports a lost peer prints the usual
    traceback, then one line naming the lost worker (see ``summary``), and ends the process
    with EXIT_STATUS at once, without TensorFlow's teardown; any other error is left to the
    hook before."""
    before = sys.excepthook
    own = resolver.resolution.task
    cluster = resolver.resolution.cluster()

    def check(task: str, timeout_ms: int) -> None:
        from tensorflow.python.eager import context  # TensorFlow's own peer probe

        context.context().check_collective_ops_peer_health(task, timeout_in_ms=timeout_ms)

    def hook(kind, error, traceback) -> None:
        if not is_peer_loss(tf, error):
            before(kind, error, traceback)
            return
        out = stream or sys.stderr
        try:
            before(kind, error, traceback)
            message = getattr(error, "message", None) or str(error)
            lost, how = lost_tasks(message, cluster, own, check)
            out.write(summary(resolver.resolution, own, lost, how, message,
                              type(error).__name__) + "\n")
        finally:
            out.flush()
            sys.stdout.flush()
            exit(EXIT_STATUS)

    sys.excepthook = hook
