"""Classes of mistake the docs (README.md, docs/*.md) must not make again, each checked against
the repository itself rather than a copied list:

- a repository path or module the docs name that does not exist (`mpi_resolver/_proxies.py`);
- a CLI exit status the docs list that the code never returns, or one it returns that the
  docs' table leaves out (the statuses are read from mpi_resolver/cli/'s code);
- a number the docs quote for a batch template (its `--signal` seconds, its grace period)
  that is not the template's own (`both templates carry USR1@120`);
- the private modules the example trainers import, against docs/design.md's list;
- which file (pyproject.toml, setup.cfg) holds which tool's settings, against
  docs/development.md's table, no tool in both, and mypy reading setup.cfg;
- the resolver's arguments as the smallest use and getting started give them, against its
  signature (four of the package's six were listed).
"""

from __future__ import annotations

import argparse
import ast
import importlib
import re
from pathlib import Path
from typing import Dict, Iterator, List, Optional, Set, Tuple

import pytest

from mpi_resolver.long_jobs import exits

from tests.docs.blocks import ROOT, block, parse, sources

pytestmark = pytest.mark.unit

PACKAGE = ROOT / "mpi_resolver"
#: The package's folders, which the docs also name without `mpi_resolver/` (`resolve/plan.py`).
FOLDERS = sorted(p.name for p in PACKAGE.iterdir() if (p / "__init__.py").is_file())
TOP = ("mpi_resolver", "examples", "tests", "scripts", "benchmarks", "docs")
TOP_FILES = ("pyproject.toml", "setup.cfg", "MANIFEST.in", "LICENSE")
_PATH = re.compile(r"(?<![\w./$<{-])((?:%s)/(?:[\w.*/-]|\{[\w.,]+\})*|(?:%s)(?![\w.-]))" % (
    "|".join(TOP + tuple(FOLDERS)), "|".join(re.escape(f) for f in TOP_FILES)))
_MODULE = re.compile(r"(?<![\w./])mpi_resolver(?:\.\w+)+(?!\w)")
#: Files named like a module (`DIR/mpi_resolver.json`, the checkpoint's manifest).
_FILE_ENDINGS = ("json", "py", "toml", "cfg", "md", "txt")
_LINK = re.compile(r"\]\(([^)\s#]+)(?:#[^)]*)?\)")
TEMPLATES = ("train.sbatch", "train_gpu.sbatch")


# ------------------------------------------------------------------ repository paths
def named_paths(text: str) -> Iterator[str]:
    """Yields every repository path ``text`` names: folders and files of the repository
    (`examples/train.py`, `tests/unit/`), the package's folders without `mpi_resolver/`
    (`resolve/plan.py`, `tensorflow/termination_config`), and the top-level files."""
    for m in _PATH.finditer(text):
        yield m.group(1).rstrip(".,:;")


def path_exists(path: str) -> bool:
    """True where ``path`` (as the docs write it) is in the repository: as a file, a folder,
    a module without its `.py`, or a glob that matches; a package folder's path also under
    mpi_resolver/. The docs' build output (docs/_build) is not in the repository."""
    if path.startswith("docs/_build"):
        return True
    braces = re.search(r"\{([\w.,]+)\}", path)
    if braces:  # latest.{json,md}: each of them
        return all(path_exists(path[:braces.start()] + choice + path[braces.end():])
                   for choice in braces.group(1).split(","))
    roots = [ROOT] + ([PACKAGE] if path.split("/")[0] in FOLDERS else [])
    for root in roots:
        if "*" in path and any(root.glob(path)):
            return True
        target = root / path
        if target.exists() or target.with_name(target.name + ".py").is_file():
            return True
    return False


def defines(module: Path, name: str) -> bool:
    """True where the module file defines ``name`` (def, class, assignment) or names it in
    a string (``__all__``, the top package's lazy names)."""
    return bool(re.search(rf"""(def |class |^){name}\b|["']{name}["']""", module.read_text(),
                          re.M))


