"""The suite's rule: a test that would be skipped fails, in any run (tests/conftest.py), unless
MPI_RESOLVER_ALLOW_SKIP=1, which lists every skip loudly. Checked on a throw-away test file
run by a pytest of its own with the suite's conftest as a plugin."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

SKIPPING = '''
import pytest

def test_passes():
    pass

def test_skips_at_run_time():
    pytest.skip("no GPU here")

@pytest.mark.skipif(True, reason="not root")
def test_skipped_by_a_mark():
    pass

@pytest.mark.xfail(reason="known", strict=False)
def test_expected_to_fail():
    assert False
'''
SKIPPED_MODULE = '''
import pytest
pytest.skip("tool missing", allow_module_level=True)

def test_never_collected():
    pass
'''


def run_pytest(tmp_path: Path, source: str, allow: bool) -> subprocess.CompletedProcess:
    test = tmp_path / "test_sample.py"
    test.write_text(source)
    env = {k: v for k, v in os.environ.items() if k != "MPI_RESOLVER_ALLOW_SKIP"}
    # pytest cuts the short summary's lines to the terminal's width, except under CI (CI or
    # BUILD_NUMBER set): the inner run gets one width, and counts below avoid the summary
    env["COLUMNS"] = "80"
    if allow:
        env["MPI_RESOLVER_ALLOW_SKIP"] = "1"
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "tests.conftest", "-q",
                           "--color=no", "-p", "no:cacheprovider", "-rA", str(test)],
                          capture_output=True, text=True, timeout=120, cwd=ROOT, env=env)


def test_a_skip_fails_a_plain_run(tmp_path):
    p = run_pytest(tmp_path, SKIPPING, allow=False)
    assert p.returncode == 1, p.stdout
    # a run-time skip fails the test, a skip mark fails its setup (an error); xfail stands
    assert "1 failed, 1 passed, 1 xfailed, 1 error" in p.stdout, p.stdout
    # counted in the failures' own reports, which pytest never cuts (the summary below them is)
    reports = p.stdout.split("short test summary info")[0]
    assert reports.count("skipped, which fails this suite (set MPI_RESOLVER_ALLOW_SKIP=1") == 2
    assert "no GPU here" in p.stdout and "not root" in p.stdout
    assert "skipped: 0 (a skip fails this suite)" in p.stdout


def test_a_module_level_skip_fails_too(tmp_path):
    p = run_pytest(tmp_path, SKIPPED_MODULE, allow=False)
    assert p.returncode != 0, p.stdout
    assert "skipped, which fails this suite" in p.stdout and "tool missing" in p.stdout


@pytest.mark.parametrize("source, count, status", [
    pytest.param(SKIPPING, 2, 0, id="tests skipped"),
    pytest.param(SKIPPED_MODULE, 1, 5, id="a module skipped: pytest's 'no tests ran' (5)"),
])
def test_allowed_skips_are_listed_loudly(tmp_path, source, count, status):
    p = run_pytest(tmp_path, source, allow=True)
    assert p.returncode == status, p.stdout
    assert f"skipped: {count} (MPI_RESOLVER_ALLOW_SKIP=1: skips allowed)" in p.stdout
    assert p.stdout.count("SKIPPED, NOT TESTED: ") == count, p.stdout
