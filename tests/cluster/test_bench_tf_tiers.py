"""benchmarks/tf_tiers.py, quick, for real: one size on its own throw-away 2-node cluster, each
figure measured (the checkpoint directory and the node-local tier: what the training paid per
save at once and in the background, the write, dd to each directory; the restore from each
node's own copy, from the partner's and from the checkpoint directory) and judged against the
goals; the kill with and without the tier, the steps lost; all written to --json. Its
arguments' refusals and verdicts: tests/unit/test_bench_tf_tiers.py."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest

from tests.bench_kills import check_kills
from tests.cluster.conftest import PY

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
NUMBER = r"(\d+\.\d\d\d) s"


def test_the_quick_benchmark_measures_and_judges(tmp_path: Path) -> None:
    out = tmp_path / "tf_tiers.json"
    p = subprocess.run([PY, str(ROOT / "benchmarks" / "tf_tiers.py"), "--quick", "--kill-at",
                        "40", "--json", str(out)], capture_output=True, text=True,
                       timeout=1200, cwd=ROOT, stdin=subprocess.DEVNULL)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    for where in (r"checkpoint directory \(a file server on a 1000 Mbit/s link\)",
                  r"node-local tier \(/dev/shm, a partner's part over MPI\)"):
        assert re.search(rf"^ +10 MiB, {where}: at once the training paid {NUMBER} a save; in "
                         rf"the background {NUMBER} \(\d+\.\d\d of at once\), the write "
                         rf"{NUMBER} \(\d+\.\d\d of dd's speed there\); a worker's memory "
                         r"at most \d+ MiB$", p.stdout,
                         re.M), p.stdout
    assert re.search(rf"^ +10 MiB, restore: {NUMBER} from each node's own copy, {NUMBER} with "
                     rf"worker 1's from its partner's part, {NUMBER} from the checkpoint "
                     r"directory$", p.stdout, re.M), p.stdout
    assert re.search(r"^goal at 10 MiB \(shared\): the write >= 0\.5 of dd: (met|not met) "
                     r"\(\d+\.\d\d\)$", p.stdout, re.M), p.stdout
    found = json.loads(out.read_text())
    assert found["shared_mbit"] == 1000
    [size] = found["sizes"]
    assert size["mib"] == 10 and size["rounds"] == 1 and size["every"] >= 20, size
    # measured (the printed figures are rounded)
    assert all(v > 0 for k, v in size.items() if k.endswith("_s")), size
    for name in ("shared", "local"):
        assert size[f"{name}_stall_ratio"] == pytest.approx(
            size[f"{name}_background_paid_s"] / size[f"{name}_at_once_paid_s"])
        assert size[f"{name}_of_dd"] == pytest.approx(
            size[f"dd_{name}_s"] / size[f"{name}_background_write_s"])
        assert re.search(rf"^goal at 10 MiB \({name}\): the stall <= 0\.1 x at once: "
                         r"(met|not met) \(\d+\.\d\d\d\)$", p.stdout, re.M), p.stdout
    assert re.search(r"^goal at 10 MiB: the restore from the local tier faster than from the "
                     r"checkpoint directory: (met|not met) ", p.stdout, re.M), p.stdout
    check_kills(found["kills"], p.stdout, 10, 40, "checkpoint directory only",
                "'auto' chose last: ")
