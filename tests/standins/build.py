"""Builds the tests' stand-in libraries with the machine's C compiler (Debian's gcc)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

HERE = Path(__file__).resolve().parent


def sigtaker(directory: Path) -> Path:
    """Returns libsigtaker.so (sigtaker.c) built into ``directory``; fails where no C compiler
    is installed (scripts/setup.sh installs gcc)."""
    compiler = shutil.which("cc") or shutil.which("gcc")
    assert compiler, "no C compiler: install gcc (bash scripts/setup.sh)"
    library = directory / "libsigtaker.so"
    subprocess.run([compiler, "-shared", "-fPIC", "-pthread", "-o", str(library),
                    str(HERE / "sigtaker.c")], check=True, capture_output=True, timeout=120)
    return library
