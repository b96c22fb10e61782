"""Missing dependencies, and what the package may touch: no shell, no files, one variable."""

from __future__ import annotations

import os
import pathlib
import re
import subprocess
import sys

import pytest

from mpi_resolver.errors import MissingDependencyError, ResolutionError

pytestmark = pytest.mark.unit
ROOT = pathlib.Path(__file__).resolve().parents[2]
SOURCE = {p.name: p.read_text() for p in (ROOT / "mpi_resolver").glob("*.py")}


def test_import_starts_neither_tensorflow_nor_mpi():
    code = ("import sys, mpi_resolver; from mpi_resolver import ResolutionError; "
            "print('tensorflow' in sys.modules, 'mpi4py' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=dict(os.environ, PYTHONPATH=str(ROOT)), check=True).stdout
    assert out.split() == ["False", "False"]


def test_missing_mpi4py_says_what_to_install(monkeypatch):
    from mpi_resolver import mpi

    monkeypatch.setitem(sys.modules, "mpi4py", None)  # makes `from mpi4py import MPI` fail
    with pytest.raises(MissingDependencyError, match="pip install mpi4py") as info:
        mpi.import_mpi()
    assert isinstance(info.value, ResolutionError) and isinstance(info.value, ImportError)


def test_missing_tensorflow_says_what_to_install(tmp_path):
    fake = tmp_path / "tensorflow"
    fake.mkdir()
    (fake / "__init__.py").write_text("raise ImportError('No module named tensorflow')")
    code = ("from mpi_resolver import MPIClusterResolver, MissingDependencyError\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=dict(os.environ, PYTHONPATH=f"{tmp_path}{os.pathsep}{ROOT}"))
    assert proc.returncode != 0
    assert "MissingDependencyError" in proc.stderr and "pip install tensorflow" in proc.stderr


@pytest.mark.parametrize("pattern", [r"shell\s*=\s*True", r"os\.system\(", r"os\.popen\(",
                                     r"os\.exec", r"open\([^)]*[\"'][wa]"])
def test_no_shell_and_no_files_are_written(pattern):
    hits = [name for name, text in SOURCE.items() if re.search(pattern, text)]
    assert hits == []


def test_the_only_subprocess_is_nvidia_smi_with_an_argument_list_and_a_timeout():
    calls = [(name, m.group(0)) for name, text in SOURCE.items()
             for m in re.finditer(r"subprocess\.\w+\([^)]*", text)]
    assert calls == [("gpus.py", 'subprocess.run(["nvidia-smi", "--list-gpus"], '
                                 'capture_output=True, text=True,\n                              '
                                 'timeout=timeout, check=False')]


def test_environment_writes_are_cuda_visible_devices_only():
    writes = [(name, m.group(0)) for name, text in SOURCE.items()
              for m in re.finditer(r"os\.environ\[[^\]]+\]\s*=|os\.environ\.(update|setdefault|"
                                   r"pop)|os\.putenv|del os\.environ", text)]
    assert writes == [("resolver.py", "os.environ[_CVD] =")]