def module_exists(dotted: str) -> bool:
    """True where ``dotted`` (`mpi_resolver.long_jobs.signals`, `mpi_resolver.Name`,
    `mpi_resolver.long_jobs.signals.parse_signal`) names a module of the package, or a name
    that its module defines or exports."""
    parts = dotted.split(".")
    where = ROOT / parts[0]
    for i, part in enumerate(parts[1:], 1):
        if (where / part / "__init__.py").is_file():
            where = where / part
        elif (where / f"{part}.py").is_file():
            rest = parts[i + 1:]
            return not rest or defines(where / f"{part}.py", rest[0])
        else:
            return defines(where / "__init__.py", part)
    return True


def missing_paths(path: Path) -> List[str]:
    """Returns what ``path`` (a docs file) names that is not in the repository, as
    'file:line: name'."""
    missing = []
    for number, line in enumerate(path.read_text().splitlines(), 1):
        where = f"{path.relative_to(ROOT)}:{number}"
        missing += [f"{where}: {p}" for p in named_paths(line) if not path_exists(p)]
        missing += [f"{where}: {m}" for m in _MODULE.findall(line)
                    if m.rsplit(".", 1)[1] not in _FILE_ENDINGS and not module_exists(m)]
        for target in _LINK.findall(line):
            if not re.match(r"[a-z]+:", target) and not (path.parent / target).exists():
                missing += [f"{where}: link {target}"]
    return missing


@pytest.mark.parametrize("doc", sources(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_repository_path_the_docs_name_exists(doc):
    assert not missing_paths(doc), (
        "the docs name paths, modules or links that are not in the repository:\n"
        + "\n".join(missing_paths(doc)))


@pytest.mark.parametrize("text, names", [
    ("see `mpi_resolver/network/proxies.py` and resolve/plan.py.",
     ["mpi_resolver/network/proxies.py", "resolve/plan.py"]),
    ("(tests/cluster/test_long_jobs.py, every case", ["tests/cluster/test_long_jobs.py"]),
    ("writes benchmarks/results/latest.{json,md}", ["benchmarks/results/latest.{json,md}"]),
    ("`pyproject.toml`'s `[tool.importlinter]`", ["pyproject.toml"]),
    ("`DIR/chief`, `$CHECKPOINT_ROOT/<job>`, /etc/hosts, `.venv/bin/python`", []),
])
def test_what_counts_as_a_repository_path(text, names):
    assert list(named_paths(text)) == names


@pytest.mark.parametrize("name, exists", [
    ("mpi_resolver/network/proxies.py", True), ("mpi_resolver/_proxies.py", False),
    ("tensorflow/termination_config", True), ("long_jobs/tf_config", False),
    ("mpi_resolver/*/__init__.py", True), ("docs/_build/html", True),
    ("mpi_resolver/{core,cli}/__init__.py", True), ("mpi_resolver/{core,nope}/", False),
])
def test_which_paths_exist(name, exists):
    assert path_exists(name) is exists


@pytest.mark.parametrize("name, exists", [
    ("mpi_resolver.long_jobs.signals", True), ("mpi_resolver._proxies", False),
    ("mpi_resolver.MPIClusterResolver", True), ("mpi_resolver.NoSuchName", False),
    ("mpi_resolver.placement.addresses", True),
    ("mpi_resolver.long_jobs.signals.parse_signal", True),
    ("mpi_resolver.long_jobs.signals.no_such_function", False),
])
def test_which_modules_exist(name, exists):
    assert module_exists(name) is exists


# ------------------------------------------------------------------ CLI exit statuses
#: Functions of mpi_resolver/cli/ that return an int other than an exit status.
_NOT_STATUS = ("_wait",)


def _literal_returns(tree: ast.AST, module: object) -> Tuple[Set[int], bool]:
    """Returns (the statuses ``tree`` exits with as literals or module constants: `return 2`,
    `return REQUEUED_EXIT`, `_failed(1, ...)`, `sys.exit(3)`, `os._exit(3)`; whether it also
    returns a status it did not spell: `return decision.status`)."""
    found: Set[int] = set()
    passed_on = False

    def value(node: Optional[ast.AST]) -> Optional[int]:
        if isinstance(node, ast.Constant) and isinstance(node.value, int) \
                and not isinstance(node.value, bool):
            return node.value
        if isinstance(node, ast.Name) and isinstance(getattr(module, node.id, None), int):
            return getattr(module, node.id)
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) \
                and node.value.id == "exits":  # long_jobs.exits' statuses, defined once
            return getattr(exits, node.attr)
        return None

    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            name = getattr(node.func, "attr", None) or getattr(node.func, "id", None)
            if name in ("_failed", "exit", "_exit") and node.args:
                v = value(node.args[0])
                if v is not None:
                    found.add(v)
    for fn in (n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)):
        if fn.returns is None or ast.unparse(fn.returns) != "int" or fn.name in _NOT_STATUS:
            continue  # only functions that return an exit status
        for ret in (n for n in ast.walk(fn) if isinstance(n, ast.Return)):
            if ret.value is None:
                continue
            v = value(ret.value)
            if v is not None:
                found.add(v)
            elif not isinstance(ret.value, (ast.Call, ast.Name)):
                passed_on = True  # `decision.status`: another process's status, passed on
            # a call's status is counted where it is made; a local name holds one of those
    return found, passed_on


