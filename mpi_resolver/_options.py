"""The resolver's arguments, checked once, with errors that name the argument and the fix."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any, Dict, Mapping, Optional, Union

from ._errors import FormatError, ResolutionError
from ._hostlist import check_host_name
from ._ports import AUTO, PortBase

__all__ = ["Options", "make_options", "parse_jobs", "SOURCES"]

SOURCES = ("auto", "slurm", "mpi")
_JOB_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_]*")


@dataclass(frozen=True)
class Options:
    """Checked resolver arguments (see MPIClusterResolver for their meaning)."""

    jobs: Optional[Dict[str, int]] = None
    port_base: PortBase = 8888      # a port, or 'auto' (ports.py)
    gpus_per_node: Optional[int] = None
    gpus_per_task: Optional[int] = None
    tasks_per_node: Union[None, int, Dict[str, int]] = None
    source: str = "auto"
    verify: Union[str, bool] = "auto"
    timeout: float = 60.0


def _whole(value: Any, name: str, minimum: int) -> int:
    """Returns ``value`` when it is an int in range; ResolutionError names ``name`` otherwise."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise ResolutionError(
            f"{name}={value!r}: expected a whole number (int), got {type(value).__name__}.")
    if value < minimum:
        raise ResolutionError(f"{name}={value!r}: expected a number >= {minimum}.")
    return value


def parse_jobs(text: str) -> Dict[str, int]:
    """Returns the jobs of ``'ps=1,worker=3'`` as {'ps': 1, 'worker': 3}.

    Raises:
      FormatError: an element that is not NAME=COUNT.
    """
    jobs: Dict[str, int] = {}
    for item in text.split(","):
        name, sep, count = item.strip().partition("=")
        count = count.strip()
        if not sep or not count.isascii() or not count.isdigit() or not name.strip():
            raise FormatError(
                f"--jobs {text!r}: bad element {item!r}; expected NAME=COUNT pairs such as "
                "'ps=1,worker=3'.")
        if name.strip() in jobs:
            raise FormatError(f"--jobs {text!r} names job {name.strip()!r} twice.")
        jobs[name.strip()] = int(count)
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
        out[name] = _whole(count, f"jobs[{name!r}]", 1)
    return out


def _check_tasks_per_node(value: Any) -> Union[None, int, Dict[str, int]]:
    if value is None:
        return None
    if isinstance(value, Mapping):
        if not value:
            raise ResolutionError("tasks_per_node={}: expected {host: count} for each node.")
        return {check_host_name(h if isinstance(h, str) else "", what="tasks_per_node"):
                _whole(n, f"tasks_per_node[{h!r}]", 1) for h, n in value.items()}
    return _whole(value, "tasks_per_node", 1)


def _check_port_base(value: Any) -> PortBase:
    if isinstance(value, str) and value == AUTO:
        return AUTO
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 65535:
        raise ResolutionError(
            f"port_base={value!r}: expected a port number (int, 1..65535) or 'auto' (free "
            "ports picked on each node).")
    return value


def make_options(*, jobs: Any = None, port_base: Any = 8888, gpus_per_node: Any = None,
                 gpus_per_task: Any = None, tasks_per_node: Any = None, source: Any = "auto",
                 verify: Any = "auto", timeout: Any = 60.0) -> Options:
    """Returns checked Options.

    Raises:
      ResolutionError: an argument of the wrong type or out of range, naming it.
    """
    if source not in SOURCES:
        raise ResolutionError(f"source={source!r}: expected one of 'auto', 'slurm', 'mpi'.")
    if not (verify is True or verify is False or (isinstance(verify, str) and
                                                  verify == "auto")):
        raise ResolutionError(f"verify={verify!r}: expected 'auto', True or False.")
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or \
            not math.isfinite(timeout) or timeout <= 0:
        raise ResolutionError(f"timeout={timeout!r}: expected a number of seconds > 0.")
    return Options(
        jobs=_check_jobs(jobs),
        port_base=_check_port_base(port_base),
        gpus_per_node=None if gpus_per_node is None else _whole(gpus_per_node,
                                                                "gpus_per_node", 0),
        gpus_per_task=None if gpus_per_task is None else _whole(gpus_per_task,
                                                                "gpus_per_task", 0),
        tasks_per_node=_check_tasks_per_node(tasks_per_node),
        source=source, verify=verify, timeout=float(timeout))
