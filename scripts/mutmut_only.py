"""`mutmut run`, where it is given mutant name patterns, mutating only the package files whose
mutants those patterns can name (scripts/mutation.sh):

    python scripts/mutmut_only.py run "mpi_resolver.core.values*"

mutmut 3 makes every mutant of the package before it runs the few a pattern selects (12,553
mutants of 74 files, about 60 CPU-s on 2 cores, for the 38 of one module). Here its
``only_mutate`` setting is given those files (the others are copied as they are, so the tests
still import them); pyproject.toml's [tool.mutmut] stays the whole run's. Without a pattern,
or with a command other than run, it is mutmut as installed.
"""

from __future__ import annotations

import dataclasses
import re
import sys
from pathlib import Path
from typing import Iterable, List, Sequence

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = "mpi_resolver"


def module_of(path: str) -> str:
    """Returns the module name of a package file's path relative to the checkout
    ('mpi_resolver/core/values.py' -> 'mpi_resolver.core.values')."""
    return path[:-len(".py")].replace("/", ".")


def may_name(pattern: str, module: str) -> bool:
    """Returns whether a mutant name pattern (mutmut's: 'module.function__mutmut_N' with
    fnmatch's wildcards) can match a mutant of ``module``: its text up to the first wildcard
    is the start of the module's name, or the module's name and a dot start that text."""
    literal = re.split(r"[*?\[]", pattern, maxsplit=1)[0]
    return module.startswith(literal) or literal.startswith(module + ".")


def files_for(patterns: Sequence[str], files: Iterable[str]) -> List[str]:
    """Returns those of ``files`` (paths relative to the checkout) that a pattern may name."""
    return [f for f in files if any(may_name(p, module_of(f)) for p in patterns)]


def package_files() -> List[str]:
    """Returns the package's Python files, relative to the checkout, sorted."""
    return sorted(str(p.relative_to(ROOT)) for p in (ROOT / PACKAGE).rglob("*.py"))


def patterns_of(argv: Sequence[str]) -> List[str]:
    """Returns the mutant name patterns of a `mutmut run` command line (none for another
    command)."""
    if not argv or argv[0] != "run":
        return []
    names, args = [], iter(argv[1:])
    for arg in args:
        if arg == "--max-children":  # its value follows
            next(args, None)
        elif not arg.startswith("-"):
            names.append(arg)
    return names


def main(argv: Sequence[str]) -> None:
    from mutmut import configuration
    from mutmut.__main__ import cli

    patterns = patterns_of(argv)
    only = files_for(patterns, package_files())
    if only:  # none: mutmut's own (an empty only_mutate would mutate every file anyway)
        configuration._config = dataclasses.replace(configuration.config(), only_mutate=only)
    sys.argv = ["mutmut", *argv]
    cli()


if __name__ == "__main__":
    main(sys.argv[1:])
