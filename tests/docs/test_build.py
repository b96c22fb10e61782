"""The documentation site builds (Sphinx, warnings as errors, every reference resolved) with
the command docs/development.md gives, into a temporary directory; the API page documents
every public name."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys

import pytest

import mpi_resolver
from tests.docs.blocks import ROOT, command

# Seconds, not milliseconds (Sphinx, and autodoc imports TensorFlow): a release check.
pytestmark = pytest.mark.release


def test_the_docs_build_without_warnings_and_document_every_public_name(tmp_path):
    argv = shlex.split(command("docs-build", ".venv/bin/python -m sphinx"))
    assert argv[-2:] == ["docs", "docs/_build/html"], argv
    assert command("readme-docs-build", ".venv/bin/python -m sphinx") == " ".join(argv)
    out = tmp_path / "html"
    argv = [sys.executable, *argv[1:-1], str(out)]  # this Python, this temporary directory
    proc = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=300,
                          env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-6000:]
    api = (out / "api.html").read_text()
    for name in mpi_resolver.__all__:
        assert f'id="mpi_resolver.{name}"' in api, name
    for page in ("getting-started", "gpu-cluster", "launchers", "rehearsal", "long-jobs",
                 "placement", "examples", "errors", "design", "development"):
        assert (out / f"{page}.html").is_file(), page
