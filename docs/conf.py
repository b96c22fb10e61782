"""Sphinx configuration of mpi_resolver's documentation (MyST Markdown pages, the Furo theme).

Build (warnings are errors; -n: every cross-reference must resolve):

    .venv/bin/python -m sphinx -W --keep-going -n -b html docs docs/_build/html

tests/docs/test_build.py runs exactly that build into a temporary directory.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# autodoc documents this checkout's package, not another one installed in the environment.
sys.path.insert(0, str(ROOT))

project = "mpi_resolver"
author = "mpi_resolver's authors"
copyright = "the mpi_resolver authors, Apache-2.0"  # noqa: A001 (Sphinx's name)

extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",
]

source_suffix = {".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build"]

# MyST: anchors for headings down to ###, so that pages can link to a section
# ([Ports](placement.md#ports-two-jobs-on-one-node)); `{literalinclude}` and friends as fences.
myst_heading_anchors = 4
myst_enable_extensions = ["colon_fence"]

html_theme = "furo"
html_title = "mpi_resolver"

# The public names are documented from their Google-style docstrings (napoleon); the names
# are lazy attributes of the top package (they import TensorFlow on first use), which autodoc
# resolves like any attribute.
autodoc_member_order = "bysource"
autodoc_typehints = "description"
napoleon_google_docstring = True
napoleon_numpy_docstring = False

# Nitpicky (-n): every reference must resolve. The references below are to types of other
# projects without an inventory here (no intersphinx: the build runs offline), named in
# signatures and docstrings; each is a class of TensorFlow, mpi4py or the standard library.
nitpick_ignore_regex = [
    # TensorFlow's and tf_keras's classes that the public classes subclass or return
    # (SlurmClusterResolver, ClusterSpec, TerminationConfig, BackupAndRestore): no inventory.
    ("py:class", r"(tensorflow|tf_keras)\..*"),
    # The package's private types behind two public properties (the resolution, the policy):
    # not part of the documented API, their modules' paths are not promised.
    ("py:class", r"mpi_resolver\..*\.(Resolution|Policy)"),
]