def code_statuses() -> Dict[str, Set[str]]:
    """Returns {command group: the exit statuses its code returns ('N': a status it passes
    on)}, read from mpi_resolver/cli/: main.py's for show, check, tf-config and exec
    (argparse's own usage error included); report.py's for report and status; for
    supervise, its own modules' (main.py returns supervise's call, counted there), the
    restart policy's rows and every status of long_jobs/exits its rules name (the decision
    is the policy's: supervise passes it on)."""
    from mpi_resolver.cli import args, main, report, supervise, supervise_requeue
    from mpi_resolver.long_jobs import policy

    out: Dict[str, Set[str]] = {}
    for group, modules in (("main", [main]), ("supervise", [supervise, supervise_requeue]),
                           ("report", [report])):
        out[group] = set()
        for module in modules:
            numbers, passed_on = _literal_returns(
                ast.parse(Path(module.__file__).read_text()), module)
            out[group] |= {str(n) for n in numbers} | ({"N"} if passed_on else set())
    rules = ast.parse(Path(policy.__file__).read_text())
    out["supervise"] |= {str(getattr(exits, n.attr)) for n in ast.walk(rules)
                         if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name)
                         and n.value.id == "exits"}
    out["supervise"] |= {str(row.status) for row in policy.ROWS if row.status is not None}
    out["supervise"] |= {"N"} if any(row.status is None for row in policy.ROWS) else set()
    try:
        args.parse_args(["--no-such-option"])
    except SystemExit as e:  # argparse's usage error
        out["main"].add(str(e.code))
    return out


def doc_statuses(text: str) -> Dict[str, Set[str]]:
    """Returns {command group: the statuses listed} from the docs' table of exit statuses (a
    line per group, `mpi-resolver supervise:`, then `  STATUS  what it means` lines)."""
    out: Dict[str, Set[str]] = {}
    group = None
    for line in text.splitlines():
        if line.startswith("mpi-resolver "):
            group = next((g for g in ("supervise", "report") if g in line), "main")
            out[group] = set()
        m = re.match(r"  (\d+|N)  ", line)
        if m and group:
            out[group].add(m.group(1))
    return out


def test_the_exit_statuses_the_docs_list_are_the_code_s_and_the_reverse():
    listed = doc_statuses(block("exit-statuses"))
    returned = code_statuses()
    assert set(listed) == {"main", "supervise", "report"}, listed
    for group in ("main", "supervise", "report"):
        assert listed[group] == returned[group], (
            f"{group}: the docs list {sorted(listed[group])}, the code returns "
            f"{sorted(returned[group])} (docs/getting-started.md, 'Exit statuses')")


def test_the_docs_name_only_statuses_the_command_line_returns():
    """Sentences of the pages about `mpi-resolver`'s own statuses ("exits 1", "the exit
    status is 1") name one the code returns."""
    main = code_statuses()["main"]
    for name in ("rehearsal.md", "errors.md", "getting-started.md"):
        path = ROOT / "docs" / name
        for number, line in enumerate(path.read_text().splitlines(), 1):
            for status in re.findall(r"\bexit(?:s| status(?: is)?)? (\d+)\b", line):
                assert status in main, f"docs/{name}:{number}: exit {status}: {line}"


