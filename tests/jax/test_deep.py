"""`mpi-resolver check --deep --framework jax` for real (rehearsal/jax_deep.py behind the
command line, .venv-jax's Python, which has no TensorFlow): one all-reduce through JAX across
four processes on two nodes, reported once by rank 0; a rank whose JAX does not import, and
one stuck in the import, named in the table within the timeout, the command ending with
status 1 and no process of it left; a rank stuck in the import with the GIL held (C code: an
extension's import on a hung file system), which no Python timer on it can stop: the others
give up at their gather and end without waiting for it in MPI_Finalize (that wait was the hang
of the first wiring), and the step ends."""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import List, Tuple

import pytest

from tests.cluster.test_scenarios import Run, assert_nothing_left, launch
from tests.docs.blocks import assert_sample, block
from tests.harness.slurm_cluster import SlurmCluster
from tests.jax.conftest import JAX_ENV

pytestmark = pytest.mark.cluster

SRUN = ["srun", "-N2", "--ntasks-per-node=2", "--mpi=pmix"]
DEEP = ["-m", "mpi_resolver", "check", "--deep", "--framework", "jax", "--gpus-per-node", "0",
        "--port-base", "auto"]
# Each rank writes its PID (kept by exec) to PIDS/RANK; rank RANK runs with a `jax` first on
# its path that fails, or hangs, when imported.
WRAP = ('echo $$ > "{pids}/$SLURM_PROCID"; if [ "$SLURM_PROCID" = "{rank}" ]; then '
        'PYTHONPATH={path}:$PYTHONPATH; export PYTHONPATH; fi; exec "$0" "$@"')
MISSING = "raise ImportError('no JAX on this node')\n"
STUCK = "import time\ntime.sleep(600)\n"
STUCK_WITH_GIL = "import ctypes\nctypes.PyDLL(None).sleep(600)\n"  # PyDLL keeps the GIL


def deep(cluster: SlurmCluster, python: str, timeout: float, tmp: Path, rank: int = -1,
         body: str = "") -> Tuple[Run, float, List[int]]:
    """Returns the run of check --deep --framework jax (rank ``rank`` importing a `jax` of
    ``body``), its seconds and the ranks' PIDs."""
    (tmp / "jax").mkdir()
    (tmp / "jax" / "__init__.py").write_text(body)
    (tmp / "pids").mkdir()
    wrap = WRAP.format(pids=tmp / "pids", rank=rank, path=tmp)
    start = time.monotonic()
    run = launch(cluster, [*SRUN, "sh", "-c", wrap, python, *DEEP, "--timeout", f"{timeout:g}"],
                 env=JAX_ENV, timeout=120, parse=False)
    took = time.monotonic() - start
    pids = [int(p.read_text()) for p in sorted((tmp / "pids").iterdir())]
    assert len(pids) == 4, run.context()
    return run, took, pids


def assert_ended(cluster: SlurmCluster, pids: List[int]) -> None:
    """Asserts that none of the ranks' processes runs (by PID), and nothing of the job."""
    assert_nothing_left(cluster)
    alive = []
    for pid in pids:
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except (FileNotFoundError, ProcessLookupError):
            continue
        if b"mpi_resolver" in cmdline:
            alive.append(pid)
    assert alive == [], f"still running: {alive}"


def test_deep_jax_all_reduce_on_four_processes(jax_cluster: SlurmCluster, jax_python: str,
                                               tmp_path: Path) -> None:
    run, took, _ = deep(jax_cluster, jax_python, 60, tmp_path)
    assert run.returncode == 0, run.context()
    assert run.stdout.count("DEEP OK") == 1, run.context()  # rank 0 alone reports
    assert "DEEP OK: JAX 0.10.2 on the job's 4 process(es), 4 device(s): the first " \
           "all-reduce gave 10, as expected" in run.stdout, run.context()
    rows = re.findall(r"^  rank (\d) on (node\d): JAX started at [\d.]+ s, all-reduce at "
                      r"[\d.]+ s$", run.stdout, re.M)
    assert rows == [("0", "node1"), ("1", "node1"), ("2", "node2"), ("3", "node2")], \
        run.context()
    assert "tensorflow" not in run.stderr.lower(), run.context()
    assert took < 60, run.context()
    assert_sample(block("deep-jax-ok"), run.stdout)


@pytest.mark.parametrize("rank, node, body, timeout, state, error, fix, sample", [
    pytest.param(1, "node1", MISSING, 30, "failed", "ImportError: no JAX on this node",
                 "install JAX", False, id="JAX missing"),
    pytest.param(2, "node2", STUCK, 30, "stuck", "did not finish within 30 s",
                 "importing JAX is slow", True, id="import stuck"),
])
def test_deep_jax_names_the_rank_that_did_not_answer(jax_cluster: SlurmCluster,
                                                     jax_python: str, tmp_path: Path, rank,
                                                     node, body, timeout, state, error,
                                                     fix, sample) -> None:
    run, took, pids = deep(jax_cluster, jax_python, timeout, tmp_path, rank, body)
    assert run.returncode == 1, run.context()  # not 137: no rank left without MPI_Finalize
    assert run.stdout.count("DEEP FAILED") == 1, run.context()
    assert f"DEEP FAILED: rank(s) {rank} did not get to JAX's first all-reduce (--timeout " \
           f"{timeout} s)" in run.stdout, run.context()
    assert re.search(rf"^{rank}\s+{node}\s+{state}\s+import jax\s+{re.escape(error)}\s+{fix}",
                     run.stdout, re.M), run.context()
    assert took < timeout + 20, run.context()
    assert_ended(jax_cluster, pids)  # the stuck rank's process ended too
    if sample:  # the docs' example
        assert_sample(block("deep-jax-stuck"), run.stdout)


def test_deep_jax_a_rank_stuck_with_the_gil_held_does_not_hang_the_others(
        jax_cluster: SlurmCluster, jax_python: str, tmp_path: Path) -> None:
    """Rank 2's main thread never runs again, so it never comes to the gather after the
    import: the others give up there (the gathers' bound, twice the timeout and 10 s), report
    it, and end without MPI_Finalize (which waited for rank 2 for ever); Slurm then ends the
    step."""
    run, took, pids = deep(jax_cluster, jax_python, 8, tmp_path, 2, STUCK_WITH_GIL)
    assert run.returncode != 0, run.context()
    assert "DEEP FAILED" in run.stdout and "a gather stalled" in run.stdout, run.context()
    assert took < 2 * 8 + 10 + 20, run.context()
    assert_ended(jax_cluster, pids)
