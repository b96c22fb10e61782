"""The docs' mutation command, `bash scripts/mutation.sh MODULE`, run for real with the
module's own tests selected (docs/development.md's quick form)."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
from pathlib import Path

import pytest

from tests.docs.blocks import command

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.slow
def test_mutation_script_on_one_module():
    """PYTEST_ADDOPTS="-k core" bash scripts/mutation.sh "mpi_resolver.core.values*": mutmut
    over one module with the tests of tests/unit/core selected, its score printed and every
    survivor killed or explained (exit 0). 24 s and 27 CPU-s alone (2026-11-30), since
    scripts/mutmut_only.py has mutmut make only the module's mutants (74 s and 109 CPU-s when
    it made all 12,553 first); with every unit and TensorFlow test selected, as mutmut runs
    them twice before the module's mutants, it took 334 s alone and up to 966 s in the suite,
    starving the clusters' TensorFlow start-ups beside it."""
    proc = subprocess.run([*shlex.split(command("mutation", "bash scripts/mutation.sh")),
                           "mpi_resolver.core.values*"],
                          capture_output=True, text=True, timeout=600, cwd=ROOT,
                          stdin=subprocess.DEVNULL,
                          env={**os.environ, "PYTEST_ADDOPTS": "-k core"})
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    score = re.search(r"score: (\d+) of (\d+) other mutants killed = ([\d.]+) %", proc.stdout)
    assert score and int(score.group(2)) > 0 and float(score.group(3)) >= 95, proc.stdout
