"""GPU allocation where TensorFlow's resolver is wrong or crashes (DESIGN.md section 3)."""

from __future__ import annotations

import glob
import os
from unittest import mock

import pytest

from tests.conftest import fake_mig, write_fake_nvidia_smi
from tests.parity_cases import observe

pytestmark = pytest.mark.tf
tf = pytest.importorskip("tensorflow")
TFResolver = tf.distribute.cluster_resolver.SlurmClusterResolver


def step(rank, nodes="n[1-2]", per_node="2(x2)", **extra):
    tasks = sum(int(p.split("(")[0]) * (int(p.split("x")[1][:-1]) if "x" in p else 1)
                for p in per_node.split(","))
    env = {"SLURM_PROCID": str(rank), "SLURM_STEP_NUM_TASKS": str(tasks),
           "SLURM_STEP_NODELIST": nodes, "SLURM_STEP_TASKS_PER_NODE": per_node}
    env.update(extra)
    return env


# (name, env, kwargs, our CUDA_VISIBLE_DEVICES, our GPUs per task, what TensorFlow does)
CASES = [
    ("CPU-only nodes: empty CUDA_VISIBLE_DEVICES means 0 GPUs",
     step(1, CUDA_VISIBLE_DEVICES=""), {}, "", 0, "crash"),
    ("CPU-only nodes: gpus_per_node=0", step(3), {"gpus_per_node": 0}, "", 0, "crash"),
    ("one GPU seen by two tasks stays shared", step(1, CUDA_VISIBLE_DEVICES="0"), {}, "0", 1,
     "crash"),
    ("one task, empty CUDA_VISIBLE_DEVICES (TensorFlow counts 1 GPU)",
     step(0, per_node="1(x2)", CUDA_VISIBLE_DEVICES=""), {}, "", 0, "0"),
    ("Slurm gave a subset: tasks take entries of that list",
     step(1, CUDA_VISIBLE_DEVICES="2,3"), {}, "3", 1, "1"),
    ("Slurm gave a subset, second node", step(2, CUDA_VISIBLE_DEVICES="5,7"), {}, "5", 1, "0"),
    ("UUIDs", step(1, CUDA_VISIBLE_DEVICES="GPU-aaaa-1,GPU-bbbb-2,GPU-cccc-3,GPU-dddd-4"),
     {}, "GPU-cccc-3,GPU-dddd-4", 2, "2,3"),
    ("MIG devices", step(0, CUDA_VISIBLE_DEVICES="MIG-11/1/0,MIG-11/2/0"), {},
     "MIG-11/1/0", 1, "0"),
    ("CUDA_VISIBLE_DEVICES=NoDevFiles (Slurm: no GPU allocated)",
     step(0, CUDA_VISIBLE_DEVICES="NoDevFiles"), {}, "", 0, "crash"),
]


@pytest.mark.parametrize("name,env,kwargs,visible,per_task,tf_does", CASES,
                         ids=[c[0] for c in CASES])
def test_gpu_allocation_where_tensorflow_is_wrong(ours, name, env, kwargs, visible,
                                                  per_task, tf_does):
    mine = observe(ours, env, kwargs)
    assert mine["CUDA_VISIBLE_DEVICES"] == visible
    assert mine["num_accelerators"] == {"GPU": per_task}
    if tf_does == "crash":
        with pytest.raises(ValueError):
            observe(TFResolver, env, kwargs)
    else:
        assert observe(TFResolver, env, kwargs)["CUDA_VISIBLE_DEVICES"] == tf_does


def test_gpus_of_tasks_on_one_node_never_overlap(ours):
    seen = []
    for rank in range(4):
        env = step(rank, per_node="4", nodes="n1", CUDA_VISIBLE_DEVICES="4,5,6,7,0,1,2,3")
        seen.append(observe(ours, env, {})["CUDA_VISIBLE_DEVICES"].split(","))
    assert seen == [["4", "5"], ["6", "7"], ["0", "1"], ["2", "3"]]