@pytest.mark.parametrize("source, statuses", [
    ("def f() -> int:\n    return 3\n", {"3"}),
    ("def f() -> int:\n    return status\n", set()),
    ("def f() -> int:\n    return decision.status\n", {"N"}),
    ("def f() -> int:\n    return _failed(1, together=True)\n", {"1"}),
    ("def f() -> int:\n    os._exit(4)\n", {"4"}),
    ("def _wait() -> int:\n    return 8888\n", set()),
    ("def f() -> str:\n    return 'x'\n", set()),
])
def test_how_statuses_are_read_from_code(source, statuses):
    numbers, passed_on = _literal_returns(ast.parse(source), argparse)
    assert {str(n) for n in numbers} | ({"N"} if passed_on else set()) == statuses


# ------------------------------------------------------------------ the templates' numbers
def template_numbers(name: str) -> Dict[str, Set[int]]:
    """Returns a template's own numbers: {'signal': its `#SBATCH --signal` seconds, 'grace':
    the grace periods it gives the package (`--signal NAME@N`, `--grace-period N`, an
    `MPI_RESOLVER_*` variable's)}."""
    text = (ROOT / "examples" / name).read_text()
    signal = {int(s) for s in re.findall(r"^#SBATCH --signal=(?:B:)?\w+@(\d+)", text, re.M)}
    grace = {int(s) for s in re.findall(
        r"(?:--signal[ =]|SIGNAL[:=-]+)[\"']?\w+@(\d+)"
        r"|(?:--grace-period[ =]|GRACE_PERIOD[:=-]+)[\"']?(\d+)", text) for s in s if s}
    return {"signal": signal, "grace": grace}


def quoted_numbers(text: str) -> Set[int]:
    """Returns the seconds ``text`` quotes for a signal: `USR1@120`, `--grace-period 120`,
    `grace_period=120`, '120 s before the end'."""
    found = re.findall(r"\b[A-Z0-9]+@(\d+)\b|grace[_-]period[ =](\d+)|(\d+) s before the end",
                       text, re.I)
    return {int(n) for groups in found for n in groups if n}


def template_passages() -> Iterator[Tuple[str, str, Tuple[str, ...]]]:
    """Yields (where, text, the templates it speaks of) for every paragraph of the docs that
    names a template (a paragraph ending in ':' goes with the code block after it), and every
    code block that does."""
    for path in sources():
        lines = path.read_text().splitlines()
        fences = {f.line: f for f in parse(path)[0]}
        name = str(path.relative_to(ROOT))
        paragraph: List[str] = []
        start, i = 1, 0
        while i < len(lines):
            line = lines[i]
            if i + 1 in fences:
                fence = fences[i + 1]
                text = fence.text
                if paragraph and paragraph[-1].rstrip().endswith(":"):
                    text = "\n".join(paragraph) + "\n" + text  # the block it introduces
                    paragraph = []
                yield from _spoken_of(f"{name}:{fence.line}", text)
                i += len(fence.text.splitlines()) + 2
                continue
            ends_with_colon = bool(paragraph) and paragraph[-1].rstrip().endswith(":")
            if not line.strip() or line.startswith("<!--"):
                if not ends_with_colon and paragraph:  # a paragraph ends
                    yield from _spoken_of(f"{name}:{start}", "\n".join(paragraph))
                    paragraph = []
            else:
                if ends_with_colon and lines[i - 1].strip() == "":  # no block followed
                    yield from _spoken_of(f"{name}:{start}", "\n".join(paragraph))
                    paragraph = []
                if not paragraph:
                    start = i + 1
                paragraph.append(line)
            i += 1
        yield from _spoken_of(f"{name}:{start}", "\n".join(paragraph))


