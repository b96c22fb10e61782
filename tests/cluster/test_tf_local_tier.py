"""TensorFlow's node-local tier for real on the two-node cluster (srun --mpi=pmix,
MultiWorkerMirroredStrategy): SlurmTerminationConfig's periodic saves to a node-local directory
(the pattern names the node, as the emulated nodes share one file system), each worker's part
the whole state (its partner's own part is its copy: none sent), every third save to the
checkpoint directory too. Worker 1 is SIGKILLed and node2's local directory wiped: the next run
restores worker 1's state from its partner's part over MPI, at the local step, not the older
shared one: worker 0's state (worker 1's own starts at 100, outside the strategy, and is lost
with its node, as the checkpoint directory gives every worker worker 0's)."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from mpi_resolver.long_jobs import ledger
from tests.cluster.conftest import PY
from tests.cluster.test_scenarios import launch
from tests.docs.blocks import assert_sample, block
from tests.harness.saves import assert_first_tier_run
from tests.harness.slurm_cluster import SlurmCluster

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

#: Worker 1 kills itself after step argv[3], once step argv[3] - 1's parts are on both nodes;
#: argv[4] "async": the saves' writes in the background.
TIERED = """import json, os, signal, sys, time
import tensorflow as tf
from mpi_resolver import MPIClusterResolver, SlurmTerminationConfig
directory, local, kill_at, mode = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
resolver = MPIClusterResolver(port_base="auto", gpus_per_node=0)  # tensorflow-cpu
strategy = tf.distribute.MultiWorkerMirroredStrategy(cluster_resolver=resolver)
rank = resolver.task_id
w = tf.Variable(tf.zeros([2]) + 100.0 * rank)  # each worker's own
config = SlurmTerminationConfig(resolver, checkpoint_every=2, shared_every=3, local_dir=local,
                                checkpoint_async=mode == "async")
handler = config.handler(resolver, tf.train.Checkpoint(w=w), directory)
print(json.dumps({"rank": rank, "start": int(handler.total_run_calls),
                  "w": float(w.numpy()[0])}), flush=True)

@tf.function
def together():
    return strategy.run(lambda: tf.distribute.get_replica_context().all_reduce(
        "sum", tf.constant(1.0)))

def train_step():
    w.assign_add(tf.ones([2]))
    together()

while handler.total_run_calls < 12:
    handler.run(train_step)
    step = int(handler.total_run_calls)
    if step == kill_at and rank == 1:
        parts = [os.path.join(local.replace("%N", f"node{r + 1}"), str(step - 1), f"part-{r}")
                 for r in (0, 1)]
        while not all(os.path.exists(p) for p in parts):
            time.sleep(0.05)
        os.kill(os.getpid(), signal.SIGKILL)
config.complete()
print(json.dumps({"rank": rank, "done": step, "w": float(w.numpy()[0])}), flush=True)
"""


def run(cluster: SlurmCluster, tmp: Path, local: str, kill_at: int, mode: str):
    script = tmp / "tiered.py"
    script.write_text(TIERED)
    argv = ["srun", "-N2", "--ntasks-per-node=1", "--mpi=pmix", "--kill-on-bad-exit=1",
            PY, str(script), str(tmp / "ckpt"), local, str(kill_at), mode]
    out = launch(cluster, argv, timeout=300, parse=False)
    said = [json.loads(x) for x in out.stdout.splitlines() if x.startswith("{")]
    return out, said


def starts(said: list) -> list:
    return sorted((x["rank"], x["start"], x["w"]) for x in said if "start" in x)


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_node_s_lost_state_comes_back_from_its_partner(cluster: SlurmCluster, mode: str) -> None:
    tmp = Path(cluster.workdir) / f"tf-tier-{mode}"
    tmp.mkdir()
    local = str(tmp / "local-%N")
    first, said = run(cluster, tmp, local, 9, mode)
    assert first.returncode != 0, first.context()  # worker 1 killed after step 9
    assert starts(said) == [(0, 0, 0.0), (1, 0, 100.0)], first.context()
    assert_first_tier_run(tmp, [(2, "2 (node-local)"), (4, "4 (node-local)"), (6, "ckpt-3"),
                                (8, "8 (node-local)")], mode, 3, first.context(),
                          replicated=True)
    shutil.rmtree(tmp / "local-node2")  # node2's disk lost with its worker
    second, said = run(cluster, tmp, local, 0, mode)
    assert second.returncode == 0, second.context()
    assert starts(said) == [(0, 8, 8.0), (1, 8, 8.0)], second.context()  # the local step
    done = sorted((x["rank"], x["done"], x["w"]) for x in said if "done" in x)
    assert done == [(0, 12, 12.0), (1, 12, 12.0)], second.context()
    assert not list(tmp.glob("local-*")), second.context()  # completed: each node's goes
    restored = [r["checkpoint"] for r in ledger.read(str(tmp / "ckpt"))
                if r["event"] == "restore"]
    assert restored == [None, "8 (node-local: process 1 from its partner's part)"], \
        second.context()
    chief = re.escape(str(tmp / "ckpt" / "chief"))
    assert re.search(r"mpi_resolver: restored step 8 from the node-local tier \(process 1 from "
                     rf"its partner's part\); the newest in {chief}: {chief}/ckpt-3$",
                     second.stderr, re.M), second.context()
    assert re.search(r"checkpoint ckpt-\d+ at step 12 \(final\)", second.stderr), \
        second.context()
    if mode == "sync":  # the docs' lines: a run whose saves are said as they are made
        assert_sample(block("tf-local-tier-lines"), first.stderr + second.stderr, "the runs")


def test_a_directory_both_nodes_see_is_refused_on_both(cluster: SlurmCluster) -> None:
    """Each worker ends with 78 (a configuration error: supervise runs it not again); the
    line names the path."""
    tmp = Path(cluster.workdir) / "tf-tier-shared"
    tmp.mkdir()
    out, said = run(cluster, tmp, str(tmp / "local"), 0, "sync")
    assert out.returncode == 78 and not said, out.context()
    assert f"local_dir='{tmp}/local': {tmp}/local is one directory that nodes node1, node2 " \
           "share, not each node's own: name the node in it (%N)" in out.stderr, out.context()
