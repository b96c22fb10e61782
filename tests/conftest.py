"""Shared fixtures: a fake nvidia-smi, a clean resolver state, and the throw-away cluster."""

from __future__ import annotations

import os
import shutil
import stat
import sys
from pathlib import Path

import pytest
from hypothesis import settings

from mpi_resolver.network.proxies import NO_PROXY_VARIABLES, PROXY_VARIABLES

# Property tests draw the same examples on every run (derandomize: a seed from each test's
# own name), and replay none saved by an earlier run: a run of this suite never fails on an
# example that the run before it did not also see. To explore further, run with
# HYPOTHESIS_PROFILE=explore (random examples, as many more as the test's max_examples).
settings.register_profile("suite", derandomize=True, database=None)
settings.register_profile("explore", derandomize=False, database=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "suite"))

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def write_fake_nvidia_smi(directory: Path, gpus: int, mig: int = 0) -> str:
    """Writes an nvidia-smi that lists ``gpus`` GPUs into ``directory``, each with ``mig``
    MIG devices (lines as a real one prints them); returns the dir."""
    directory.mkdir(parents=True, exist_ok=True)
    script = directory / "nvidia-smi"
    lines = ""
    for i in range(gpus):
        lines += f"echo 'GPU {i}: Fake GPU (UUID: GPU-{i:08d}-0000-0000-0000-000000000000)'\n"
        lines += "".join(f"echo '  MIG 1g.5gb     Device  {j}: (UUID: {fake_mig(i, j)})'\n"
                         for j in range(mig))
    script.write_text("#!/bin/sh\n" + lines)
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return str(directory)


def fake_mig(gpu: int, device: int) -> str:
    """Returns the UUID write_fake_nvidia_smi gives MIG device ``device`` of GPU ``gpu``."""
    return f"MIG-{gpu:04d}{device:04d}-0000-0000-0000-000000000000"


class AllPortsFree:
    """ports.Ports where every port is free: the unit and TensorFlow-parity tests never listen
    on this machine's ports (another process, a Jupyter server on 8888 or another run of this
    suite, would make them fail). Tests of the ports pass their own Ports, or use
    _port_sockets.SocketPorts itself; the real port checks run in tests/cluster, on emulated
    nodes."""

    def hold(self, port: int):
        return lambda: None

    def ours(self, port: int) -> bool:
        return False


# A proxy set on the machine running the suite (CI behind one) would capture TensorFlow's gRPC
# between the suite's own workers (loopback, the test cluster's private bridge) and hang
# them, and make every `check` fail as it should: the suite's processes run without one.
# Tests of the proxy rules pass their variables themselves.
for _name in PROXY_VARIABLES + NO_PROXY_VARIABLES:
    os.environ.pop(_name, None)
    os.environ.pop(_name.upper(), None)


_NO_REAL_PORTS = (ROOT / "tests" / "unit", ROOT / "tests" / "tf")


def own_network(argv):
    """Returns ``argv`` run in a network namespace of its own with its loopback up (as root,
    ``unshare --net``): a command that checks ranks' ports for real (the default 8888) then
    meets no other process's listener (a Jupyter server on 8888, another run of this suite).
    Only for commands that need no network but loopback (mpirun on this host does)."""
    if os.geteuid() == 0 and shutil.which("unshare") and shutil.which("ip"):
        return ["unshare", "--net", "sh", "-c", 'ip link set lo up && exec "$0" "$@"', *argv]
    return list(argv)


@pytest.fixture(autouse=True)
def _all_ports_free(request, monkeypatch):
    """Replaces the resolution's SocketPorts with AllPortsFree in tests/unit and tests/tf."""
    path = Path(str(request.node.fspath)).resolve()
    if any(path.is_relative_to(d) for d in _NO_REAL_PORTS):
        from mpi_resolver.resolve import resolution as _resolution

        monkeypatch.setattr(_resolution, "SocketPorts", AllPortsFree)


@pytest.fixture(autouse=True)
def _fresh_resolver_state():
    """Forgets what earlier tests' resolvers wrote to CUDA_VISIBLE_DEVICES."""
    module = sys.modules.get("mpi_resolver.resolve.this_process")
    if module is not None:
        module._narrowed.clear()
    yield
    if module is not None:
        module._narrowed.clear()


# ------------------------------------------------------------------------------------------
# Nothing the README promises may silently not run: in any run of this suite (the README's
# test command, CI, a plain `pytest`, one file), a test that would be skipped fails instead,
# at collection or at run time. MPI_RESOLVER_ALLOW_SKIP=1 lets skips be skips (to try a part
# on a machine that lacks another); every one is then listed, loudly, at the end.
# ------------------------------------------------------------------------------------------

ALLOW = "MPI_RESOLVER_ALLOW_SKIP"


def _skips_allowed() -> bool:
    return os.environ.get(ALLOW) == "1"


def _fail_instead_of_skip(report) -> None:
    if not _skips_allowed() and report.skipped and not hasattr(report, "wasxfail"):
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else report.longrepr
        report.outcome = "failed"
        report.longrepr = (f"skipped, which fails this suite (set {ALLOW}=1 to allow skips): "
                           f"{reason}")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    _fail_instead_of_skip(outcome.get_result())


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector):
    outcome = yield
    _fail_instead_of_skip(outcome.get_result())


def pytest_configure(config):
    """With MPI_RESOLVER_CPU_LOG set, each test's CPU is measured (tests/harness/cpu_usage.py)."""
    if os.environ.get("MPI_RESOLVER_CPU_LOG"):
        from tests.harness.cpu_usage import register

        register(config)


def pytest_terminal_summary(terminalreporter):
    skipped = terminalreporter.stats.get("skipped", [])
    if not _skips_allowed():
        terminalreporter.write_line("skipped: 0 (a skip fails this suite)")
        return
    terminalreporter.write_line(f"skipped: {len(skipped)} ({ALLOW}=1: skips allowed)",
                                red=bool(skipped), bold=bool(skipped))
    for report in skipped:
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else report.longrepr
        terminalreporter.write_line(f"  SKIPPED, NOT TESTED: {report.nodeid}: {reason}",
                                    red=True)
