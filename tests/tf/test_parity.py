"""Parity with TensorFlow's SlurmClusterResolver, in the same process, on the same inputs."""

from __future__ import annotations

import pytest

from tests.conftest import write_fake_nvidia_smi
from tests.parity_cases import TF_TEST_CASES, Case, generate, generate_gpu_requests, observe

pytestmark = pytest.mark.tf
tf = pytest.importorskip("tensorflow")
TFResolver = tf.distribute.cluster_resolver.SlurmClusterResolver


def _both(ours, env, kwargs, smi_path=None):
    expected = observe(TFResolver, env, kwargs, smi_path)
    actual = observe(ours, env, dict(kwargs, source="slurm"), smi_path)
    auto = observe(ours, env, kwargs, smi_path)
    return expected, actual, auto


@pytest.mark.parametrize("name,env,kwargs", TF_TEST_CASES, ids=[c[0] for c in TF_TEST_CASES])
def test_tensorflow_own_cases(ours, name, env, kwargs):
    expected, actual, auto = _both(ours, env, kwargs)
    assert actual == expected
    assert auto == expected


def test_tensorflow_master_override(ours, monkeypatch):
    """testSimpleMasterRetrieval: task_type/task_id set by hand, rpc_layer changed."""
    _, env, kwargs = TF_TEST_CASES[2]
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    results = []
    for cls in (TFResolver, ours):
        r = cls(**kwargs)
        r.task_type, r.task_id = "worker", 1
        first = r.master()
        r.rpc_layer = "ab"
        results.append((first, r.master("ps", 0), r.master("ps", 0, rpc_layer="test")))
    assert results[0] == results[1] == ("grpc://t02n43:8888", "ab://t02n13:8888",
                                         "test://t02n13:8888")


def test_generated_cases(ours, tmp_path, capsys):
    """A few hundred generated jobs: identical where TensorFlow is right, placement-true
    (each rank's address on the node Slurm put it on) where it is not."""
    cases = generate(400)
    compared = differing = 0
    differences = []
    for case in cases:
        smi = write_fake_nvidia_smi(tmp_path / f"smi{case.smi_gpus}", case.smi_gpus) \
            if case.smi_gpus is not None else None
        mine = observe(ours, case.env, dict(case.kwargs, source="slurm"), smi)
        if case.tf_right:
            expected = observe(TFResolver, case.env, case.kwargs, smi)
            if mine != expected:
                differences.append((case, mine, expected))
            compared += 1
        else:
            differing += 1
            expected = observe(TFResolver, case.env, case.kwargs, smi)
            assert mine["cluster_spec"] != expected["cluster_spec"], case
            # Block distribution: ranks fill the nodes in SLURM_STEP_NODELIST order.
            placement = [h for h, n in zip(case.hosts, case.counts, strict=False) for _ in range(n)]
            addresses = [a for job in sorted(mine["cluster_spec"])
                         for a in mine["cluster_spec"][job]]
            assert [a.rsplit(":", 1)[0] for a in addresses] == placement, case
            assert len(set(addresses)) == len(addresses)
    kinds = {kind: sum(kind in c.env["SLURM_STEP_NODELIST"] for c in cases)
             for kind in ("hpc.n", "10.0.0.", "rack1-n", "nid")}
    with capsys.disabled():
        print(f"\nparity: compared {compared} generated cases with TensorFlow's resolver, "
              f"{len(differences)} differences; {differing} cases where TensorFlow's layout is "
              f"wrong were checked against Slurm's placement instead; node names: {kinds}")
    assert differences == [], differences[:3]
    assert compared >= 250 and differing >= 40
    assert all(n >= 20 for n in kinds.values()), kinds


def _refused(case: Case) -> bool:
    """Whether mpi_resolver must refuse a GPU-request case TensorFlow gets wrong: gpus_per_task
    asks for GPUs that a node's list cannot give each task, and Slurm did not give that list
    for sharing (its own CUDA_VISIBLE_DEVICES, fewer GPUs than tasks)."""
    per_task = case.kwargs.get("gpus_per_task")
    if not per_task:
        return False
    listed = "CUDA_VISIBLE_DEVICES" in case.env and "gpus_per_node" not in case.kwargs
    m = len(_gpus_of(case))
    for n in case.counts:
        if m == 0 or (n > m and (not listed or per_task > m)) or (n <= m and n * per_task > m):
            return True
    return False


def _gpus_of(case: Case):
    if "gpus_per_node" in case.kwargs:
        return [str(g) for g in range(case.kwargs["gpus_per_node"])]
    if "CUDA_VISIBLE_DEVICES" in case.env:
        return [g for g in case.env["CUDA_VISIBLE_DEVICES"].split(",") if g]
    return [str(g) for g in range(case.smi_gpus or 0)]


def test_generated_gpu_requests(ours, tmp_path, capsys):
    """Explicit gpus_per_task and gpus_per_node against every GPU source: TensorFlow's answer,
    its 'Requested more GPUs per node than available' too, where it is right; where it is
    not, a refusal exactly where the request cannot be met, else GPUs of the node's list, some
    wherever the list has some and gpus_per_task is not 0."""
    cases = generate_gpu_requests(300)
    differences, compared, refused = [], 0, 0
    for case in cases:
        smi = write_fake_nvidia_smi(tmp_path / f"smi{case.smi_gpus}", case.smi_gpus) \
            if case.smi_gpus is not None else None
        mine = observe(ours, case.env, dict(case.kwargs, source="slurm"), smi)
        mine.pop("message", None)
        refused += "error" in mine
        if case.tf_right:
            expected = observe(TFResolver, case.env, case.kwargs, smi)
            expected.pop("message", None)
            compared += 1
            if mine != expected:
                differences.append((case, mine, expected))
            continue
        assert ("error" in mine) is _refused(case), (case, mine)
        if "error" not in mine:
            got = [g for g in mine["CUDA_VISIBLE_DEVICES"].split(",") if g]
            assert set(got) <= set(_gpus_of(case)), (case, mine)
            assert bool(got) is (bool(_gpus_of(case)) and case.kwargs.get("gpus_per_task") != 0)
    with capsys.disabled():
        print(f"\nparity of GPU requests: compared {compared} generated cases with TensorFlow's "
              f"resolver, {len(differences)} differences; {len(cases) - compared} where "
              f"TensorFlow is wrong checked against the rule; {refused} refused in all")
    assert differences == [], differences[:3]
    assert compared >= 100 and len(cases) - compared >= 60 and refused >= 60
