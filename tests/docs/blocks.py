"""The code blocks of README.md and docs/*.md, by name, for the tests that run or check them.

Every fenced code block is preceded by a line ``<!-- block: NAME -->`` (names unique across
README.md and the docs), or is a MyST ``{literalinclude}`` of a file the suite runs; MyST
directives other than code (``{toctree}``, ``{eval-rst}``) are not code blocks.
tests/docs/test_blocks.py checks that rule and that every name is used by a test, through
``block(name)`` or ``commands(name)``.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Dict, List, Optional, Tuple

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
README = ROOT / "README.md"

_MARK = re.compile(r"^<!--\s*block:\s*(\S+)\s*-->\s*$")
_FENCE = re.compile(r"^(```+|~~~+)\s*(.*)$")
#: MyST directives that hold code, as a plain fence does.
CODE_DIRECTIVES = ("{code-block}", "{code}", "{sourcecode}")


def sources() -> List[Path]:
    """Returns the Markdown files whose blocks these tests cover: README.md, docs/**/*.md."""
    return [README, *sorted(p for p in DOCS.rglob("*.md") if "_build" not in p.parts)]


@dataclass(frozen=True)
class Fence:
    """One fenced block of a Markdown file."""

    path: Path
    line: int            # 1-based line of the opening fence
    info: str            # what follows the opening fence: 'bash', '{literalinclude} x', ...
    text: str            # the lines between the fences, joined with '\n'
    name: Optional[str]  # the name of the <!-- block: NAME --> line right before it

    @property
    def is_code(self) -> bool:
        """True for a code block: a plain fence, or a MyST code directive."""
        return not self.info.startswith("{") or self.info.split()[0] in CODE_DIRECTIVES

    @property
    def where(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"


@lru_cache(maxsize=None)
def parse(path: Path) -> Tuple[Tuple[Fence, ...], Tuple[Tuple[str, int], ...]]:
    """Returns (the fences of ``path``, every (name, line) of its block marks)."""
    lines = path.read_text().splitlines()
    fences: List[Fence] = []
    marks: List[Tuple[str, int]] = []
    i = 0
    while i < len(lines):
        mark = _MARK.match(lines[i])
        if mark:
            marks.append((mark.group(1), i + 1))
        opening = _FENCE.match(lines[i])
        if opening:
            ticks = opening.group(1)
            end = next((j for j in range(i + 1, len(lines))
                        if lines[j].strip() == ticks), None)
            if end is None:
                raise AssertionError(f"{path.relative_to(ROOT)}:{i + 1}: a fence never closed")
            before = _MARK.match(lines[i - 1]) if i > 0 else None
            fences.append(Fence(path, i + 1, opening.group(2).strip(),
                                "\n".join(lines[i + 1:end]),
                                before.group(1) if before else None))
            i = end + 1
            continue
        i += 1
    return tuple(fences), tuple(marks)


def all_fences() -> List[Fence]:
    return [f for p in sources() for f in parse(p)[0]]


def named() -> Dict[str, Fence]:
    """Returns {name: its fence} (the first, where a name is used twice)."""
    found: Dict[str, Fence] = {}
    for fence in all_fences():
        if fence.name is not None:
            found.setdefault(fence.name, fence)
    return found


def block(name: str) -> str:
    """Returns the text of the block named ``name`` (without its fences).

    Raises:
      KeyError: no block of README.md or docs/ has that name (the message says where it
        looked).
    """
    found = named()
    if name not in found:
        looked = ", ".join(str(p.relative_to(ROOT)) for p in sources())
        raise KeyError(f"no code block named {name!r} (a '<!-- block: {name} -->' line right "
                       f"before a fence) in {looked}")
    return found[name].text


def commands(name: str) -> List[str]:
    """Returns the block's commands: its non-empty lines, each without a trailing
    ``# comment`` (a '#' at the line's start or after a space) and trailing spaces."""
    out = []
    for line in block(name).splitlines():
        line = re.sub(r"(^|\s)#.*$", "", line).rstrip()
        if line:
            out.append(line)
    return out


def command(name: str, starting: str) -> str:
    """Returns the one command of block ``name`` that starts with ``starting``."""
    found = [c for c in commands(name) if c.startswith(starting)]
    assert len(found) == 1, f"block {name!r}: {len(found)} commands start {starting!r}"
    return found[0]


# ------------------------------------------------------------------------- output samples
_OMITTED = ("...", "…")


def _line_pattern(line: str) -> "re.Pattern[str]":
    """A sample line as a pattern: '...'/'…' inside it stand for any text, every number for
    any number (timings, sizes, addresses, job ids differ between runs), any run of spaces
    for any spaces (columns' widths follow their contents)."""
    pieces = re.split(r"\.\.\.|…", line.strip())
    parts = []
    for piece in pieces:
        out = ""
        for token in re.split(r"(\d+(?:\.\d+)*|\s+)", piece):
            if not token:
                continue
            if token[0].isdigit():
                out += r"\d+(?:\.\d+)*"
            elif token.isspace():
                out += r"\s+"
            else:
                out += re.escape(token)
        parts.append(out)
    return re.compile(".*".join(parts))


def assert_sample(sample: str, output: str, where: str = "the output",
                  ordered: bool = True) -> None:
    """Asserts that every line of ``sample`` (a docs block showing what a command prints)
    is in ``output``, each matched by a line of its own, in order unless not ``ordered``
    (lines of parallel tasks come in any order); a line that is only '...' or '…' stands
    for lines left out. See _line_pattern for what may differ."""
    lines = output.splitlines()
    at = 0
    for line in sample.splitlines():
        if not line.strip() or line.strip() in _OMITTED:
            continue
        pattern = _line_pattern(line)
        found = next((i for i in range(at if ordered else 0, len(lines))
                      if pattern.search(lines[i])), None)
        assert found is not None, (f"the docs show the line\n  {line}\nwhich {where} lacks "
                                   f"(after its line {at}):\n{output}")
        at = found + 1 if ordered else 0


def runs_like(doc_command: str, argv: List[str]) -> None:
    """Asserts that ``argv``, a command a test runs, is ``doc_command`` with options added:
    the docs' words appear in it in order; `mpi-resolver` may be run as `python -m
    mpi_resolver` (or the console script's path), `python` as any Python, and a script
    (`train.py`) from any directory."""
    have = list(argv)
    at = 0
    for word in shlex.split(doc_command):
        for i in range(at, len(have)):
            h = str(have[i])
            if (h == word or (word == "python" and Path(h).name.startswith("python"))
                    or (word.endswith(".py") and h.endswith("/" + word))
                    or (word == "mpi-resolver" and (Path(h).name == "mpi-resolver"
                                                    or h == "mpi_resolver"))):
                at = i + 1
                break
        else:
            raise AssertionError(f"the docs' command {doc_command!r} is not what the test "
                                 f"runs, {' '.join(map(str, argv))!r}: {word!r} missing")