def test_cpu_only_node_is_zero_gpus_with_a_note(ours, tmp_path):
    """No nvidia-smi, no /dev/nvidia* (this machine has none), nothing set: 0 GPUs and a
    one-line note; no gpus_per_node needed."""
    env = step(0)
    assert not glob.glob("/dev/nvidia[0-9]*"), "this test needs a machine without NVIDIA GPUs"
    mine = observe(ours, env, {}, smi_path=str(tmp_path), with_notes=True)  # no nvidia-smi
    assert mine["CUDA_VISIBLE_DEVICES"] == ""
    assert mine["num_accelerators"] == {"GPU": 0}
    assert [n for n in mine["notes"] if "running on CPU" in n] == [
        "no GPUs found on n1 (no nvidia-smi, no /dev/nvidia* devices, CUDA_VISIBLE_DEVICES "
        "and SLURM_GPUS_ON_NODE unset): running on CPU."]
    with pytest.raises(FileNotFoundError):  # TensorFlow: a bare FileNotFoundError escapes
        observe(TFResolver, env, {}, smi_path=str(tmp_path))


def test_nvidia_smi_counts_gpus_when_nothing_else_says(ours, tmp_path):
    smi = write_fake_nvidia_smi(tmp_path / "bin", 4)
    mine = observe(ours, step(3), {}, smi_path=smi)
    assert mine == observe(TFResolver, step(3), {}, smi_path=smi)
    assert mine["CUDA_VISIBLE_DEVICES"] == "2,3"


def test_second_resolver_after_narrowing_gives_the_same_allocation(ours):
    env = step(1, CUDA_VISIBLE_DEVICES="0,1,2,3")
    with mock.patch.dict(os.environ, env, clear=True):
        first = ours()
        first.cluster_spec()
        assert os.environ["CUDA_VISIBLE_DEVICES"] == "2,3"
        second = ours()
        second.cluster_spec()
        assert os.environ["CUDA_VISIBLE_DEVICES"] == "2,3"
        assert second.num_accelerators() == first.num_accelerators() == {"GPU": 2}
        # TensorFlow's second resolver counts the narrowed list: 2 GPUs for 2 tasks.
        again = TFResolver()
        again.cluster_spec()
        assert os.environ["CUDA_VISIBLE_DEVICES"] == "1"
        # A value the user sets afterwards is theirs: it is the new node list.
        os.environ["CUDA_VISIBLE_DEVICES"] = "4,5,6,7"
        third = ours()
        third.cluster_spec()
        assert os.environ["CUDA_VISIBLE_DEVICES"] == "6,7"


def test_resolver_writes_only_cuda_visible_devices_and_no_files(ours, tmp_path, monkeypatch):
    env = step(2, CUDA_VISIBLE_DEVICES="0,1,2,3")
    monkeypatch.chdir(tmp_path)
    with mock.patch.dict(os.environ, env, clear=True):
        before = dict(os.environ)
        resolver = ours()
        resolver.cluster_spec()
        resolver.master()
        resolver.tf_config()
        changed = {k for k in set(before) | set(os.environ) if before.get(k) != os.environ.get(k)}
    assert changed == {"CUDA_VISIBLE_DEVICES"}
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("rank", [0, 1, 2, 3])
def test_mig_devices_from_a_fake_nvidia_smi(ours, tmp_path, rank):
    """CUDA_VISIBLE_DEVICES unset, nvidia-smi lists one GPU in MIG mode with 2 MIG devices on
    each node of two tasks: each task gets its own MIG device by UUID. TensorFlow counts the
    GPU line alone: one GPU for two tasks, and it crashes (ValueError in its range())."""
    smi = write_fake_nvidia_smi(tmp_path / "bin", 1, mig=2)
    mine = observe(ours, step(rank), {}, smi_path=smi, with_notes=True)
    assert mine["CUDA_VISIBLE_DEVICES"] == fake_mig(0, rank % 2)
    assert mine["num_accelerators"] == {"GPU": 1}
    assert any("CUDA lets a process use only one MIG device" in n for n in mine["notes"])
    with pytest.raises(ValueError):
        observe(TFResolver, step(rank), {}, smi_path=smi)


def test_the_resolver_warns_of_a_proxy_that_would_capture_the_workers(ours, caplog,
                                                                     monkeypatch):
    from mpi_resolver.core import logs as _logs

    monkeypatch.setattr(_logs, "_logged", set())  # each message is logged once a process
    env = step(0, CUDA_VISIBLE_DEVICES="", http_proxy="http://127.0.0.1:9")
    with caplog.at_level("WARNING", logger="mpi_resolver"):
        mine = observe(ours, env, {})
    warned = [r.getMessage() for r in caplog.records if "http_proxy=" in r.getMessage()]
    assert len(warned) == 1 and "n1, n2 through that proxy" in warned[0], warned
    assert mine["cluster_spec"] == {"worker": ["n1:8888", "n1:8889", "n2:8888", "n2:8889"]}
