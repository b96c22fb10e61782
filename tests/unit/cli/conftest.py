"""The command line's unit tests' shared stand-ins."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.unit.cli.test_supervise import SRUN


@pytest.fixture
def srun(tmp_path: Path) -> Path:
    """srun's stand-in (tests/unit/cli/test_supervise.py's SRUN: its runs in runs.txt beside
    it)."""
    script = tmp_path / "srun"
    script.write_text(SRUN)
    script.chmod(0o755)
    return script
