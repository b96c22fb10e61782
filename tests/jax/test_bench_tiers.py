"""benchmarks/tiers.py, quick, for real: its two sizes on its own throw-away 2-node cluster,
each figure measured (the shared directory through Orbax: at once, the background's stall
and write, the restore, dd; the node-local tier: its save, dd there, the restore from each
node's own copy and from the partner's) and judged against the goals; the kill with and
without the tier, the steps lost; all written to --json; and its refusals of arguments that
could measure nothing."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest

from tests.bench_kills import check_kills
from tests.jax.conftest import ROOT
from tests.jax.test_edge import clean_env

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

BENCH = str(ROOT / "benchmarks" / "tiers.py")
NUMBER = r"(\d+\.\d\d\d) s"


def test_the_quick_benchmark_measures_and_judges(jax_python: str, tmp_path: Path) -> None:
    out = tmp_path / "tiers.json"
    p = subprocess.run([jax_python, BENCH, "--quick", "--json", str(out)], capture_output=True,
                       text=True, timeout=900, env=clean_env(), cwd=ROOT)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    for mib in (10, 100):
        shared = re.search(
            rf"^ +{mib} MiB, shared directory \(a file server on a 1000 Mbit/s link; Orbax\): "
            rf"at once {NUMBER}; in the background "
            rf"the step pays {NUMBER} \((\d+\.\d\d) of at once\), the write {NUMBER} "
            rf"\((\d+\.\d\d) of dd's speed\); restore {NUMBER}$", p.stdout, re.M)
        local = re.search(
            rf"^ +{mib} MiB, node-local tier \(/dev/shm, partner's copy over MPI\): at once "
            rf"{NUMBER}; in the background the step pays {NUMBER} \((\d+\.\d\d) of at once\), "
            rf"the write {NUMBER} \((\d+\.\d\d) of dd's speed\); restore {NUMBER} from each "
            rf"node's own copy, {NUMBER} with process 1's from its partner$", p.stdout, re.M)
        assert shared and local, p.stdout
        assert re.search(rf"^goal at {mib} MiB: the stall <= 0\.1 x at once: (met|not met) "
                         r"\(\d+\.\d\d\); the write >= 0\.5 of dd: (met|not met) "
                         r"\(\d+\.\d\d\)$", p.stdout, re.M), p.stdout
        assert re.search(rf"^goal at {mib} MiB \(tier\): the stall <= 0\.1 x at once: "
                         r"(met|not met) \(\d+\.\d\d\)$", p.stdout, re.M), p.stdout
        assert re.search(rf"^goal at {mib} MiB: the restore from the local tier faster than "
                         r"from the shared directory: (met|not met) ", p.stdout, re.M), p.stdout
    found = json.loads(out.read_text())
    assert found["shared_mbit"] == 1000
    assert [f["mib"] for f in found["sizes"]] == [10, 100]
    for f in found["sizes"]:
        # measured (the printed figures are rounded: a 10 MiB part's stall prints 0.000 s)
        assert all(v > 0 for k, v in f.items() if k.endswith("_s")), f
        assert f["stall_ratio"] == pytest.approx(f["stall_s"] / f["at_once_s"])
        assert f["write_of_dd"] == pytest.approx(f["dd_s"] / f["write_s"])
        assert f["local_stall_ratio"] == pytest.approx(f["local_stall_s"] /
                                                       f["local_at_once_s"])
        assert f["local_of_dd"] == pytest.approx(f["dd_local_s"] / f["local_write_s"])
    check_kills(found["kills"], p.stdout, 100, 80, "shared only", "'auto' chose last: ")


@pytest.mark.parametrize("args, says", [
    (["--repeat", "0"], "--repeat must be at least 1"),
    (["--mib", "1"], "each --mib at least 2"),
    (["--kill-at", "19"], "--kill-at at least 20"),
    (["--kill-at", "20", "--repeat", "1"], None),
    (["--mib", "2", "--repeat", "1"], None),
])
def test_arguments_that_could_measure_nothing_are_refused(jax_python: str, args: list,
                                                          says) -> None:
    code = (f"import sys; sys.path.insert(0, {str(ROOT / 'benchmarks')!r}); "
            f"import tiers; a = tiers.parse_args({args!r}); print('OK', a.mib)")
    p = subprocess.run([jax_python, "-c", code], capture_output=True, text=True, timeout=60,
                       env=clean_env())
    if says is None:
        assert p.returncode == 0 and "OK" in p.stdout, p.stderr
    else:
        assert p.returncode == 2 and says in p.stderr, p.stderr