def _spoken_of(where: str, text: str) -> Iterator[Tuple[str, str, Tuple[str, ...]]]:
    named = tuple(t for t in TEMPLATES if re.search(rf"(?<![\w_]){re.escape(t)}", text))
    if re.search(r"\b(both|the two) (sbatch |batch )?templates\b", text, re.I):
        named = TEMPLATES
    if named:
        yield where, text, named


def test_the_templates_give_the_package_their_own_signal_seconds():
    for name in TEMPLATES:
        numbers = template_numbers(name)
        assert len(numbers["signal"]) == 1, (name, numbers)
        assert numbers["grace"] <= numbers["signal"], (
            f"examples/{name} warns {numbers['signal']} s before the end but tells the "
            f"package {numbers['grace']}")


def test_the_numbers_the_docs_quote_for_a_template_are_its_own():
    own = {name: template_numbers(name)["signal"] | template_numbers(name)["grace"]
           for name in TEMPLATES}
    wrong = []
    for where, text, named in template_passages():
        for n in quoted_numbers(text):
            for name in named:
                if n not in own[name]:
                    wrong.append(f"{where}: {n} s for examples/{name}, whose own are "
                                 f"{sorted(own[name])}")
    assert not wrong, "\n".join(wrong)


@pytest.mark.parametrize("text, numbers", [
    ("#SBATCH --signal=USR1@120     # USR1 to every task 120 s before the end", {120}),
    ("signal=\"USR2@90\", grace_period=60, --grace-period 45", {90, 60, 45}),
    ("the time limit, 10 s later", set()),
])
def test_which_numbers_are_a_signal_s_seconds(text, numbers):
    assert quoted_numbers(text) == numbers


def test_a_passage_naming_both_templates_speaks_of_both():
    assert [n for _, _, n in _spoken_of("x", "Both sbatch templates carry USR1@120")] == \
        [TEMPLATES]
    assert [n for _, _, n in _spoken_of("x", "examples/train_gpu.sbatch warns")] == \
        [("train_gpu.sbatch",)]
    assert list(_spoken_of("x", "train.py --signal USR1@120")) == []


# ------------------------------------------------------------------ public and private
def private_imports(path: Path) -> Set[str]:
    """Returns the private modules of the package that ``path`` imports, and
    'resolver.resolution' where it reads that undocumented object's attributes."""
    tree = ast.parse(path.read_text())
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("mpi_resolver."):
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.startswith("mpi_resolver.")}
    if re.search(r"\bresolver\.resolution\b", path.read_text()):
        found.add("resolver.resolution")
    return {m for m in found if m != "mpi_resolver.jax"}  # the jax extra's public module


def design_list() -> Dict[str, Set[str]]:
    """Returns docs/design.md's table of the examples' private names: {example: names}."""
    text = (ROOT / "docs" / "design.md").read_text()
    table = text.split("## What is public", 1)[1].split("\n## ", 1)[0]
    out = {}
    for row in re.findall(r"^\| `(examples/[\w/]+\.py)` \| ([^|]+) \|", table, re.M):
        out[row[0]] = set(re.findall(r"`([\w.]+)`", row[1]))
    return out


def test_the_design_page_lists_the_private_names_the_examples_use():
    used = {str(p.relative_to(ROOT)): private_imports(p)
            for p in sorted((ROOT / "examples").rglob("*.py"))}
    used = {k: v for k, v in used.items() if v}
    assert design_list() == used


# ------------------------------------------------------------------ which file holds what
def settings_table() -> Dict[str, Set[str]]:
    """Returns docs/development.md's table of settings: {file: the tools it holds}
    ('project', 'build-system', 'setuptools', 'mypy', ...)."""
    out: Dict[str, Set[str]] = {}
    for line in block("settings-files").splitlines():
        name, _, rest = line.partition(" ")
        sections = re.findall(r"\[([^\]]+)\]", rest.split("  ")[0] + rest)
        out.setdefault(name, set()).update(_tool(s) for s in sections)
    return out


def _tool(section: str) -> str:
    """Returns the tool a section or table is for: 'tool.ruff.lint' -> 'ruff',
    'mypy-tensorflow.*' -> 'mypy', 'tool:pytest' -> 'pytest', 'pytest.ini_options' ->
    'pytest'."""
    section = re.sub(r"^tool[.:]", "", section)
    return re.split(r"[.-]", section)[0]


