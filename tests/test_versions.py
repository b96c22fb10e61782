"""The oldest supported versions, in their own virtualenv (.venv-tf215: TensorFlow 2.15.1,
mpi4py 4.1.0, made by scripts/setup_versions.sh): the TensorFlow tests (tests/tf and the unit
tests that import TensorFlow) and the real-mpirun tests, and one real two-worker training run
with each way of training."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import List

import pytest

from tests.test_mpirun import mpirun_env

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parent.parent
OLDEST = ROOT / ".venv-tf215" / "bin" / "python"
#: At least this many pass there: 192 on 2026-11-29 (tests/tf and test_mpirun.py 142, the
#: step watchdog's unit tests 50).
PASSED = 180
IMPORTS_TENSORFLOW = re.compile(r"^\s*(import|from) tensorflow\b", re.M)


@pytest.fixture(scope="module")
def oldest() -> str:
    """The oldest-versions virtualenv's python; fails (never skips) where it is missing."""
    if not OLDEST.exists():
        pytest.fail(f"{OLDEST} is missing: run `bash scripts/setup_versions.sh` (the README's "
                    "test command runs it)")
    out = subprocess.run([str(OLDEST), "-c", "import tensorflow as tf, mpi4py; "
                          "print(tf.__version__, mpi4py.__version__)"],
                         capture_output=True, text=True, timeout=120).stdout.split()
    assert out == ["2.15.1", "4.1.0"], out
    return str(OLDEST)


def tensorflow_unit_tests() -> List[str]:
    """Returns the unit test files that import TensorFlow themselves. The others test the
    pure core with fakes: neither TensorFlow's version nor mpi4py's reaches them, and the
    suite runs them on the newest."""
    files = sorted((ROOT / "tests" / "unit").rglob("test_*.py"))
    found = [str(f.relative_to(ROOT)) for f in files if IMPORTS_TENSORFLOW.search(f.read_text())]
    assert found, "no unit test file imports TensorFlow: the pattern went stale"
    return found


def test_oldest_versions_pass_tensorflow_parity_and_mpirun_tests(oldest: str) -> None:
    """tests/tf (parity, GPUs, long jobs: TensorFlow's own), the unit tests that import
    TensorFlow, and the real mpirun runs (mpi4py's). 595 s on CI with every unit test too,
    1,200 s not enough there on a day twice as slow (2026-11-29)."""
    proc = subprocess.run([oldest, "-m", "pytest", "-q", "--color=no", "-p", "no:cacheprovider",
                           *tensorflow_unit_tests(), "tests/tf", "tests/test_mpirun.py"],
                          capture_output=True, text=True, timeout=1200, cwd=ROOT,
                          env={k: v for k, v in mpirun_env().items()
                               if k != "MPI_RESOLVER_ALLOW_SKIP"})  # a skip fails there too
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-6000:]
    summary = [ln for ln in out.splitlines() if re.search(r"\d+ passed", ln)]
    assert summary and "failed" not in summary[-1], out[-3000:]
    assert int(re.search(r"(\d+) passed", summary[-1]).group(1)) >= PASSED, summary[-1]


@pytest.mark.parametrize("extra", [pytest.param([], id="custom loop"),
                                   pytest.param(["--fit"], id="fit with tf.keras (Keras 2)")])
def test_oldest_versions_train_two_workers(oldest: str, extra: list) -> None:
    """mpirun -n 2 examples/train.py under TensorFlow 2.15: MultiWorkerMirroredStrategy over
    MPIClusterResolver; with --fit, TensorFlow 2.15's own tf.keras (Keras 2) model.fit."""
    proc = subprocess.run(["timeout", "-k", "5", "300", "mpirun", "-n", "2", oldest,
                           "examples/train.py", "--epochs", "2", "--steps-per-epoch", "20",
                           "--port-base", "23456", *extra],
                          capture_output=True, text=True, timeout=330, cwd=ROOT,
                          env=mpirun_env())
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:]
    accuracy = [float(v) for v in re.findall(r"final test accuracy: ([0-9.]+)", out)]
    assert len(accuracy) == 1 and accuracy[0] > 0.8, out[-3000:]
    assert ("model.fit, Keras 2.15" in out) == bool(extra), out[-2000:]
