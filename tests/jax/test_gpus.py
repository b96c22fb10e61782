"""local_device_ids as Slurm binds GPUs, for real: GRES GPUs that Slurm allocates and binds on
device files (no GPU behind them, JAX on CPU), every task a JAX process started by
mpi_resolver.jax.initialize; beside it, in the same process, what JAX's own Slurm detection
would pass (``[SLURM_LOCALID]``, jax-ml/jax#23452, #30073).

What JAX is given is read back from JAX itself after the start (``jax_cuda_visible_devices``,
which local_device_ids sets), not from the package's answer.
"""

from __future__ import annotations

from typing import List, Optional

import pytest

from tests.harness.slurm_cluster import SlurmCluster
from tests.jax.test_launches import assert_all_together, run_probe

pytestmark = pytest.mark.cluster


def visible(ids: Optional[List[int]]) -> str:
    """Returns jax_cuda_visible_devices as local_device_ids ``ids`` set it ('all': unset)."""
    return "all" if ids is None else ",".join(str(i) for i in ids)


# srun options (node1: 4 GRES GPUs), the tasks' CUDA_VISIBLE_DEVICES as Slurm sets them, the
# package's local_device_ids per task, and JAX's own (its SLURM_LOCALID rule).
CASES = [
    pytest.param(["-n2", "--gpus-per-task=1"], ["0", "1"], [[0], [0]], [[0], [1]],
                 id="--gpus-per-task=1: task 1 sees one GPU, JAX's own asks for a 2nd"),
    pytest.param(["-n2", "--gpus-per-task=2"], ["0,1", "2,3"], [[0, 1], [0, 1]], [[0], [1]],
                 id="--gpus-per-task=2: both GPUs, JAX's own one each"),
    pytest.param(["-n2", "--gpus-per-node=4"], ["0,1,2,3"] * 2, [[0, 1], [2, 3]], [[0], [1]],
                 id="--gpus-per-node=4, 2 tasks: the node's GPUs split"),
    pytest.param(["-n4", "--ntasks-per-gpu=2", "--gpus=2"], ["0", "0", "1", "1"],
                 [[0]] * 4, [[0], [1], [2], [3]],
                 id="--ntasks-per-gpu=2: shared GPUs, JAX's own past the one visible"),
]


@pytest.mark.parametrize("options, cvd, ours, theirs", CASES)
def test_local_device_ids_per_slurm_binding(jax_gres_cluster: SlurmCluster, jax_python: str,
                                            options, cvd, ours, theirs) -> None:
    n = len(cvd)
    found = run_probe(jax_gres_cluster, ["srun", "-N1", "-w", "node1", "--mpi=pmix", *options],
                      jax_python, "package", {"port_base": "auto"}, n=n)
    assert_all_together(found, n)
    assert [r["cvd"] for r in found] == cvd, found
    assert [r["ids"] for r in found] == ours, found
    assert [r["visible"] for r in found] == [visible(ids) for ids in ours], found
    assert [r["jax_own"]["local_device_ids"] for r in found] == theirs, found


@pytest.mark.parametrize("options, cvd, visible_ids", [
    pytest.param(["--gpus-per-task=1"], ["0", "1"], ["0", "0"], id="one GPU a task"),
    pytest.param(["--gpus-per-task=2"], ["0,1", "2,3"], ["0,1", "0,1"], id="two GPUs a task"),
])
def test_registered_detection_gives_jax_the_same_devices(jax_gres_cluster: SlurmCluster,
                                                         jax_python: str, options, cvd,
                                                         visible_ids) -> None:
    """register(), then JAX's own initialize(cluster_detection_method='mpi_resolver'): the
    devices JAX restricts itself to are the package's (one GPU: through JAX's local process
    id; several: set by the package), not [SLURM_LOCALID]."""
    found = run_probe(jax_gres_cluster, ["srun", "-N1", "-w", "node1", "-n2", "--mpi=pmix",
                                         *options],
                      jax_python, "register", {"port_base": "auto"}, n=2)
    assert_all_together(found, 2)
    assert [r["cvd"] for r in found] == cvd, found
    assert [r["visible"] for r in found] == visible_ids, found
