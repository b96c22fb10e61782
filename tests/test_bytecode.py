"""scripts/test.sh compiles the checkout's bytecode before the suite: every Python process of
the suite (hundreds of TensorFlow workers and ranks, each importing the package) reads it
instead of compiling the sources it imports, as an installed package's would be read."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
VENVS = (".venv", ".venv-tf215", ".venv-jax", ".venv-mpich", ".venv-impi", ".venv-plot")


def stale(sources: list) -> list:
    """Returns those of ``sources`` without bytecode matching them (their cache_from_source
    file missing, or older than the source)."""
    missing = []
    for source in sources:
        cached = Path(importlib.util.cache_from_source(str(source)))
        if not cached.exists() or cached.stat().st_mtime < source.stat().st_mtime:
            missing.append(str(source.relative_to(ROOT)))
    return missing


@pytest.mark.parametrize("folder", ["mpi_resolver", "examples", "benchmarks"])
def test_the_suite_runs_on_the_checkout_s_bytecode(folder: str) -> None:
    missing = stale(sorted((ROOT / folder).rglob("*.py")))
    assert not missing, (f"{len(missing)} of {folder}'s modules have no bytecode, e.g. "
                         f"{missing[:3]}: run the suite by `bash scripts/test.sh`, which "
                         "compiles it first")


def test_every_virtualenv_reads_that_bytecode() -> None:
    """The files carry this Python's cache tag; a virtualenv of another Python would compile
    every module again in every process."""
    tags = {}
    for venv in VENVS:
        python = ROOT / venv / "bin" / "python"
        if not python.exists():
            pytest.fail(f"{python} is missing: run `bash scripts/test.sh`, which makes it")
        tags[venv] = subprocess.run([str(python), "-c", "import sys; "
                                     "print(sys.implementation.cache_tag)"],
                                    capture_output=True, text=True, timeout=60).stdout.strip()
    assert set(tags.values()) == {sys.implementation.cache_tag}, tags
