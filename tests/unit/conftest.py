"""Unit tests never listen on this machine's ports: the resolution's SocketPorts is replaced
by one where every port is free (tests of the ports pass their own, or use ports.SocketPorts
itself)."""

from __future__ import annotations

import pytest

from mpi_resolver import _resolution as resolution


class AllFree:
    """ports.Ports where every port is free."""

    def hold(self, port: int):
        return lambda: None

    def ours(self, port: int) -> bool:
        return False


@pytest.fixture(autouse=True)
def _all_ports_free(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(resolution, "SocketPorts", AllFree)
