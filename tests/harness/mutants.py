"""Tests whose subprocesses import the package in mutmut's own copy of it (scripts/mutation.sh,
mutants/): every mutated module there imports mutmut's trampoline (mutmut 3: only the standard
library besides), which a Python other than the suite's (.venv-plot's, another user's) cannot
import. These put a copy of mutmut within their reach."""

from __future__ import annotations

import functools
import os
import shutil
import tempfile
from pathlib import Path
from typing import Dict, Mapping, Optional

_COPY: Optional[str] = None


@functools.lru_cache(maxsize=None)
def imports_mutmut(package: Path) -> bool:
    """Returns whether the package at ``package`` imports mutmut (mutmut's copy of it); read
    once a process (every test that plots asks)."""
    return any("from mutmut" in f.read_text() for f in package.rglob("*.py"))


def copy_mutmut(directory: str) -> None:
    """Copies the installed mutmut package, and its metadata (its __init__ reads its own
    version), into ``directory``."""
    import mutmut

    installed = Path(mutmut.__file__).parent
    shutil.copytree(installed, os.path.join(directory, "mutmut"),
                    ignore=shutil.ignore_patterns("__pycache__"))
    for meta in installed.parent.glob("mutmut-*.dist-info"):
        shutil.copytree(meta, os.path.join(directory, meta.name))


def with_mutmut(package: Path, env: Mapping[str, str]) -> Dict[str, str]:
    """Returns ``env`` with a copy of mutmut first on PYTHONPATH where the package at
    ``package`` imports it (made once a process); else ``env`` as it is."""
    global _COPY
    out = dict(env)
    if not imports_mutmut(package):
        return out
    if _COPY is None:
        _COPY = tempfile.mkdtemp(prefix="mpir-mutmut-")
        copy_mutmut(_COPY)
    out["PYTHONPATH"] = os.pathsep.join(p for p in (_COPY, env.get("PYTHONPATH")) if p)
    return out
