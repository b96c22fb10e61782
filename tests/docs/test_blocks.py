"""Every code block of README.md and docs/ is named and used by a test (see blocks.py)."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import pytest

from tests.docs.blocks import (ROOT, all_fences, assert_sample, block, commands, parse,
                               runs_like, sources)

pytestmark = pytest.mark.unit

TESTS = ROOT / "tests"
HERE = Path(__file__).resolve()
_USE = re.compile(r"""\b(?:block|commands|command)\(\s*["']([^"']+)["']""")


def uses() -> Counter:
    """Returns how often each name is asked for by a test file (all of tests/ but blocks.py
    itself and this file's own examples below)."""
    found: Counter = Counter()
    for path in TESTS.rglob("*.py"):
        if path.name == "blocks.py" and path.parent == HERE.parent:
            continue
        text = path.read_text()
        if path == HERE:
            text = text.split("# ---- examples of the rule", 1)[0]
        found.update(_USE.findall(text))
    return found


def test_the_docs_and_readme_have_blocks():
    assert len(sources()) >= 10, sources()
    assert len([f for f in all_fences() if f.is_code]) >= 25


def test_every_code_block_is_named_or_includes_a_file_the_suite_runs():
    unnamed = [f.where for f in all_fences()
               if f.is_code and f.name is None]
    assert not unnamed, ("these code blocks have no '<!-- block: NAME -->' line right before "
                         f"them: {unnamed}")
    for fence in all_fences():
        if fence.info.startswith("{literalinclude}"):
            target = (fence.path.parent / fence.info.split(None, 1)[1]).resolve()
            assert target.is_file(), fence.where
            relative = str(target.relative_to(ROOT))
            runners = [p for p in TESTS.rglob("test_*.py")
                       if target.name in p.read_text()]
            assert runners, f"{fence.where}: no test names {relative}, which it includes"


def test_block_names_are_unique_and_every_name_has_a_fence():
    names = [f.name for f in all_fences() if f.name]
    assert len(names) == len(set(names)), [n for n, c in Counter(names).items() if c > 1]
    for path in sources():
        fences, marks = parse(path)
        fenced = {f.name for f in fences}
        lonely = [f"{path.relative_to(ROOT)}:{line} {name}" for name, line in marks
                  if name not in fenced]
        assert not lonely, f"block marks with no fence right after them: {lonely}"


def test_no_directive_but_code_and_includes_is_named():
    for fence in all_fences():
        if fence.name is not None:
            assert fence.is_code, f"{fence.where}: {fence.info} is named but is not code"


def test_every_named_block_is_used_by_a_test():
    used = uses()
    unused = sorted(f"{f.name} ({f.where})" for f in all_fences()
                    if f.name and f.name not in used)
    assert not unused, f"no test under tests/ asks for these blocks: {unused}"


def test_every_name_a_test_asks_for_exists():
    missing = sorted(set(uses()) - {f.name for f in all_fences()})
    assert not missing, f"tests ask for blocks the docs do not have: {missing}"


# ---- examples of the rule (this part of the file does not count as a use)
def test_block_names_the_file_and_the_missing_name():
    with pytest.raises(KeyError, match=r"no code block named 'no-such-block'.*README.md"):
        block("no-such-block")


def test_commands_drop_comments_and_empty_lines():
    lines = commands("setup")
    assert lines == ["bash scripts/demo.sh", "bash scripts/test.sh"]


def test_assert_sample_skips_omitted_lines_and_tolerates_numbers():
    sample = "CONNECT OK: 4 connection(s) in 0.1 s.\n...\nrank  host\n0     node1 … end"
    assert_sample(sample, "x\nCONNECT OK: 4 connection(s) in 12.75 s.\ny\nrank host\n"
                          "0 node1 and more end\n")
    with pytest.raises(AssertionError, match="lacks"):
        assert_sample(sample, "rank  host\nCONNECT OK: 4 connection(s) in 0.1 s.\n")


def test_runs_like_allows_added_options_only():
    runs_like("srun --mpi=pmix mpi-resolver check --connect",
              ["srun", "--mpi=pmix", "-N2", "/v/bin/python", "-m", "mpi_resolver", "check",
               "--timeout", "5", "--connect"])
    with pytest.raises(AssertionError, match="--connect"):
        runs_like("srun --mpi=pmix mpi-resolver check --connect",
                  ["srun", "--mpi=pmix", "mpi-resolver", "check"])
