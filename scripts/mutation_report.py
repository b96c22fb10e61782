"""Prints the mutation score of the last `mutmut run` (scripts/mutation.sh) and its survivors.

Reads mutants/**/*.meta (mutmut 3: each mutant's test exit code; 0 = no test noticed it) and
``mutmut show`` for each survivor's diff. A survivor whose diff only changes the text of a
message (a string literal with words in it: mutmut's "XX...XX", or its case) is counted apart:
the tests assert the words a message must carry, not every letter. Every other survivor must
be listed, with the reason it is equivalent, in scripts/mutation_equivalent.txt
(``mpi_resolver.core.values.x_whole_number__mutmut_3  # reason``).

Exit status 0 when the score of the other mutants is at least 95 % and every survivor is
listed; 1 otherwise.
"""

from __future__ import annotations

import io
import json
import pathlib
import re
import subprocess
import sys
import tokenize
from typing import Dict, List, Tuple

ROOT = pathlib.Path(__file__).resolve().parents[1]
TARGET = 0.95


def exit_codes() -> Dict[str, int]:
    codes: Dict[str, int] = {}
    for meta in sorted((ROOT / "mutants").rglob("*.py.meta")):
        codes.update(json.loads(meta.read_text())["exit_code_by_key"])
    return codes


def diff_of(name: str) -> Tuple[List[str], List[str]]:
    out = subprocess.run([str(ROOT / ".venv" / "bin" / "mutmut"), "show", name],
                         capture_output=True, text=True, cwd=ROOT).stdout
    old = [ln[1:] for ln in out.splitlines() if ln.startswith("-") and not ln.startswith("---")]
    new = [ln[1:] for ln in out.splitlines() if ln.startswith("+") and not ln.startswith("+++")]
    return old, new


def _tokens(lines: List[str]) -> List[Tuple[int, str]]:
    text = "\n".join(line.strip() for line in lines) + "\n"
    try:
        return [(t.type, t.string) for t in tokenize.generate_tokens(io.StringIO(text).readline)
                if t.type not in (tokenize.NL, tokenize.NEWLINE, tokenize.INDENT,
                                  tokenize.DEDENT, tokenize.ENDMARKER, tokenize.COMMENT)]
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return [(-1, text)]


_LITERAL = re.compile(r"""[fFrRbBuU]*(?:"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*')""")


def _literals(lines: List[str]) -> List[Tuple[int, str]]:
    """The lines as tokens where tokenize cannot read them (a piece of a longer expression):
    its string literals, and what lies between them."""
    text = " ".join(line.strip() for line in lines)
    out: List[Tuple[int, str]] = []
    at = 0
    for m in _LITERAL.finditer(text):
        out += [(tokenize.OP, text[at:m.start()]), (tokenize.STRING, m.group())]
        at = m.end()
    return out + [(tokenize.OP, text[at:])]


def message_only(old: List[str], new: List[str]) -> bool:
    """True where the mutant changes only strings that hold words (a message's text)."""
    a, b = _tokens(old), _tokens(new)
    if a and a[0][0] == -1 or b and b[0][0] == -1:
        a, b = _literals(old), _literals(new)
    if len(a) != len(b) or not a:
        return False
    changed = [(x, y) for x, y in zip(a, b, strict=True) if x != y]
    return bool(changed) and all(
        x[0] == y[0] == tokenize.STRING and (_text(x[1]) or x[1] in ('""', "''")
                                            and _in_message(a))
        for x, y in changed)


def _text(literal: str) -> bool:
    """True for a string literal of a message: words (a blank), or the end of a sentence."""
    body = literal.strip("fFrRbBuU").strip("\"'")
    return any(c.isspace() for c in body) or body.endswith((".", ")", ":", "!", "?", ";"))


def _in_message(tokens: List[Tuple[int, str]]) -> bool:
    """True where the line builds a message: another string of it is text."""
    return any(t == tokenize.STRING and _text(s) for t, s in tokens)


def equivalent() -> Dict[str, str]:
    path = ROOT / "scripts" / "mutation_equivalent.txt"
    out: Dict[str, str] = {}
    for line in path.read_text().splitlines() if path.exists() else []:
        if line.strip() and not line.startswith("#"):
            name, _, why = line.partition("#")
            out[name.strip()] = why.strip()
    return out


def main(argv: List[str]) -> int:
    codes = exit_codes()
    ran = {k: v for k, v in codes.items() if v is not None}
    survivors = sorted(k for k, v in ran.items() if v == 0)
    messages, real = [], []
    for name in survivors:
        old, new = diff_of(name)
        (messages if message_only(old, new) else real).append((name, old, new))
    explained = equivalent()
    unexplained = [(n, o, w) for n, o, w in real if n not in explained]
    counted = len(ran) - len(messages)
    killed = counted - len(real)
    score = killed / counted if counted else 1.0
    print(f"mutants: {len(ran)} run ({len(codes) - len(ran)} not run); "
          f"{len(messages)} change only a message's text (counted apart)")
    print(f"score: {killed} of {counted} other mutants killed = {100 * score:.1f} % "
          f"(target {100 * TARGET:.0f} %); {len(real)} survived, "
          f"{len(real) - len(unexplained)} of them explained as equivalent")
    for name, old, new in unexplained:
        print(f"\nSURVIVED {name}")
        for line in old:
            print(f"  - {line.strip()}")
        for line in new:
            print(f"  + {line.strip()}")
    return 0 if score >= TARGET and not unexplained else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
