"""scripts/side_by_side.py: the suite as pytest runs side by side (tests/cluster and
tests/jax, each beside the rest): the closing line counts them all, and a failure in any makes
the exit status non-zero."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))

import side_by_side as sbs  # noqa: E402 - scripts/ is not a package

XML = ('<testsuites><testsuite tests="{t}" failures="{f}" errors="{e}" skipped="{s}"/>'
       "</testsuites>")


@pytest.mark.parametrize("t, f, e, s, expected", [
    (10, 0, 0, 0, {"passed": 10, "failed": 0, "skipped": 0}),
    (10, 1, 0, 0, {"passed": 9, "failed": 1, "skipped": 0}),
    (10, 1, 2, 0, {"passed": 7, "failed": 3, "skipped": 0}),
    (10, 0, 0, 2, {"passed": 8, "failed": 0, "skipped": 2}),
])
def test_counts(tmp_path, t, f, e, s, expected):
    report = tmp_path / "r.xml"
    report.write_text(XML.format(t=t, f=f, e=e, s=s))
    assert sbs.counts(report) == expected


@pytest.mark.parametrize("text", [None, "<not xml"])
def test_a_missing_or_broken_report_is_a_failure(tmp_path, text):
    report = tmp_path / "r.xml"
    if text is not None:
        report.write_text(text)
    assert sbs.counts(report) == {"passed": 0, "failed": 1, "skipped": 0}


@pytest.mark.parametrize("parts, line", [
    ([{"passed": 3, "failed": 0, "skipped": 0}, {"passed": 2, "failed": 0, "skipped": 0}],
     "suite: 5 passed, 0 failed"),
    ([{"passed": 3, "failed": 1, "skipped": 0}, {"passed": 2, "failed": 2, "skipped": 1}],
     "suite: 5 passed, 3 failed, 1 skipped"),
])
def test_summary(parts, line):
    assert sbs.summary(parts) == line


@pytest.mark.parametrize("codes, code", [([0, 0], 0), ([1, 0], 1), ([0, 1], 1), ([0, 5], 5),
                                         ([2, 1], 2)])
def test_status(codes, code):
    assert sbs.status(codes) == code


OK, BAD = "def test_ok():\n    pass\n", "def test_bad():\n    assert False\n"


@pytest.mark.parametrize("cluster_body, jax_body, code, last", [
    (OK, OK, 0, "suite: 3 passed, 0 failed"),
    (BAD, OK, 1, "suite: 2 passed, 1 failed"),
    (OK, BAD, 1, "suite: 2 passed, 1 failed"),
])
def test_a_real_run_of_three_suites(tmp_path, cluster_body, jax_body, code, last):
    for part, body in (("cluster", cluster_body), ("jax", jax_body)):
        (tmp_path / "tests" / part).mkdir(parents=True)
        (tmp_path / "tests" / part / f"test_{part}.py").write_text(body)
    (tmp_path / "tests" / "test_other.py").write_text(OK)
    run = subprocess.run([sys.executable, str(ROOT / "scripts" / "side_by_side.py"), "--",
                          sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                          "--rootdir", str(tmp_path)],
                         cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert run.returncode == code, run.stdout + run.stderr
    lines = run.stdout.strip().splitlines()
    assert lines[-1] == last
    assert "======== tests/cluster, run beside the tests above ========" in lines
    assert "======== tests/jax/test_jax.py, run beside the tests above ========" in lines


def test_usage():
    assert sbs.main([]) == 2 and sbs.main(["pytest"]) == 2


def test_every_file_runs_once_and_the_long_ones_with_jax():
    """The rest leaves out what runs beside it; tests/cluster leaves out the files that run
    with tests/jax or in the fourth run, and those exist (a renamed one would run in
    tests/cluster again); tests/jax's run leaves JAX_WITH_REST to the rest; every file of
    tests/cluster on the long-job cluster runs with tests/jax (else each run would start that
    cluster)."""
    (cluster, cluster_out), (jax, jax_out), (own, own_out) = sbs.beside()
    jax_files = sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "tests/jax").glob(
        "test_*.py"))
    assert set(sbs.JAX_WITH_REST) < set(jax_files)
    assert jax == (*(p for p in jax_files if p not in sbs.JAX_WITH_REST), *sbs.WITH_JAX)
    assert sbs.rest_ignores() == ["--ignore=tests/cluster", *(f"--ignore={p}" for p in jax),
                                  *(f"--ignore={p}" for p in sbs.OWN_RUN)]
    own_cluster = tuple(p for p in sbs.OWN_RUN if p.startswith("tests/cluster/"))
    assert own_cluster and not set(own_cluster) & set(sbs.WITH_JAX)
    assert (cluster, cluster_out, jax_out, own, own_out) == (
        ("tests/cluster",), (*sbs.WITH_JAX, *own_cluster), (), sbs.OWN_RUN, ())
    files = (*sbs.WITH_JAX, *sbs.OWN_RUN)
    assert all((ROOT / p).is_file() for p in files), files
    on_longjob = {p.relative_to(ROOT).as_posix() for p in (ROOT / "tests/cluster").glob("test_*.py")
                  if "longjob_cluster" in p.read_text()}
    assert on_longjob and on_longjob <= set(sbs.WITH_JAX), on_longjob - set(sbs.WITH_JAX)


def test_a_run_of_no_path_here_is_not_started(tmp_path, monkeypatch):
    """A checkout with tests/cluster only: one run beside the rest (a run of no path would
    collect the whole suite again); tests/jax's run has this checkout's files of it."""
    (tmp_path / "tests" / "cluster").mkdir(parents=True)
    monkeypatch.chdir(tmp_path)
    assert sbs.runs_here() == [sbs.beside()[0]]
    (tmp_path / "tests" / "jax").mkdir()
    assert len(sbs.runs_here()) == 1  # no file of tests/jax here: no run of it
    for name in ("test_a.py", "test_bench_tiers.py"):
        (tmp_path / "tests" / "jax" / name).write_text("")
    assert [paths for paths, _ in sbs.runs_here()] == [("tests/cluster",),
                                                       ("tests/jax/test_a.py", *sbs.WITH_JAX)]
    (tmp_path / "tests" / "test_versions.py").write_text("")
    assert [paths for paths, _ in sbs.runs_here()][2] == sbs.OWN_RUN


def test_a_run_s_arguments_skip_paths_this_checkout_lacks(tmp_path, monkeypatch):
    (tmp_path / "tests" / "x").mkdir(parents=True)
    monkeypatch.chdir(tmp_path)
    assert sbs.beside_argv(["tests/x", "no/such/file.py"], ["tests/x/y.py"]) == [
        "--ignore=tests/x/y.py", "tests/x"]