def file_tools() -> Dict[str, Set[str]]:
    """Returns {file: the tools whose settings it holds}, read from pyproject.toml and
    setup.cfg themselves."""
    import configparser
    import tomllib

    with open(ROOT / "pyproject.toml", "rb") as f:
        toml = tomllib.load(f)
    pyproject = {_tool(k) for k in toml if k != "tool"} | set(toml.get("tool", {}))
    cfg = configparser.ConfigParser()
    cfg.read(ROOT / "setup.cfg")
    return {"pyproject.toml": pyproject, "setup.cfg": {_tool(s) for s in cfg.sections()}}


def test_the_settings_table_is_what_the_two_files_hold_and_no_tool_is_in_both():
    held = file_tools()
    assert held["setup.cfg"], "setup.cfg holds no tool's settings"
    assert not held["setup.cfg"] & held["pyproject.toml"], held
    assert settings_table() == held, (settings_table(), held)


def test_mypy_reads_setup_cfg():
    """mypy, run from the repository's directory as scripts/check_release.sh runs it, says
    which configuration file it read (it takes the first of mypy.ini, .mypy.ini,
    pyproject.toml with [tool.mypy] and setup.cfg)."""
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-m", "mypy", "--verbose",
                           "mpi_resolver/core/values.py"], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)
    read = re.findall(r"Config File: +(\S+)", proc.stderr)
    assert read == [str(ROOT / "setup.cfg")], proc.stderr[-2000:]


@pytest.mark.parametrize("section, tool", [
    ("tool.ruff.lint", "ruff"), ("mypy-tensorflow.*,mpi4py", "mypy"), ("mypy", "mypy"),
    ("tool:pytest", "pytest"), ("tool.pytest.ini_options", "pytest"), ("project", "project"),
    ("build-system", "build"),
])
def test_which_tool_a_section_is_for(section, tool):
    assert _tool(section) == tool


# ------------------------------------------------------------------ the resolver's arguments
def resolver_parameters() -> Tuple[List[str], List[str]]:
    """Returns MPIClusterResolver's (positional, keyword-only) parameters, read from
    resolve/tf_resolver.py without importing TensorFlow."""
    tree = ast.parse((PACKAGE / "resolve" / "tf_resolver.py").read_text())
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef)
               and n.name == "MPIClusterResolver")
    init = next(n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == "__init__")
    return ([a.arg for a in init.args.args[1:]], [a.arg for a in init.args.kwonlyargs])


def test_the_smallest_use_names_every_argument_of_the_package_s_own():
    """The comment says 'SlurmClusterResolver's arguments, plus a/b/...': the plus are the
    keyword-only ones, every one (there were four of six)."""
    _, own = resolver_parameters()
    for name in ("smallest-use", "readme-smallest-use"):
        plus = re.search(r"plus ([\w/]+)", block(name))
        assert plus and plus.group(1).split("/") == own, (name, own)


def test_getting_started_gives_the_resolver_s_signature():
    """Its parameters in order, each with the code's default (port_base's is None: the
    variable MPI_RESOLVER_PORT_BASE, then 8888)."""
    positional, own = resolver_parameters()
    text = (ROOT / "docs" / "getting-started.md").read_text()
    shown = re.search(r"`MPIClusterResolver\(([^`]*)\)`", text, re.S)
    assert shown, "docs/getting-started.md shows no `MPIClusterResolver(...)` signature"
    pairs = [p.strip().split("=") for p in shown.group(1).replace("\n", " ").split(",")]
    assert [p[0] for p in pairs] == [*positional, "*", *own], pairs
    assert {p[0]: p[1] for p in pairs if len(p) == 2} == resolver_defaults()


