"""Slurm's hostlist and tasks-per-node grammars (pure; no environment access)."""

from __future__ import annotations

import itertools
import re
from typing import List, Tuple

from mpi_resolver.core.errors import FormatError


#: The most host names one hostlist (or tasks-per-node list) may expand to. Slurm itself
#: refuses a single range of more than 65,536 hosts; this limit is on the whole list, so a
#: typo such as ``n[0-999999999]`` is an error instead of an out-of-memory.
MAX_HOSTS = 1 << 20
_MAX_DIGITS = 18  # longer numbers are typos, and int() refuses > 4300 digits

_NAME_CHARS = re.compile(r"[A-Za-z0-9._-]*")
_RANGE_ITEM = re.compile(r"([0-9]+)(?:-([0-9]+))?")
_TASKS_ITEM = re.compile(r"([0-9]+)(?:\(x([0-9]+)\))?")
_GROUP_SPLIT = re.compile(r"(\[[^\[\]]*\])")


def check_host_name(name: str, *, what: str) -> str:
    """Returns ``name`` when it can stand in a ``host:port`` address.

    Raises:
      FormatError: empty, or a character other than letters, digits, ``.``, ``_`` and ``-``
        (spaces, control characters and ``:`` would make an address that cannot work).
    """
    if not name:
        raise FormatError(f"{what}: empty host name; expected a name such as 'node01'.")
    if _NAME_CHARS.fullmatch(name) is None:
        bad = next(c for c in name if _NAME_CHARS.fullmatch(c) is None)
        raise FormatError(
            f"{what}: host name {name!r} contains {bad!r}; a host name may hold only letters, "
            "digits, '.', '_' and '-' (it must fit in a 'host:port' address).")
    return name


def _split_top_level(hostlist: str) -> List[str]:
    """Splits at the commas that are outside brackets; raises FormatError on unbalanced ones."""
    parts, inside, start = [], False, 0
    for i, c in enumerate(hostlist):
        if c == "[":
            if inside:
                raise FormatError(f"hostlist {hostlist!r}: nested '[' at position {i}.")
            inside = True
        elif c == "]":
            if not inside:
                raise FormatError(f"hostlist {hostlist!r}: ']' without '[' at position {i}.")
            inside = False
        elif c == "," and not inside:
            parts.append(hostlist[start:i])
            start = i + 1
    if inside:
        raise FormatError(f"hostlist {hostlist!r}: '[' is never closed.")
    parts.append(hostlist[start:])
    return parts


def _parse_range(group: str, hostlist: str) -> List[Tuple[int, int, int]]:
    """Returns the (low, high, width) items of one bracket group, e.g. ``01-03,7``."""
    items = []
    for item in group.split(","):
        m = _RANGE_ITEM.fullmatch(item)
        if m is None:
            raise FormatError(
                f"hostlist {hostlist!r}: bad range {item!r} in [{group}]; expected N or N-M "
                "with digits only, e.g. n[01-04,7].")
        lo_text, hi_text = m.group(1), m.group(2)
        if len(lo_text) > _MAX_DIGITS or len(hi_text or "") > _MAX_DIGITS:
            raise FormatError(
                f"hostlist {hostlist!r}: number in {item!r} has more than {_MAX_DIGITS} digits.")
        lo = int(lo_text)
        hi = lo if hi_text is None else int(hi_text)
        if hi < lo:
            raise FormatError(
                f"hostlist {hostlist!r}: reversed range {item!r}; write the low end first "
                f"({hi_text}-{lo_text}).")
        items.append((lo, hi, len(lo_text)))
    return items


def _expand_range(items: List[Tuple[int, int, int]]) -> List[str]:
    """Returns the values of parsed range items, zero-padded to each item's width."""
    values: List[str] = []
    for lo, hi, width in items:
        values.extend([str(i).zfill(width) for i in range(lo, hi + 1)])
    return values


Expression = Tuple[List[str], List[List[Tuple[int, int, int]]]]  # texts, groups' range items


def _parse_expression(expr: str, hostlist: str) -> Tuple[Expression, int]:
    """Returns one comma-free expression such as ``rack[1-2]-n[01-02]`` parsed, and how many
    names it expands to (nothing is built yet)."""
    pieces = _GROUP_SPLIT.split(expr)  # text, [group], text, [group], ..., text
    if len(pieces) == 1:
        return ([check_host_name(expr, what=f"hostlist {hostlist!r}")], []), 1
    if pieces[-1]:
        raise FormatError(
            f"hostlist {hostlist!r}: {pieces[-1]!r} follows the last ']' in {expr!r}; Slurm "
            "allows text before and between bracket groups only.")
    texts = pieces[0::2][:-1]
    for text in texts:
        if text:
            check_host_name(text, what=f"hostlist {hostlist!r}")
    parsed = [_parse_range(g[1:-1], hostlist) for g in pieces[1::2]]
    total = 1
    for items in parsed:
        total *= sum(hi - lo + 1 for lo, hi, _ in items)
    if total > MAX_HOSTS:
        raise FormatError(
            f"hostlist {hostlist!r}: {expr!r} expands to {total} hosts, more than the limit of "
            f"{MAX_HOSTS} (mpi_resolver.placement.hostlist.MAX_HOSTS).")
    return (texts, parsed), total


