"""scripts/mutmut_only.py: which package files a `mutmut run PATTERN` mutates (only those whose
mutants the patterns can name), and which arguments are patterns."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))

import mutmut_only  # noqa: E402 - scripts/ is not a package

FILES = ["mpi_resolver/core/values.py", "mpi_resolver/core/values_more.py",
         "mpi_resolver/core/hosts.py", "mpi_resolver/long_jobs/policy.py"]


@pytest.mark.parametrize("pattern, module, named", [
    ("mpi_resolver.core.values*", "mpi_resolver.core.values", True),
    ("mpi_resolver.core.values*", "mpi_resolver.core.values_more", True),
    ("mpi_resolver.core.values*", "mpi_resolver.core.hosts", False),
    ("mpi_resolver.core.*", "mpi_resolver.core.hosts", True),
    ("mpi_resolver.core.*", "mpi_resolver.long_jobs.policy", False),
    # a function's mutants: the module's name and a dot start the pattern
    ("mpi_resolver.core.values.x_check_whole__mutmut_1", "mpi_resolver.core.values", True),
    ("mpi_resolver.core.values.x_check*", "mpi_resolver.core.values", True),
    ("mpi_resolver.core.values.x_check*", "mpi_resolver.core.values_more", False),
    ("mpi_resolver.core.valuesx*", "mpi_resolver.core.values", False),
    ("mpi_resolver.core.values", "mpi_resolver.core.values", True),
    ("*", "mpi_resolver.core.values", True),
    ("mpi_resolver.core.value?", "mpi_resolver.core.values", True),
    ("mpi_resolver.core.v[a]lues*", "mpi_resolver.core.values", True),
    ("mpi_resolver.core.v[a]lues*", "mpi_resolver.long_jobs.policy", False),
])
def test_a_pattern_names_a_module(pattern, module, named):
    assert mutmut_only.may_name(pattern, module) is named


@pytest.mark.parametrize("patterns, files", [
    (["mpi_resolver.core.values*"], FILES[:2]),
    (["mpi_resolver.core.hosts*", "mpi_resolver.long_jobs.*"], FILES[2:]),
    (["mpi_resolver.nothing*"], []),
    ([], []),
])
def test_the_files_mutated(patterns, files):
    assert mutmut_only.files_for(patterns, FILES) == files


@pytest.mark.parametrize("path, module", [
    ("mpi_resolver/core/values.py", "mpi_resolver.core.values"),
    ("mpi_resolver/__init__.py", "mpi_resolver.__init__"),
])
def test_a_file_s_module(path, module):
    assert mutmut_only.module_of(path) == module


@pytest.mark.parametrize("argv, patterns", [
    (["run", "mpi_resolver.core.values*"], ["mpi_resolver.core.values*"]),
    (["run", "--max-children", "2", "a*", "b*"], ["a*", "b*"]),
    (["run", "a*", "--max-children", "2"], ["a*"]),
    (["run", "--max-children=2", "a*"], ["a*"]),
    (["run"], []),
    (["show", "a*"], []),
    ([], []),
])
def test_the_patterns_of_a_command_line(argv, patterns):
    assert mutmut_only.patterns_of(argv) == patterns


def test_the_package_files_are_the_checkout_s():
    files = mutmut_only.package_files()
    assert "mpi_resolver/core/values.py" in files and files == sorted(files)
    assert all(f.startswith("mpi_resolver/") and f.endswith(".py") for f in files)
