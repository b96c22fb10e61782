"""The docs' launcher page (docs/launchers.md, once README.md's launcher section) quotes what
mpi_resolver says for each wrong pairing of srun plugin and MPI: each quote must be what the
code says (read from the page itself, so a changed message or a stale quote fails here). '…'
in a quote stands for text left out."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Callable, List

import pytest

from mpi_resolver.core.errors import ResolutionError
from mpi_resolver.launch.mpi_library import MpiLibrary
from mpi_resolver.options import make_options
from mpi_resolver.resolve.plan import make_plan
from tests.docs.blocks import block
from tests.unit.envs import IMPI, MPICH_TEXT, OMPI4, SRUN_NONE, SRUN_PMI2, SRUN_PMIX

#: The page with the table of wrong pairings (the name README stays: the tests read it so).
README = (Path(__file__).resolve().parents[2] / "docs" / "launchers.md").read_text()


def row(first_cell: str) -> List[str]:
    """Returns the cells of the README table row whose first cell is ``first_cell``."""
    for line in README.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("|") and cells[0] == first_cell:
            return cells
    raise AssertionError(f"docs/launchers.md has no table row starting {first_cell!r}")


def quoted(cell: str) -> str:
    """Returns the one double-quoted text in a cell."""
    found = re.findall(r'"([^"]+)"', cell)
    assert len(found) == 1, f"expected one quote in {cell!r}"
    return found[0]


def assert_quotes(quote: str, message: str) -> None:
    """Asserts that the pieces of ``quote`` between '…' appear in ``message``, in order."""
    text = " ".join(message.split())
    at = 0
    for piece in (p.strip() for p in quote.split("…")):
        if piece:
            found = text.find(piece, at)
            assert found >= 0, f"README quotes {piece!r}, the code says:\n{text}"
            at = found + len(piece)


def error_of(call: Callable[[], object]) -> str:
    with pytest.raises(ResolutionError) as caught:
        call()
    return str(caught.value)


def plan_with(env, text: str, components=frozenset()):
    library = MpiLibrary(text, components)
    return lambda: make_plan(make_options(), env, library=lambda: library)


@pytest.mark.parametrize("first_cell, message", [
    pytest.param("Debian's Open MPI 4", lambda: error_of(
        plan_with(SRUN_PMI2, OMPI4, frozenset({"ext3x"}))), id="Open MPI under pmi2"),
    pytest.param("MPICH (PyPI's `mpich`)", lambda: error_of(plan_with(SRUN_PMIX, MPICH_TEXT)),
                 id="MPICH under pmix"),
    pytest.param("MPICH (PyPI's `mpich`), its default UCX netmod",
                 lambda: " ".join(plan_with(SRUN_PMI2, MPICH_TEXT)().warnings),
                 id="MPICH's UCX under pmi2 across nodes: a warning"),
    pytest.param("Intel MPI (PyPI's `impi-rt`)", lambda: error_of(plan_with(SRUN_PMI2, IMPI)),
                 id="Intel MPI's own PMI-1 on 3,1"),
])
def test_wrong_pairing_quotes_are_what_the_code_says(first_cell, message):
    assert_quotes(quoted(row(first_cell)[-1]), message())


def test_the_unwired_step_row_says_what_the_note_says():
    notes = " ".join(make_plan(make_options(), SRUN_NONE,
                          library=lambda: MpiLibrary(OMPI4)).notes)
    assert "the cross-check of Slurm against MPI is skipped" in notes
    assert "a note that the cross-check was skipped" in row("any")[-1]


# ------------------------------------------------------------ check --checkpoint-dir's output
_UNITS = ("B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB")


def checkpoint_blocks() -> List[str]:
    """Returns the output blocks of the docs' `check --checkpoint-dir` section
    (docs/rehearsal.md): the good job's, then the bad one's."""
    return [block("checkpoint-dir-ok"), block("checkpoint-dir-failed")]


def _size(text: str) -> int:
    """Returns the bytes a '75.1 GiB' of the report stands for (to the digits shown)."""
    number, unit = text.split()
    return round(float(number) * 1024 ** _UNITS.index(unit))


def _two_nodes(path: str, free: str, total: str, fstype: str):
    from mpi_resolver.rehearsal.checkpoint_check import OK, Written

    return [Written(r, host, path, OK, None, f".f{r}", "n", _size(free), _size(total), fstype)
            for r, host in enumerate(["node1", "node1", "node2", "node2"])]


def test_checkpoint_dir_outputs_are_what_the_code_prints():
    """The README's two outputs (captured from the suite's cluster) are what judge() prints
    for what they show: a shared directory, and each node's own /dev/shm (the cluster test
    compares them with its own runs)."""
    from mpi_resolver.rehearsal.checkpoint_check import ABSENT, SEEN, Read, judge

    good, bad = checkpoint_blocks()
    path, free, total = re.fullmatch(r"CHECKPOINT DIR OK: (\S+) seen and written by all 2 "
                                     r"nodes; free space: ([\d.]+ \w+) of ([\d.]+ \w+) .*",
                                     good).groups()
    report = judge(_two_nodes(path, free, total, "ext4"), [Read(0, 2, SEEN), Read(2, 0, SEEN)],
                   [None] * 4, gathered=True, seconds=0.1)
    assert report.text() == good
    path = re.match(r"CHECKPOINT DIR FAILED: (\S+):", bad).group(1)
    waited = float(re.search(r"\(waited ([\d.]+) s", bad).group(1))
    free, total = re.search(r"free space: ([\d.]+ \w+) of ([\d.]+ \w+)", bad).groups()
    reads = [Read(0, 2, ABSENT, None, waited), Read(2, 0, ABSENT, None, waited)]
    report = judge(_two_nodes(path, free, total, "tmpfs"), reads, [None] * 4, gathered=True,
                   seconds=5.1)
    assert report.text() == bad
