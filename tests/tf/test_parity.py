"""Parity with TensorFlow's SlurmClusterResolver, in the same process, on the same inputs."""

from __future__ import annotations

import pytest

from tests.conftest import write_fake_nvidia_smi
from tests.parity_cases import TF_TEST_CASES, generate, observe

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