def resolver_defaults() -> Dict[str, str]:
    """Returns MPIClusterResolver's defaults as its source spells them."""
    tree = ast.parse((PACKAGE / "resolve" / "tf_resolver.py").read_text())
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef)
               and n.name == "MPIClusterResolver")
    init = next(n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == "__init__")
    imported = {alias.asname or alias.name: node.module for node in tree.body
                if isinstance(node, ast.ImportFrom) for alias in node.names}

    def spelled(default: ast.expr) -> str:  # a constant, or a name imported from the package
        if isinstance(default, ast.Name) and default.id in imported:
            return repr(getattr(importlib.import_module(imported[default.id]), default.id))
        return ast.unparse(default).replace('"', "'")

    args = init.args.args[1:]
    out = {a.arg: spelled(d) for a, d in zip(args[len(args) - len(init.args.defaults):],
                                            init.args.defaults, strict=True)}
    out.update({a.arg: spelled(d) for a, d in zip(init.args.kwonlyargs,
                                                   init.args.kw_defaults, strict=True)
                if d is not None})
    return out


def test_the_commands_block_names_every_command_of_the_parser():
    """docs/getting-started.md's commands: each of the command line's commands is there."""
    from mpi_resolver.cli.args import _parser

    sub = next(a for a in _parser()._actions if isinstance(a, argparse._SubParsersAction))
    shown = set(re.findall(r"mpi-resolver (\w[\w-]*)", block("commands")))
    assert shown == set(sub.choices), (shown, set(sub.choices))


# ------------------------------------------------------------------ the restart policy
def test_the_restart_policy_table_is_the_code_s():
    """docs/long-jobs.md's table of supervise's restart policy is long_jobs.policy.ROWS, row
    by row, in order (the rows are both the rule and its documentation)."""
    from mpi_resolver.long_jobs.policy import ROWS, in_words

    text = (ROOT / "docs" / "long-jobs.md").read_text()
    header = "| # | what came to supervise | how the run ended | progress | then | why |"
    assert header in text
    lines = text.split(header, 1)[1].split("\n\n", 1)[0].strip().splitlines()[1:]
    shown = [tuple(c.strip() for c in line.strip("|").split("|")) for line in lines]
    assert shown == [(str(i), *in_words(row)) for i, row in enumerate(ROWS, 1)]


# ------------------------------------------------------------------ the templates, as the docs say
@pytest.mark.parametrize("template", ["train.sbatch", "train_gpu.sbatch"])
def test_the_templates_threads_and_script_are_as_the_docs_say(template):
    """gpu-cluster.md: the template exports --cpus-per-task as OMP_NUM_THREADS and passes no
    --threads; the default script is found in the submit directory (not beside the template,
    which sbatch copies); supervise's host install names no PyPI package."""
    text = (ROOT / "examples" / template).read_text()
    if template == "train_gpu.sbatch":  # the one gpu-cluster.md describes
        assert "export OMP_NUM_THREADS=${SLURM_CPUS_PER_TASK:-1}" in text
    assert "--threads" not in text.split("set -euo pipefail", 1)[1]
    assert '"${SLURM_SUBMIT_DIR:-.}/train.py"' in text and "beside this template" not in text
    assert "pip install mpi-resolver" not in text
    doc = (ROOT / "docs" / "gpu-cluster.md").read_text()
    assert "the template exports it as\n   `OMP_NUM_THREADS`" in doc
    assert "passes it to\n   `train.py --threads`" not in doc
    assert "pip install mpi-resolver" not in (ROOT / "docs" / "long-jobs.md").read_text()


def test_examples_md_describes_the_template_s_two_steps():
    """docs/examples.md's preflight and training lines are the template's: srun with
    --kill-on-bad-exit=1, the check's --connect, --timeout and --checkpoint-dir, supervise's
    --max-restarts, --spare-nodes and --warned-file in front of the same srun."""
    doc = (ROOT / "docs" / "examples.md").read_text()
    check, train = re.findall(r"`((?:srun|mpi-resolver supervise) [^`]*)`", doc)[:2]
    template = (ROOT / "examples" / "train.sbatch").read_text()
    srun = re.search(r"^SRUN=\((srun [^$]*)", template, re.M).group(1).strip()
    assert check.startswith(f"{srun} python -m mpi_resolver check --connect --timeout 30 "
                            '--checkpoint-dir "$CHECKPOINT_DIR"'), (check, srun)
    assert '--connect --timeout 30 --checkpoint-dir "$CHECKPOINT_DIR"' in template
    for option in ("--max-restarts", "--spare-nodes", "--warned-file"):
        assert option in train and f"supervise {option}" in template or \
            f'{option} "$' in template, option
    assert train.endswith(f"-- {srun} python train.py ARGS"), (train, srun)