def _expand_expression(expression: Expression) -> List[str]:
    """Returns the names of a parsed expression."""
    texts, parsed = expression
    if not parsed:
        return texts
    groups = [_expand_range(items) for items in parsed]
    if len(groups) == 1:
        prefix = texts[0]
        return [prefix + v for v in groups[0]]
    parts: List[List[str]] = []  # [text before group 0], group 0, [text before group 1], ...
    for i, values in enumerate(groups):
        parts += [[texts[i]], values]
    return ["".join(combo) for combo in itertools.product(*parts)]


def expand_hostlist(hostlist: str) -> List[str]:
    """Returns the host names of a Slurm hostlist, in order, duplicates kept.

    ``'n[1-2],m5,o[09-10]'`` -> ``['n1', 'n2', 'm5', 'o09', 'o10']``;
    ``'rack[1-2]-n[01-02]'`` -> ``['rack1-n01', 'rack1-n02', 'rack2-n01', 'rack2-n02']``
    (several bracket groups expand as Slurm does: the first group varies slowest).

    Raises:
      FormatError: empty list or element, unbalanced or nested brackets, reversed or
        non-numeric ranges, text after the last bracket group, characters that cannot be in a
        host name, or more than MAX_HOSTS names.
    """
    if not isinstance(hostlist, str):
        raise FormatError(f"hostlist must be a string, got {type(hostlist).__name__}.")
    if not hostlist:
        raise FormatError("hostlist is empty; expected host names such as 'n[1-4],m1'.")
    expressions, total = [], 0
    for part in _split_top_level(hostlist):
        if not part:
            raise FormatError(
                f"hostlist {hostlist!r} has an empty element (a stray ','); expected names "
                "separated by single commas.")
        expression, count = _parse_expression(part, hostlist)
        expressions.append(expression)
        total += count
        if total > MAX_HOSTS:  # checked before any name is built
            raise FormatError(
                f"hostlist {hostlist!r} expands to more than {MAX_HOSTS} hosts, the limit of "
                "mpi_resolver.placement.hostlist.MAX_HOSTS.")
    hosts: List[str] = []
    for expression in expressions:
        hosts.extend(_expand_expression(expression))
    return hosts


def expand_tasks_per_node(tasks_per_node: str) -> List[int]:
    """Returns the task counts of a Slurm tasks-per-node list, one per node, in order.

    ``'3(x2),2,1'`` -> ``[3, 3, 2, 1]``.

    Raises:
      FormatError: empty, an element that is not ``N`` or ``N(xM)``, a repeat count of 0, or
        more than MAX_HOSTS entries.
    """
    if not isinstance(tasks_per_node, str):
        raise FormatError(
            f"tasks-per-node list must be a string, got {type(tasks_per_node).__name__}.")
    if not tasks_per_node:
        raise FormatError("tasks-per-node list is empty; expected counts such as '3(x2),1'.")
    counts: List[int] = []
    for item in tasks_per_node.split(","):
        m = _TASKS_ITEM.fullmatch(item)
        if m is None:
            raise FormatError(
                f"tasks-per-node list {tasks_per_node!r}: bad element {item!r}; expected N or "
                "N(xM), e.g. '3(x2),2,1'.")
        if len(m.group(1)) > _MAX_DIGITS or len(m.group(2) or "") > _MAX_DIGITS:
            raise FormatError(
                f"tasks-per-node list {tasks_per_node!r}: number in {item!r} has more than "
                f"{_MAX_DIGITS} digits.")
        repeat = 1 if m.group(2) is None else int(m.group(2))
        if repeat == 0:
            raise FormatError(
                f"tasks-per-node list {tasks_per_node!r}: {item!r} repeats 0 times; the repeat "
                "count in N(xM) must be at least 1.")
        if len(counts) + repeat > MAX_HOSTS:
            raise FormatError(
                f"tasks-per-node list {tasks_per_node!r} has more than {MAX_HOSTS} entries, the "
                "limit of mpi_resolver.placement.hostlist.MAX_HOSTS.")
        counts.extend([int(m.group(1))] * repeat)
    return counts
