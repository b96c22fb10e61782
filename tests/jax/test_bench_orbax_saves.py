"""benchmarks/orbax_saves.py, quick, for real: its two sizes on its own throw-away 2-node
cluster, each figure measured (at once, the background's stall and write, the restore, dd)
and judged against the goals, written to --json; and its refusals of arguments that could
measure nothing."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest

from tests.jax.conftest import ROOT
from tests.jax.test_edge import clean_env

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

BENCH = str(ROOT / "benchmarks" / "orbax_saves.py")
NUMBER = r"(\d+\.\d\d\d) s"


def test_the_quick_benchmark_measures_and_judges(jax_python: str, tmp_path: Path) -> None:
    out = tmp_path / "orbax_saves.json"
    p = subprocess.run([jax_python, BENCH, "--quick", "--json", str(out)], capture_output=True,
                       text=True, timeout=600, env=clean_env(), cwd=ROOT)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    for mib in (10, 100):
        line = re.search(rf"^ +{mib} MiB: at once {NUMBER}; in the background the step pays "
                         rf"{NUMBER} \((\d+\.\d\d) of at once\), the write {NUMBER} "
                         rf"\((\d+\.\d\d) of dd's speed, dd {NUMBER}\); restore {NUMBER}$",
                         p.stdout, re.M)
        assert line, p.stdout
        assert all(float(x) > 0 for x in line.groups()), line.group(0)  # measured
        assert re.search(rf"^goal at {mib} MiB: the stall <= 0\.1 x at once: (met|not met) "
                         r"\(\d+\.\d\d\); the write >= 0\.5 of dd: (met|not met) "
                         r"\(\d+\.\d\d\)$", p.stdout, re.M), p.stdout
    found = json.loads(out.read_text())
    assert [f["mib"] for f in found] == [10, 100]
    for f in found:
        assert f["stall_ratio"] == pytest.approx(f["stall_s"] / f["at_once_s"])
        assert f["write_of_dd"] == pytest.approx(f["dd_s"] / f["write_s"])


@pytest.mark.parametrize("args, says", [
    (["--repeat", "0"], "--repeat must be at least 1"),
    (["--mib", "1"], "each --mib at least 2"),
    (["--mib", "2", "--repeat", "1"], None),
])
def test_arguments_that_could_measure_nothing_are_refused(jax_python: str, args: list,
                                                          says) -> None:
    code = (f"import sys; sys.path.insert(0, {str(ROOT / 'benchmarks')!r}); "
            f"import orbax_saves; a = orbax_saves.parse_args({args!r}); print('OK', a.mib)")
    p = subprocess.run([jax_python, "-c", code], capture_output=True, text=True, timeout=60,
                       env=clean_env())
    if says is None:
        assert p.returncode == 0 and "OK [2]" in p.stdout, p.stderr
    else:
        assert p.returncode == 2 and says in p.stderr, p.stderr
