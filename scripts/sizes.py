"""Prints every module of the package (its subpackages too) with its line count, then its
longest functions: the limits of the style guide (a module about 350 lines at most, a function 40).

    python scripts/sizes.py            # mpi_resolver/
    python scripts/sizes.py DIR -n 10  # another directory, the 10 longest functions
"""

from __future__ import annotations

import argparse
import ast
from pathlib import Path
from typing import List, Tuple


def sizes(directory: Path) -> Tuple[List[Tuple[int, str]], List[Tuple[int, str]]]:
    """Returns ([(lines, module)], [(lines, 'module:function')]), longest functions first;
    a module is named by its path under ``directory`` (``gpus/lists.py``)."""
    modules, functions = [], []
    for path in sorted(directory.rglob("*.py")):
        text = path.read_text()
        name = path.relative_to(directory).as_posix()
        modules.append((len(text.splitlines()), name))
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                end = node.end_lineno or node.lineno
                functions.append((end - node.lineno + 1, f"{name}:{node.name}"))
    return modules, sorted(functions, reverse=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("directory", nargs="?", default="mpi_resolver")
    parser.add_argument("-n", type=int, default=6, help="how many functions (default 6)")
    args = parser.parse_args()
    modules, functions = sizes(Path(args.directory))
    for lines, name in modules:
        print(f"{lines:5d}  {name}")
    print(f"longest module: {max(modules)[0]} lines; longest functions:")
    for lines, name in functions[:args.n]:
        print(f"{lines:5d}  {name}")


if __name__ == "__main__":
    main()
