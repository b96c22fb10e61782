"""scripts/venv_stamp.sh, which scripts/setup_jax.sh, setup_versions.sh and setup_plot.sh
source: the stamp of what a virtualenv holds (a re-run whose stamp matches installs nothing),
and quietly (an install step's output only where it fails)."""

from __future__ import annotations

import hashlib
import subprocess
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[1]
HELPER = ROOT / "scripts" / "venv_stamp.sh"


def bash(script: Path, body: str) -> subprocess.CompletedProcess:
    """Runs ``body`` as the bash script ``script`` (its name is quietly's), the helper
    sourced; returns the finished process."""
    script.write_text(f"set -euo pipefail\nsource {HELPER}\n{body}\n")
    return subprocess.run(["bash", str(script)], capture_output=True, text=True, timeout=30)


def test_the_stamp_is_the_words_and_the_files_text(tmp_path):
    """The same value as the scripts' stamp before the helper: a matching virtualenv stays."""
    (tmp_path / "a").write_text("first file\n")
    (tmp_path / "b").write_text("second\n")
    out = bash(tmp_path / "s.sh", f"stamp_value 'jax==1 pytest' {tmp_path}/a {tmp_path}/b")
    text = "jax==1 pytest\nfirst file\nsecond\n"
    assert out.stdout.strip() == hashlib.sha1(text.encode()).hexdigest()[:16], out


@pytest.mark.parametrize("stamp, matches", [
    pytest.param(None, False, id="no stamp: a new virtualenv"),
    pytest.param("0123456789abcdef\n", False, id="another stamp: other packages"),
    pytest.param("fedcba9876543210\n", True, id="the same stamp"),
])
def test_a_virtualenv_matches_only_its_own_stamp(tmp_path, stamp, matches):
    if stamp is not None:
        (tmp_path / ".mpi_resolver-installed").write_text(stamp)
    out = bash(tmp_path / "s.sh", f"stamp_matches {tmp_path} fedcba9876543210 && echo yes || "
                                  "echo no")
    assert out.stdout.strip() == ("yes" if matches else "no"), out


def test_a_written_stamp_matches(tmp_path):
    out = bash(tmp_path / "s.sh", f"stamp_write {tmp_path} abc; stamp_matches {tmp_path} abc")
    assert out.returncode == 0 and (tmp_path / ".mpi_resolver-installed").read_text() == "abc\n"


@pytest.mark.parametrize("command, code, err", [
    pytest.param("echo pip said; echo 'WARNING: Location x'; exit 3", 1,
                 "pip said\nsetup_x: failed: bash -c echo pip said; echo 'WARNING: Location x'; "
                 "exit 3\n", id="a failure: its output, then the script's name"),
    pytest.param("echo quiet", 0, "", id="a success: nothing"),
])
def test_quietly_shows_a_step_s_output_only_where_it_fails(tmp_path, command, code, err):
    out = bash(tmp_path / "setup_x.sh", f'quietly bash -c "{command}"\necho went on')
    assert (out.returncode, out.stderr) == (code, err), out
    assert ("went on" in out.stdout) == (code == 0), out


@pytest.mark.parametrize("script", ["setup_jax.sh", "setup_versions.sh", "setup_plot.sh"])
def test_the_setup_scripts_use_the_helper(script):
    """One definition: no script keeps a stamp or quietly of its own."""
    text = (ROOT / "scripts" / script).read_text()
    assert "source scripts/venv_stamp.sh" in text and "stamp_write" in text, script
    assert ".mpi_resolver-installed" not in text and "quietly() {" not in text, script
