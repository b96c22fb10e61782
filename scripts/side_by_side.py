"""Runs the test suite as pytest runs side by side: tests/cluster and tests/jax (each on
throw-away clusters of its own; their tests mostly wait: Slurm, JAX's and TensorFlow's
start-up, heartbeats, timeouts, a time limit) and a run of the longest files (OWN_RUN), each
beside everything else; a few long files run with tests/jax (WITH_JAX) so that the four take
about as long.

    python scripts/side_by_side.py -- PYTEST_COMMAND...

The other tests' output streams as it comes; each run beside them is kept in a file and printed
after it. Each run writes a JUnit XML report; the last line counts them all
('suite: N passed, N failed', with ', N skipped' where any were), and the exit status is 0
only where every run passed (else the first failing run's status).
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Dict, List, Sequence, Tuple

#: Files that run with tests/jax: those of the long-job cluster (one cluster of their own,
#: minutes of waiting for a time limit and requeues) and some of the benchmarks' (each on a
#: cluster of its own).
WITH_JAX = ("tests/cluster/test_long_jobs.py", "tests/cluster/test_own_script.py",
            "tests/cluster/test_signals.py", "tests/cluster/test_stale_signal.py",
            "tests/cluster/test_bench_restart.py", "tests/cluster/test_bench_preemption.py",
            "tests/cluster/test_tf_local_tier.py")
#: Files of a fourth run, the longest of the rest and of the clusters' benchmarks: the oldest
#: versions' tests (an inner pytest of TensorFlow's tests: 12 minutes of the suite, a quarter
#: of a core), the README's commands (the benchmark script, the demo). Measured 2026-11-30
#: with three runs: the rest 30:44 (these 19 minutes of it), tests/cluster 25:23, tests/jax
#: 29:19; the four then take about as long each.
OWN_RUN = ("tests/test_versions.py", "tests/test_readme_commands.py",
           "tests/cluster/test_bench_tf_tiers.py", "tests/cluster/test_bench_slow_rank.py")
#: Files of tests/jax that run with the rest (on a JAX cluster of its own), which ended 8
#: minutes before tests/jax's run (measured 2026-11-30 with four runs: the rest 21:49,
#: tests/cluster 27:05, tests/jax 29:42, the fourth 27:59).
JAX_WITH_REST = ("tests/jax/test_bench_jax_init.py", "tests/jax/test_bench_tiers.py",
                 "tests/jax/test_train_jax.py")
_CLUSTER_ELSEWHERE = (*WITH_JAX, *(p for p in OWN_RUN if p.startswith("tests/cluster/")))


def beside() -> Tuple[Tuple[Tuple[str, ...], Tuple[str, ...]], ...]:
    """Returns the runs beside the rest, each its own pytest process: (the paths it runs,
    those it leaves out); tests/jax's files are this checkout's, less JAX_WITH_REST."""
    jax = tuple(p.as_posix() for p in sorted(Path("tests/jax").glob("test_*.py"))
                if p.as_posix() not in JAX_WITH_REST)
    return ((("tests/cluster",), _CLUSTER_ELSEWHERE), ((*jax, *WITH_JAX), ()), (OWN_RUN, ()))


def existing(paths: Sequence[str]) -> List[str]:
    """Returns those of ``paths`` that exist here (a checkout may lack some)."""
    return [p for p in paths if Path(p).exists()]


def beside_argv(paths: Sequence[str], left_out: Sequence[str]) -> List[str]:
    """Returns a run's pytest arguments: its paths that exist, and --ignore for each left out."""
    return [*(f"--ignore={p}" for p in left_out), *existing(paths)]


def runs_here() -> List[Tuple[Sequence[str], Sequence[str]]]:
    """Returns the runs of beside() with a path in this checkout (a run of none would
    collect, and repeat, the whole suite)."""
    return [(paths, left_out) for paths, left_out in beside() if existing(paths)]


def rest_ignores() -> List[str]:
    """Returns the rest's --ignore arguments: every path a run beside it runs."""
    return [f"--ignore={p}" for paths, _ in beside() for p in paths]


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
        beside = []
        runs = runs_here()
        for number, (paths, left_out) in enumerate(runs):
            log = open(where / f"beside{number}.log", "w")  # noqa: SIM115 - closed below
            beside.append((paths, log, subprocess.Popen(
                [*pytest, f"--junitxml={where / f'beside{number}.xml'}",
                 *beside_argv(paths, left_out)],
                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)))
        try:
            rest = subprocess.call([*pytest, f"--junitxml={where / 'rest.xml'}",
                                    *rest_ignores()], stdin=subprocess.DEVNULL)
        finally:
            codes = [rest] + [proc.wait() for _, _, proc in beside]
            for _, log, _ in beside:
                log.close()
        sys.stdout.flush()
        for number, (paths, _) in enumerate(runs):
            print(f"\n======== {' '.join(existing(paths))}, run beside the tests above "
                  "========", flush=True)
            sys.stdout.write((where / f"beside{number}.log").read_text(errors="replace"))
        reports = ["rest.xml"] + [f"beside{n}.xml" for n in range(len(runs))]
        print(summary([counts(where / r) for r in reports]), flush=True)
        return status(codes)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
