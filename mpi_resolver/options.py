"""The resolver's arguments, checked once, with errors that name the argument and the fix."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any, Dict, Mapping, Optional, Union

from mpi_resolver.placement.addresses import DEFAULT_ADDRESS, AddressRule, parse_address
from mpi_resolver.core import settings
from mpi_resolver.core.errors import FormatError, ResolutionError
from mpi_resolver.core.settings import number_text, setting
from mpi_resolver.placement.hostlist import check_host_name
from mpi_resolver.core.values import (MAX_GPUS, PORT_MAX, PORT_MIN, check_whole, is_port,
                                      whole_number)

#: The choices of ``source`` and ``verify``; the defaults of the resolver's arguments (the
#: resolver's signature and the command line's options take them from here).
SOURCES = ("auto", "slurm", "mpi")
AUTO = "auto"   # port_base='auto': ports picked free on each node (_ports.py)
DEFAULT_PORT_BASE = 8888   # TensorFlow's
DEFAULT_SOURCE = "auto"
DEFAULT_VERIFY = "auto"
DEFAULT_TIMEOUT = 60.0     # seconds
_JOB_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_]*")

PortBase = Union[int, str]   # a port, or 'auto'


@dataclass(frozen=True)
class Options:
    """Checked resolver arguments (see MPIClusterResolver for their meaning)."""

    jobs: Optional[Dict[str, int]] = None
    port_base: PortBase = DEFAULT_PORT_BASE
    gpus_per_node: Optional[int] = None
    gpus_per_task: Optional[int] = None
    tasks_per_node: Union[None, int, Dict[str, int]] = None
    source: str = DEFAULT_SOURCE
    verify: Union[str, bool] = DEFAULT_VERIFY
    timeout: float = DEFAULT_TIMEOUT
    uneven_gpus: bool = False
    address: AddressRule = AddressRule()


def parse_jobs(text: str) -> Dict[str, int]:
    """Returns the jobs of ``'ps=1,worker=3'`` as {'ps': 1, 'worker': 3}.

    Raises:
      FormatError: an element that is not NAME=COUNT.
    """
    jobs: Dict[str, int] = {}
    for item in text.split(","):
        name, sep, count = item.strip().partition("=")
        if not sep or whole_number(count) is None or not name.strip():
            raise FormatError(
                f"--jobs {text!r}: bad element {item!r}; expected NAME=COUNT pairs such as "
                "'ps=1,worker=3'.")
        if name.strip() in jobs:
            raise FormatError(f"--jobs {text!r} names job {name.strip()!r} twice.")
        jobs[name.strip()] = int(count.strip())
    return jobs


def _check_jobs(jobs: Any) -> Optional[Dict[str, int]]:
    if jobs is None:
        return None
    if not isinstance(jobs, Mapping):
        raise ResolutionError(
            f"jobs={jobs!r}: expected a dict of job name to task count, e.g. "
            "{'ps': 1, 'worker': 3}.")
    if not jobs:
        raise ResolutionError("jobs={}: expected at least one job, e.g. {'worker': 4}.")
    out = {}
    for name, count in jobs.items():
        if not isinstance(name, str) or _JOB_NAME.fullmatch(name) is None:
            raise ResolutionError(
                f"jobs: job name {name!r} is not valid; TensorFlow job names are a letter "
                "followed by letters, digits or '_' (e.g. 'worker', 'ps', 'chief').")
        out[name] = check_whole(count, f"jobs[{name!r}]", 1)
    return out


def _check_tasks_per_node(value: Any) -> Union[None, int, Dict[str, int]]:
    if value is None:
        return None
    if isinstance(value, Mapping):
        if not value:
            raise ResolutionError("tasks_per_node={}: expected {host: count} for each node.")
        return {check_host_name(h if isinstance(h, str) else "", what="tasks_per_node"):
                check_whole(n, f"tasks_per_node[{h!r}]", 1) for h, n in value.items()}
    return check_whole(value, "tasks_per_node", 1)


def _check_port_base(value: Any) -> PortBase:
    if isinstance(value, str) and value == AUTO:
        return AUTO
    if isinstance(value, bool) or not isinstance(value, int) or not is_port(value):
        raise ResolutionError(
            f"port_base={value!r}: expected a port number (int, {PORT_MIN}..{PORT_MAX}) or "
            "'auto' (free ports picked on each node).")
    return value


def _gpus(value: Any, name: str) -> Optional[int]:
    """Returns a GPU count argument (None: not given), at most values.MAX_GPUS."""
    if value is None:
        return None
    count = check_whole(value, name, 0)
    if count > MAX_GPUS:
        raise ResolutionError(f"{name}={count}: more GPUs than a node can have (at most "
                              f"{MAX_GPUS}).")
    return count


def make_options(*, jobs: Any = None, port_base: Any = None,
                 gpus_per_node: Any = None, gpus_per_task: Any = None,
                 tasks_per_node: Any = None, source: Any = DEFAULT_SOURCE,
                 verify: Any = DEFAULT_VERIFY, timeout: Any = DEFAULT_TIMEOUT,
                 uneven_gpus: Any = False, address: Any = DEFAULT_ADDRESS,
                 env: Optional[Mapping[str, str]] = None) -> Options:
    """Returns checked Options. ``port_base`` and ``gpus_per_node`` not given (None) come from
    ``env``'s MPI_RESOLVER_PORT_BASE and MPI_RESOLVER_GPUS_PER_NODE where set (port_base:
    else DEFAULT_PORT_BASE).

    Raises:
      ResolutionError: an argument or variable of the wrong type or out of range, naming it
        (FormatError for a bad ``address``).
    """
    env = env or {}
    port_base = setting(port_base, settings.PORT_BASE, env,
                        lambda t: _check_port_base(number_text(t)))
    port_base = DEFAULT_PORT_BASE if port_base is None else port_base
    gpus_per_node = setting(gpus_per_node, settings.GPUS_PER_NODE, env,
                            lambda t: _gpus(number_text(t), "gpus_per_node"))
    if source not in SOURCES:
        raise ResolutionError(f"source={source!r}: expected one of 'auto', 'slurm', 'mpi'.")
    if not (verify is True or verify is False or (isinstance(verify, str) and
                                                  verify == "auto")):
        raise ResolutionError(f"verify={verify!r}: expected 'auto', True or False.")
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or \
            not math.isfinite(timeout) or timeout <= 0:
        raise ResolutionError(f"timeout={timeout!r}: expected a number of seconds > 0.")
    if not isinstance(uneven_gpus, bool):
        raise ResolutionError(f"uneven_gpus={uneven_gpus!r}: expected True or False.")
    return Options(
        jobs=_check_jobs(jobs), port_base=_check_port_base(port_base),
        gpus_per_node=_gpus(gpus_per_node, "gpus_per_node"),
        gpus_per_task=_gpus(gpus_per_task, "gpus_per_task"),
        tasks_per_node=_check_tasks_per_node(tasks_per_node),
        source=source, verify=verify, timeout=float(timeout), uneven_gpus=uneven_gpus,
        address=parse_address(address))