def test_the_install_lines_name_extras_that_exist():
    """Every `pip install ".[a,b]"` of the docs and README names extras of pyproject.toml;
    the examples' extra brings nothing (their data ships with them: no scikit-learn, which
    Keras would import in every process), and jax.md's install says KERAS_BACKEND=jax."""
    import tomllib

    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"]
    assert extras["examples"] == [] and not any("scikit-learn" in d for e in extras.values()
                                                 for d in e)
    assert any(d.startswith("matplotlib") for d in extras["plot"])
    texts = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    named = [(p.name, m) for p in texts
             for m in re.findall(r'pip install[^\n`]*?"\.\[([\w,-]+)\]"', p.read_text())]
    assert len(named) >= 3, named
    for where, names in named:
        assert set(names.split(",")) <= set(extras), (where, names, sorted(extras))
    install = block("jax-install")
    assert 'pip install ".[jax]"' in install and "export KERAS_BACKEND=jax" in install


def test_jax_md_s_fit_resume_is_train_jax_s():
    """docs/jax.md's resumed fit does what examples/train_jax.py does (tested for real in
    tests/jax/test_train_jax.py): the model restored, the callback from the resumed step,
    the rest of a partial epoch, then whole epochs from initial_epoch, complete() at the end."""
    shown = block("jax-fit-resume")
    example = (ROOT / "examples" / "train_jax.py").read_text()
    for piece in ("restore_model(job, model)", "keras_callback(job, first_step=",
                  "divmod(", "(steps_per_epoch - into) * batch", "epochs=epoch + 1, "
                  "initial_epoch=epoch", "initial_epoch=epoch, callbacks",
                  "job.complete(remove=True)"):
        assert piece in shown, piece
    for piece in ("restore_model(job, model)", "keras_callback(job, first_step=",
                  "divmod(steps[\"done\"], spe)", "(spe - into) * batch",
                  "epochs=first + 1, initial_epoch=first", "initial_epoch=first,",
                  "job.complete(remove=True)"):
        assert piece in example, piece


@pytest.mark.parametrize("template", ["train.sbatch", "train_gpu.sbatch"])
def test_the_variables_the_templates_set_are_as_api_md_says(template):
    """api.md's table of the variables the templates set: each from the template's variable
    (CHECKPOINT_DIR, CHECKPOINT_EVERY) or kept where exported (MPI_RESOLVER_SIGNAL)."""
    text = (ROOT / "examples" / template).read_text()
    doc = (ROOT / "docs" / "api.md").read_text()
    header = "| the template sets | from | default |"
    table = doc.split(header, 1)[1].split("\n\n", 1)[0].strip().splitlines()[1:]
    rows = [line.strip().strip("|").split("|") for line in table]
    assert [r[0].strip() for r in rows] == ["`MPI_RESOLVER_CHECKPOINT_DIR`",
                                           "`MPI_RESOLVER_SIGNAL`",
                                           "`MPI_RESOLVER_CHECKPOINT_EVERY`"]
    assert "export MPI_RESOLVER_CHECKPOINT_DIR=$CHECKPOINT_DIR" in text
    assert "CHECKPOINT_DIR=${CHECKPOINT_DIR:-${CHECKPOINT_ROOT:-${SLURM_SUBMIT_DIR:-.}/" \
           "checkpoints}/$JOB}" in text
    default = "USR1@300" if template == "train_gpu.sbatch" else "USR1@120"
    assert f"export MPI_RESOLVER_SIGNAL=${{MPI_RESOLVER_SIGNAL:-{default}}}" in text
    assert "export MPI_RESOLVER_CHECKPOINT_EVERY=${CHECKPOINT_EVERY:-auto}" in text
    assert f"`{default}`" in rows[1][2] and "`auto`" in rows[2][2]
