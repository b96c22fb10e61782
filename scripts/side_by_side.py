"""Runs the test suite as two pytest runs side by side: tests/cluster beside everything else.

    python scripts/side_by_side.py -- PYTEST_COMMAND...

The other tests' output streams as it comes; the cluster run's is kept in a file and printed
after it. Each run writes a JUnit XML report; the last line counts both
('suite: N passed, N failed', with ', N skipped' where any were), and the exit status is 0
only where both runs passed (1 otherwise: the worse of the two runs' statuses).
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Dict, List, Sequence

CLUSTER = "tests/cluster"


def counts(report: Path) -> Dict[str, int]:
    """Returns {'passed', 'failed', 'skipped'} from a JUnit XML report (errors are
    failures; a missing or unreadable report counts one failure)."""
    try:
        root = ET.parse(report).getroot()
    except (OSError, ET.ParseError):
        return {"passed": 0, "failed": 1, "skipped": 0}
    suites = [root] if root.tag == "testsuite" else list(root.iter("testsuite"))
    total = {k: sum(int(s.get(k, 0)) for s in suites)
             for k in ("tests", "failures", "errors", "skipped")}
    failed = total["failures"] + total["errors"]
    return {"passed": total["tests"] - failed - total["skipped"], "failed": failed,
            "skipped": total["skipped"]}


def summary(parts: Sequence[Dict[str, int]]) -> str:
    """Returns the closing line for ``parts``' counts."""
    total = {k: sum(p[k] for p in parts) for k in ("passed", "failed", "skipped")}
    line = f"suite: {total['passed']} passed, {total['failed']} failed"
    return line + (f", {total['skipped']} skipped" if total["skipped"] else "")


def status(codes: List[int]) -> int:
    """Returns the suite's exit status: 0 where every run passed, else the first failure's
    (pytest's 5, no tests collected, counts as a failure here)."""
    return next((c for c in codes if c != 0), 0)


def main(argv: Sequence[str]) -> int:
    if not argv or argv[0] != "--" or len(argv) < 2:
        print("usage: side_by_side.py -- PYTEST_COMMAND...", file=sys.stderr)
        return 2
    pytest = list(argv[1:])
    with tempfile.TemporaryDirectory(prefix="mpir-suite-") as tmp:
        where = Path(tmp)
        with open(where / "cluster.log", "w") as log:
            cluster = subprocess.Popen(
                [*pytest, f"--junitxml={where / 'cluster.xml'}", CLUSTER],
                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
            try:
                rest = subprocess.call([*pytest, f"--junitxml={where / 'rest.xml'}",
                                        f"--ignore={CLUSTER}"], stdin=subprocess.DEVNULL)
            finally:
                clustered = cluster.wait()
        sys.stdout.flush()
        print(f"\n======== {CLUSTER}, run beside the tests above ========", flush=True)
        sys.stdout.write((where / "cluster.log").read_text(errors="replace"))
        print(summary([counts(where / "rest.xml"), counts(where / "cluster.xml")]), flush=True)
        return status([rest, clustered])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
