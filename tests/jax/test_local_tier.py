"""JAX's node-local tier for real on the two-node cluster (srun --mpi=pmix): LongJob's periodic
saves to a node-local directory (MPI_RESOLVER_LOCAL_DIR's pattern naming the node, as the
emulated nodes share one file system), each process's part copied to its partner on the other
node over MPI, every third save to the checkpoint directory too. Process 1 is SIGKILLed and
node2's local directory wiped: the next run restores process 1's part from its partner's
copy, at the local step, not the older shared one; each process gets its own part back. A
directory both nodes see is refused on both (exit 78)."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from mpi_resolver.long_jobs import ledger
from tests.cluster.test_scenarios import launch
from tests.docs.blocks import assert_sample, block
from tests.harness.saves import assert_first_tier_run
from tests.harness.slurm_cluster import SlurmCluster
from tests.jax.conftest import JAX_ENV

pytestmark = [pytest.mark.jax, pytest.mark.cluster]

#: Each process's state its own (host-local: process 1's w starts at 100); process 1 kills
#: itself after step ``argv[3]``; argv[4] "async": the tier's writes in the background, and
#: the step before the kill lasts until the last save's parts are on the node's disk.
TIERED = """import json, os, signal, sys, time
from mpi_resolver.jax import initialize
initialize(port_base="auto")
import jax, jax.numpy as jnp
from mpi_resolver.jax import LongJob
rank = jax.process_index()
job = LongJob(sys.argv[1], checkpoint_every=2, shared_every=3, local_dir=sys.argv[2],
              checkpoint_async=sys.argv[4] == "async")
here = sys.argv[2].replace("%N", os.environ["SLURMD_NODENAME"])
step, state = job.restore({"w": jnp.zeros(2) + 100 * rank})
print(json.dumps({"rank": rank, "start": step, "w": float(state["w"][0])}), flush=True)
while step < 12:
    step += 1
    state = {"w": state["w"] + 1}
    job.step_done(step, state)
    if step == int(sys.argv[3]) and rank == 1:
        parts = [os.path.join(here, str(step - 1), f"part-{r}") for r in (0, 1)]
        while not all(os.path.exists(p) for p in parts):
            time.sleep(0.05)
        os.kill(os.getpid(), signal.SIGKILL)
job.complete()
print(json.dumps({"rank": rank, "done": step, "w": float(state["w"][0])}), flush=True)
"""


def run(cluster: SlurmCluster, python: str, tmp: Path, local: str, kill_at: int,
        mode: str = "sync"):
    script = tmp / "tiered.py"
    script.write_text(TIERED)
    argv = ["srun", "-N2", "--ntasks-per-node=1", "--mpi=pmix", "--kill-on-bad-exit=1",
            python, str(script), str(tmp / "ckpt"), local, str(kill_at), mode]
    out = launch(cluster, argv, env=JAX_ENV, timeout=240, parse=False)
    said = [json.loads(x) for x in out.stdout.splitlines() if x.startswith("{")]
    return out, said


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_node_s_lost_part_comes_back_from_its_partner(jax_cluster: SlurmCluster,
                                                        jax_python: str, tmp_path: Path,
                                                        mode: str) -> None:
    local = str(tmp_path / "local-%N")
    first, said = run(jax_cluster, jax_python, tmp_path, local, 9, mode)
    assert first.returncode != 0, first.context()  # process 1 killed after step 9
    starts = sorted((x["rank"], x["start"], x["w"]) for x in said if "start" in x)
    assert starts == [(0, 0, 0.0), (1, 0, 100.0)], first.context()
    # step 6's write to the checkpoint directory, in the background, maybe cut by the kill
    assert_first_tier_run(tmp_path, [(2, "2 (node-local)"), (4, "4 (node-local)"), (6, "6"),
                                     (8, "8 (node-local)")], mode, 2, first.context())
    shutil.rmtree(tmp_path / "local-node2")  # node2's disk lost with its process
    second, said = run(jax_cluster, jax_python, tmp_path, local, 0, mode)
    assert second.returncode == 0, second.context()
    starts = sorted((x["rank"], x["start"], x["w"]) for x in said if "start" in x)
    assert starts == [(0, 8, 8.0), (1, 8, 108.0)], second.context()  # at the local step
    done = sorted((x["rank"], x["done"], x["w"]) for x in said if "done" in x)
    assert done == [(0, 12, 12.0), (1, 12, 112.0)], second.context()
    assert not list(tmp_path.glob("local-*")), second.context()  # completed: each node's goes
    restored = [r["checkpoint"] for r in ledger.read(str(tmp_path / "ckpt"))
                if r["event"] == "restore"]
    assert restored == [None, "8 (node-local: process 1 from its partner's copy)"], \
        second.context()
    newest = "(step 6|none)" if mode == "async" else "step 6"  # 6's write cut, in the background
    assert re.search(r"mpi_resolver: restored step 8 from the node-local tier \(process 1 from "
                     rf"its partner's copy\); the newest in {re.escape(str(tmp_path / 'ckpt'))}: "
                     f"{newest}$", second.stderr, re.M), second.context()
    assert "checkpoint 12 at step 12 (final)" in second.stderr, second.context()
    if mode == "sync":  # the docs' lines: a run whose saves are said as they are made
        assert_sample(block("jax-local-tier-lines"), first.stderr + second.stderr, "the runs")


@pytest.mark.parametrize("local, says", [
    ("local", "local_dir='{t}/local': {t}/local is one directory that nodes node1, node2 share, "
              "not each node's own: name the node in it (%N)"),
    ("gone/%N", "local_dir: the node-local directory {t}/gone/node1 cannot be made on node1: "
                "{t}/gone is not there."),
])
def test_a_directory_that_is_no_node_s_own_is_refused_on_both(
        jax_cluster: SlurmCluster, jax_python: str, tmp_path: Path, local: str,
        says: str) -> None:
    """Each process ends with 78 (a configuration error: supervise runs it not again), after
    leaving JAX's coordination service together; the line names the path."""
    out, said = run(jax_cluster, jax_python, tmp_path, str(tmp_path / local), 0)
    assert out.returncode == 78 and not said, out.context()
    assert says.format(t=tmp_path) in out.stderr, out.context()
