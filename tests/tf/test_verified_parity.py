"""The cross-checked resolution (Slurm's variables verified by every rank's MPI record) gives
TensorFlow's own answer, rank by rank, where TensorFlow is right: the same ClusterSpec and
CUDA_VISIBLE_DEVICES as the installed SlurmClusterResolver on the same variables."""

from __future__ import annotations

import pytest

from tests.parity_cases import observe
from tests.unit.jobs import run_job, srun_env

pytestmark = pytest.mark.tf
tf = pytest.importorskip("tensorflow")
TFResolver = tf.distribute.cluster_resolver.SlurmClusterResolver


def _block(hosts, counts):
    return [h for h, n in zip(hosts, counts, strict=False) for _ in range(n)]


@pytest.mark.parametrize("hosts, counts, extra, kwargs", [
    pytest.param(["node1", "node2"], [3, 1], {"CUDA_VISIBLE_DEVICES": "0,1,2,3"}, {},
                 id="srun -N2 -n4: tasks 3,1"),
    pytest.param(["node1", "node2"], [2, 2], {"CUDA_VISIBLE_DEVICES": "0,1,2,3",
                                              "SLURM_GPUS_ON_NODE": "4"}, {},
                 id="srun -N2 --ntasks-per-node=2 --gpus-per-node=4"),
    pytest.param(["a01", "a02", "a03"], [1, 1, 1], {"CUDA_VISIBLE_DEVICES": "0,1"},
                 {"jobs": {"chief": 1, "worker": 2}}, id="chief and workers, one per node"),
    pytest.param(["gpu7"], [4], {"CUDA_VISIBLE_DEVICES": "0,1,2,3,4,5,6,7"},
                 {"gpus_per_task": 1, "port_base": 2222}, id="one node, explicit arguments"),
])
def test_verified_resolution_equals_tensorflow_on_every_rank(hosts, counts, extra, kwargs):
    placement = _block(hosts, counts)
    envs = [srun_env(r, hosts, counts, placement, **extra) for r in range(len(placement))]
    for rank, env in enumerate(envs):
        ours = run_job(envs, placement, rank=rank, verify=True, **kwargs)
        theirs = observe(TFResolver, env, kwargs)
        assert ours.verified
        assert ours.cluster() == theirs["cluster_spec"], rank
        assert ours.task == theirs["task"], rank
        assert ours.visible_devices == theirs["CUDA_VISIBLE_DEVICES"], rank
