"""tests/harness/cpu_usage.py, the plugin that measures each test's CPU: its cgroup entered
and left (a directory standing for cgroup v1's cpuacct hierarchy), the refusals (none to
make, a pytest a measured test started), the report's lines, and a real pytest run with the
plugin, which says where it measured or why not."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.docs.blocks import command
from tests.harness.cpu_usage import Lane, report

ROOT = Path(__file__).resolve().parents[2]


def cgroups(tmp_path: Path, cpuacct: str) -> Path:
    path = tmp_path / "cgroup"
    path.write_text(f"4:memory:/x\n2:cpuacct:{cpuacct}\n0::/\n")
    return path


def test_a_lane_is_entered_measured_and_left(tmp_path: Path) -> None:
    root = tmp_path / "cpuacct"
    root.mkdir()
    lane = Lane(root)
    assert lane.enter(cgroups(tmp_path, "/")) is None
    assert lane.dir == root / f"mpir-cpu-{os.getpid()}"
    assert (lane.dir / "cgroup.procs").read_text() == str(os.getpid())
    (lane.dir / "cpuacct.usage").write_text("2500000000\n")
    assert lane.seconds() == 2.5
    (lane.dir / "cpuacct.usage").unlink()  # (a real cgroup's files go with it)
    (lane.dir / "cgroup.procs").unlink()
    lane.leave()
    assert (root / "cgroup.procs").read_text() == str(os.getpid()) and not lane.dir.exists()


def test_a_lane_with_a_process_left_in_it_stays(tmp_path: Path) -> None:
    root = tmp_path / "cpuacct"
    root.mkdir()
    lane = Lane(root)
    assert lane.enter(cgroups(tmp_path, "/")) is None
    lane.leave()  # its files stand for a process still in it: rmdir fails, quietly
    assert lane.dir.exists()


@pytest.mark.parametrize("where, says", [
    ("/mpir-cpu-12", "a test of a measured run started this one"),
    ("/", "cannot be made or entered"),  # no cpuacct hierarchy there
])
def test_where_a_lane_is_not_entered_it_says_why(tmp_path: Path, where: str,
                                                 says: str) -> None:
    lane = Lane(tmp_path / "missing")
    why = lane.enter(cgroups(tmp_path, where))
    assert why is not None and says in why
    assert not (tmp_path / "missing").exists()


def test_the_report_is_the_total_then_most_cpu_first() -> None:
    lines = report([(1.25, 10.0, "a"), (30.0, 31.0, "b"), (0.0, 2.0, "c")])
    assert lines == ["     31.2 s CPU in 3 tests (wall 43 s)",
                     "     30.0 s CPU     31.0 s wall  b",
                     "      1.2 s CPU     10.0 s wall  a",
                     "      0.0 s CPU      2.0 s wall  c"]


@pytest.mark.parametrize("plugins", [("tests.harness.cpu_usage",),
                                     ("tests.conftest",),  # the suite's: MPI_RESOLVER_CPU_LOG
                                     ("tests.conftest", "tests.harness.cpu_usage")])
def test_a_run_with_the_plugin_measures_a_child_s_cpu_or_says_why_not(tmp_path: Path,
                                                                      plugins: tuple) -> None:
    """A test whose child process burns CPU: where this machine has cgroup v1's cpuacct (and
    this run is not measured itself), the report gives it that CPU; elsewhere the run says why
    it did not measure, and passes. Asked for both ways at once, it measures once."""
    (tmp_path / "test_burn.py").write_text(
        "import subprocess, sys\n"
        "def test_burn():\n"
        "    subprocess.run([sys.executable, '-c', 'sum(range(10 ** 7))'], check=True)\n"
        "def test_idle():\n"
        "    pass\n")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "MPI_RESOLVER_CPU_LOG": str(tmp_path / "cpu"),
           "PYTEST_ADDOPTS": ""}
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           *(a for p in plugins for a in ("-p", p)),
                           "--rootdir", str(tmp_path),
                           str(tmp_path / "test_burn.py")], capture_output=True, text=True,
                          timeout=120, env=env, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.count("cpu usage") == 1, proc.stdout
    if "cpu usage: not measured:" in proc.stdout:
        assert not list(tmp_path.glob("cpu-*.txt")), proc.stdout
        return
    log, = tmp_path.glob("cpu-*.txt")
    lines = log.read_text().splitlines()
    assert lines[0].endswith("s CPU in 2 tests" + lines[0].split("tests", 1)[1])
    burn = float(lines[1].split()[0])
    assert lines[1].endswith("test_burn.py::test_burn") and burn >= 0.1, lines
    assert lines[2].endswith("test_burn.py::test_idle") and float(lines[2].split()[0]) < burn
    assert f"cpu usage (the whole list: {log}):" in proc.stdout


def test_the_docs_command_is_the_suite_s_with_the_variable_the_plugin_reads() -> None:
    """docs/development.md's command: the suite's own (README's), MPI_RESOLVER_CPU_LOG set
    (the variable tests/conftest.py and the plugin read: the real runs above set it)."""
    variable, suite = command("cpu-usage", "MPI_RESOLVER_CPU_LOG=").split(" ", 1)
    assert suite == command("setup", "bash scripts/test.sh")
    assert variable.split("=", 1) == ["MPI_RESOLVER_CPU_LOG", "/tmp/cpu"]
    conftest = (ROOT / "tests" / "conftest.py").read_text()
    assert 'os.environ.get("MPI_RESOLVER_CPU_LOG")' in conftest
