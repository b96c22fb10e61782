"""The release: what `pip install mpi_resolver` gives a user, and the lint and type checks.

Each test runs one step of scripts/check_release.sh (the script a maintainer runs by hand),
so that each step counts on its own in the summary: the sdist and wheel build and pass
`twine check --strict`; the wheel ships py.typed and the licence; the wheel alone, installed in a
fresh virtualenv without TensorFlow or mpi4py, gives a working `mpi-resolver`; `ruff check`;
`mypy mpi_resolver`; the import contract (lint-imports), which a wrong import breaks. A missing
tool (build, twine, ruff, mypy, import-linter) fails its test, never skips it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import mpi_resolver
from tests.docs.blocks import block

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "check_release.sh"

pytestmark = pytest.mark.release


def check_release(*steps: str, dist: Path, timeout: float = 600) -> str:
    """Runs the steps with this interpreter's virtualenv's tools; fails unless they pass."""
    env = dict(os.environ, MPI_RESOLVER_DIST=str(dist), MPI_RESOLVER_VENV=sys.prefix)
    proc = subprocess.run(["bash", str(SCRIPT), *steps], capture_output=True, text=True,
                          timeout=timeout, cwd=ROOT, env=env, stdin=subprocess.DEVNULL)
    out = proc.stdout + proc.stderr
    if proc.returncode != 0:
        pytest.fail(f"scripts/check_release.sh {' '.join(steps)} exited {proc.returncode}:\n"
                    f"{out}", pytrace=False)
    for step in steps:
        assert f"check_release: {step} ok" in out, out
    return out


@pytest.fixture(scope="module")
def dist(tmp_path_factory) -> Path:
    """The built sdist and wheel (built once for this module, by the first test that asks)."""
    directory = tmp_path_factory.mktemp("dist")
    check_release("build", dist=directory)
    return directory


def test_sdist_and_wheel_build_and_pass_twine_check_strict(dist):
    version = mpi_resolver.__version__
    names = sorted(p.name for p in dist.iterdir())
    assert names == [f"mpi_resolver-{version}-py3-none-any.whl",
                     f"mpi_resolver-{version}.tar.gz"], names


def test_wheel_has_py_typed_and_licence_and_the_extras(dist):
    out = check_release("contents", dist=dist)
    assert "mpi_resolver/py.typed" in out and "LICENSE" in out, out
    assert "tf = ['tensorflow>=" in out and "tf-cpu = ['tensorflow-cpu>=" in out, out


def test_wheel_alone_in_a_fresh_venv_gives_a_working_command_line(dist):
    out = check_release("install", dist=dist)
    assert "no TensorFlow, no mpi4py" in out, out


def test_ruff_check_finds_nothing(tmp_path):
    check_release("ruff", dist=tmp_path)


def test_mypy_finds_nothing_in_the_package(tmp_path):
    check_release("mypy", dist=tmp_path)


def test_the_import_contract_holds(tmp_path):
    """lint-imports: the layers, the long-job core, its TensorFlow edge, and the four
    protected libraries (pyproject.toml)."""
    out = check_release("imports", dist=tmp_path)
    assert "lint-imports: 7 kept, 0 broken" in out, out


def _broken_contract(tmp_path, module: str, line: str) -> str:
    """Returns check_release's output for a copy of the package with ``line`` added to
    ``module`` (a path under mpi_resolver/), after asserting that the step failed."""
    copy = tmp_path / "copy"
    shutil.copytree(ROOT / "mpi_resolver", copy / "mpi_resolver")
    shutil.copy(ROOT / "pyproject.toml", copy)
    with open(copy / "mpi_resolver" / module, "a") as source:
        source.write(line + "  # noqa: E402,F401\n")
    env = dict(os.environ, MPI_RESOLVER_DIST=str(tmp_path), MPI_RESOLVER_VENV=sys.prefix,
               IMPORTS_ROOT=str(copy))
    proc = subprocess.run(["bash", str(SCRIPT), "imports"], capture_output=True, text=True,
                          timeout=120, cwd=ROOT, env=env, stdin=subprocess.DEVNULL)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out
    assert "check_release: imports FAILED: lint-imports: the import contract is broken" in out
    return out


def test_a_wrong_import_breaks_the_import_contract(tmp_path):
    """The core importing the MPI exchange fails the step, naming the layers and the import
    as the README's development section shows them."""
    out = _broken_contract(tmp_path, "core/values.py",
                           "from mpi_resolver.exchange import transport")
    for line in block("readme-wrong-import").splitlines():  # as the README shows it
        assert line.strip() in out, (line, out)


@pytest.mark.parametrize("module, line, said", [
    # the two framework edges side by side: neither imports the other
    ("tensorflow/quirks.py", "from mpi_resolver.jax import termination",
     "mpi_resolver.tensorflow.quirks -> mpi_resolver.jax.termination"),
    ("jax/arguments.py", "from mpi_resolver.tensorflow import checkpoints",
     "mpi_resolver.jax.arguments -> mpi_resolver.tensorflow.checkpoints"),
    # the long-job core: no framework, no edge above it
    ("long_jobs/interval.py", "import tensorflow",
     "mpi_resolver.long_jobs.interval -> tensorflow"),
    ("long_jobs/schedule.py", "from mpi_resolver.tensorflow import checkpoints",
     "mpi_resolver.long_jobs.schedule -> mpi_resolver.tensorflow.checkpoints"),
    # the TensorFlow edge needs no resolution
    ("tensorflow/quirks.py", "from mpi_resolver.resolve import plan",
     "mpi_resolver.tensorflow.quirks -> mpi_resolver.resolve.plan"),
    # Orbax: the JAX edge's checkpoint files alone
    ("jax/long_jobs.py", "import orbax.checkpoint",
     "mpi_resolver.jax.long_jobs -> orbax"),
])
def test_the_long_jobs_layers_bite(tmp_path, module, line, said):
    out = _broken_contract(tmp_path, module, line)
    assert said in out, out
