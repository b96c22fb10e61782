"""When two host names name one host (pure): the one rule every comparison of hosts uses.

Names are compared without regard to case. A short name and its fully qualified form are one
host (``node1`` and ``node1.cluster.org``); any other two different names are two hosts, even
when they share a first label (``hpc.n1`` and ``hpc.n2``), and IPv4 addresses (``10.0.0.1``)
are never shortened.
"""

from __future__ import annotations

from typing import Dict, Iterable, List, Optional


def _is_address(name: str) -> bool:
    """Returns True for a dotted all-digit name such as ``10.0.0.1``."""
    return all(label.isdigit() for label in name.split("."))


def _short_of(name: str) -> Optional[str]:
    """Returns the short name a lower-case qualified name stands for, or None (a short name
    already, or an address)."""
    if "." not in name or _is_address(name):
        return None
    return name.partition(".")[0]


def same_host(a: str, b: str) -> bool:
    """Returns True when ``a`` and ``b`` name the same host (see the module docstring)."""
    return HostIndex([a]).find(b) is not None


class HostIndex:
    """Finds, for any host name, the one of ``names`` that names the same host."""

    def __init__(self, names: Iterable[str]) -> None:
        self._exact: Dict[str, str] = {}
        self._short: Dict[str, str] = {}            # short name -> the name given
        self._qualified: Dict[str, List[str]] = {}  # short name -> qualified names given
        for name in names:
            low = name.lower()
            if low in self._exact:
                continue
            self._exact[low] = name
            short = _short_of(low)
            if short is not None:
                self._qualified.setdefault(short, []).append(name)
            elif "." not in low:
                self._short.setdefault(low, name)

    def find(self, name: str) -> Optional[str]:
        """Returns the given name that is the same host as ``name``, or None.

        A short name matches a qualified one only where exactly one qualified name has it.
        """
        low = name.lower()
        if low in self._exact:
            return self._exact[low]
        short = _short_of(low)
        if short is not None:
            return self._short.get(short)
        if "." in low:
            return None  # an address that is not among the names
        qualified = self._qualified.get(low, [])
        return qualified[0] if len(qualified) == 1 else None
