"""The proposed `check --deep --framework jax` (mpi_resolver/rehearsal/jax_deep.py) for real,
through tests/jax/deep_driver.py (what the command line would run): one all-reduce through
JAX across four processes on two nodes; a rank whose JAX does not import, and one stuck in
the import, named in the table within the timeout."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from tests.cluster.test_scenarios import assert_nothing_left, launch
from tests.harness.slurm_cluster import SlurmCluster
from tests.jax.conftest import HERE, JAX_ENV

pytestmark = pytest.mark.cluster

DRIVER = str(HERE / "deep_driver.py")
SRUN = ["srun", "-N2", "--ntasks-per-node=2", "--mpi=pmix"]
# Rank RANK runs with a `jax` first on its path that fails (or hangs) when imported.
ON_ONE_RANK = ('if [ "$SLURM_PROCID" = "{rank}" ]; then PYTHONPATH={path}:$PYTHONPATH; '
               'export PYTHONPATH; fi; exec "$0" "$@"')


def fake_jax(directory: Path, body: str) -> str:
    (directory / "jax").mkdir(parents=True)
    (directory / "jax" / "__init__.py").write_text(body)
    return str(directory)


def deep(cluster: SlurmCluster, python: str, timeout: float, wrap=()):
    run = launch(cluster, [*SRUN, *wrap, python, DRIVER, str(timeout)], env=JAX_ENV,
                 timeout=120, parse=False)
    lines = [line for line in run.stdout.splitlines() if line.startswith("JSON ")]
    assert len(lines) == 1, run.context()  # rank 0 alone reports
    return run, json.loads(lines[0][5:])


def test_deep_jax_all_reduce_on_four_processes(jax_cluster: SlurmCluster,
                                               jax_python: str) -> None:
    run, report = deep(jax_cluster, jax_python, 60)
    assert run.returncode == 0, run.context()
    assert "DEEP OK: JAX 0.10.2 on the job's 4 process(es), 4 device(s): the first " \
           "all-reduce gave 10, as expected" in run.stdout, run.context()
    assert report["ok"] and report["gathered"] and report["missing"] == [], report
    assert [o["rank"] for o in report["outcomes"]] == [0, 1, 2, 3], report


@pytest.mark.parametrize("rank, body, state, says", [
    pytest.param(1, "raise ImportError('no JAX on this node')\n", "failed",
                 ("ImportError: no JAX on this node", "install JAX"), id="JAX missing"),
    pytest.param(2, "import time\ntime.sleep(600)\n", "stuck",
                 ("did not finish within 8 s", "importing JAX is slow"), id="import stuck"),
])
def test_deep_jax_names_the_rank_that_did_not_answer(jax_cluster: SlurmCluster,
                                                     jax_python: str, tmp_path: Path,
                                                     rank, body, state, says) -> None:
    path = fake_jax(tmp_path, body)
    start = time.monotonic()
    run, report = deep(jax_cluster, jax_python, 8,
                       wrap=("sh", "-c", ON_ONE_RANK.format(rank=rank, path=path)))
    assert run.returncode != 0 and not report["ok"], run.context()
    assert report["missing"] == [rank], report
    assert f"DEEP FAILED: rank(s) {rank} did not get to JAX's first all-reduce" in run.stdout, \
        run.context()
    own = report["outcomes"][rank]
    assert own["state"] == state and own["stage"] == "import jax", report
    assert all(s in run.stdout for s in says), run.context()
    assert time.monotonic() - start < 60, run.context()
    assert_nothing_left(jax_cluster)  # the stuck rank's process ended too
