"""tests/harness/network_share, for real (root, sshfs): the bytes written and read through
the mount cross the share's link, every time (no page cache across opens); the link is held
to its rate; everything it made is gone after; bad rates and missing tools are named."""

from __future__ import annotations

import os
import re
import subprocess

import pytest

from tests.harness import network_share
from tests.harness.network_share import NetworkShare
from tests.harness.processes import ClusterError, alive

MIB = 2 ** 20


def link_bytes(share: NetworkShare) -> int:
    """Returns the bytes the share's link (its namespace's lo) has sent so far."""
    out = subprocess.run(["ip", "netns", "exec", share.netns, "tc", "-s", "qdisc", "show",
                          "dev", "lo"], capture_output=True, text=True, check=True).stdout
    return int(re.search(r"Sent (\d+) bytes", out).group(1))


def test_bytes_cross_the_link_each_way_and_each_time(tmp_path) -> None:
    data = os.urandom(4 * MIB)
    with NetworkShare(800, base=str(tmp_path)) as share:
        assert os.path.ismount(share.path) and share._mounted()
        qdisc = subprocess.run(["ip", "netns", "exec", share.netns, "tc", "qdisc", "show",
                                "dev", "lo"], capture_output=True, text=True).stdout
        assert "tbf" in qdisc and "rate 800Mbit" in qdisc, qdisc
        before = link_bytes(share)
        with open(os.path.join(share.path, "part"), "wb") as f:
            f.write(data)
        written = link_bytes(share)
        assert written - before >= len(data)
        with open(os.path.join(share.export, "part"), "rb") as f:
            assert f.read() == data  # it is in the served directory
        for _ in range(2):  # read twice: each open reads over the link again
            read_from = link_bytes(share)
            with open(os.path.join(share.path, "part"), "rb") as f:
                assert f.read() == data
            assert link_bytes(share) - read_from >= len(data)
        os.replace(os.path.join(share.path, "part"), os.path.join(share.path, "whole"))
        assert os.listdir(share.export) == ["whole"]
        made = (share.root, f"/run/netns/{share.netns}")
        pids = list(share._pids)
    assert not any(os.path.exists(p) for p in made)
    assert pids and not any(alive(p) for p in pids)


@pytest.mark.parametrize("rate", [0, -1])
def test_a_rate_below_one_is_refused(tmp_path, rate: int) -> None:
    with pytest.raises(ValueError, match=f"rate_mbit must be at least 1 Mbit/s, not {rate}"):
        NetworkShare(rate, base=str(tmp_path))


def test_the_least_rate_is_taken(tmp_path) -> None:
    share = NetworkShare(1, base=str(tmp_path))
    assert share.rate_mbit == 1
    share.stop()
    assert not os.path.exists(share.root)


def test_a_missing_tool_is_named_and_nothing_is_left(tmp_path, monkeypatch) -> None:
    real = network_share.shutil.which
    monkeypatch.setattr(network_share.shutil, "which",
                        lambda tool: None if tool == "sshfs" else real(tool))
    share = NetworkShare(100, base=str(tmp_path))
    with pytest.raises(ClusterError, match=r"needs \['sshfs'\]: run scripts/setup.sh"):
        with share:
            pass
    assert not os.path.exists(share.root) and not os.path.exists(f"/run/netns/{share.netns}")


@pytest.mark.parametrize("server, port, step, why", [
    ("/bin/true", "notaport", "sftp", "exited"),     # socat cannot listen there
    ("/bin/true", network_share.PORT, "the sshfs mount", "exited"),  # no sftp: sshfs ends
    ("sleeps", network_share.PORT, "the sshfs mount", "no answer"),  # sshfs waits for it
])
def test_a_server_that_never_answers_is_named(tmp_path, monkeypatch, server: str, port,
                                              step: str, why: str) -> None:
    if server == "sleeps":
        server = str(tmp_path / "sleeps")
        with open(server, "w") as f:
            f.write("#!/bin/sh\nexec sleep 60\n")
        os.chmod(server, 0o755)
    monkeypatch.setattr(network_share, "SFTP_SERVER", server)
    monkeypatch.setattr(network_share, "PORT", port)
    share = NetworkShare(100, base=str(tmp_path), timeout=2)
    with pytest.raises(ClusterError, match=rf"the shared file system's {step} did not come up "
                                           rf"within 2 s \({why}\)"):
        with share:
            pass
    assert not os.path.exists(share.root) and not os.path.exists(f"/run/netns/{share.netns}")
    assert not any(alive(p) for p in share._pids)
