"""The docs' mutation command, `bash scripts/mutation.sh MODULE`, run for real: a file of its
own, as the suite runs it as a pytest run of its own (scripts/side_by_side.py) at the lowest
CPU priority, beside everything else."""

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
    """bash scripts/mutation.sh "mpi_resolver.core.values*": mutmut over one module, its score
    printed and every survivor killed or explained (exit 0). mutmut runs every unit and
    TensorFlow test twice before the module's mutants: 500-610 s measured in the suite.

    It runs at the lowest CPU priority (nice 19), as batch work: it keeps both cores busy for
    those minutes, and beside it (load average 17-18) the 4 ranks of a step of
    tests/cluster/test_gpu_binding.py did not get the CPU to import TensorFlow within 120 s
    (still importing at 60 s, 1,776 times preempted, twice asleep). mutmut's limits are on
    CPU time, which the priority does not change; the wall time may grow, hence 1,500 s."""
    proc = subprocess.run([*shlex.split(command("mutation", "bash scripts/mutation.sh")),
                           "mpi_resolver.core.values*"],
                          capture_output=True, text=True, timeout=1500, cwd=ROOT,
                          stdin=subprocess.DEVNULL, preexec_fn=lambda: os.nice(19))
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    score = re.search(r"score: (\d+) of (\d+) other mutants killed = ([\d.]+) %", proc.stdout)
    assert score and int(score.group(2)) > 0 and float(score.group(3)) >= 95, proc.stdout
