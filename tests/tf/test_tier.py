"""The node-local tier of TensorFlow's periodic saves (tensorflow/tier, tensorflow/saver,
tensorflow/checkpoints) with the installed TensorFlow in this process, one worker (no partner:
the partner's copy runs on the cluster, tests/cluster/test_tf_local_tier.py): the periodic
saves go to the local directory, every shared_every-th to the checkpoint directory too; the
next run restores the newest step whole across the tiers; a save the tier did not take sends
the next one to the checkpoint directory; each save recorded once in the ledger."""

from __future__ import annotations

import logging
import socket
from pathlib import Path
from typing import List

import pytest

from mpi_resolver.long_jobs import ledger
from tests.tf.test_periodic import ckpts, messages
from tests.tf.test_preemption import model_and_step, train

pytestmark = pytest.mark.tf

NODE = socket.gethostname()  # the node's name without Slurm


@pytest.fixture(autouse=True)
def _no_slurm_node(monkeypatch) -> None:
    for name in ("SLURMD_NODENAME", "MPI_RESOLVER_LOCAL_DIR", "MPI_RESOLVER_SHARED_EVERY"):
        monkeypatch.delenv(name, raising=False)


def local_steps(tmp_path: Path) -> List[str]:
    return sorted((p.name for p in (tmp_path / f"local-{NODE}").iterdir() if p.name.isdigit()),
                  key=int)


def saves(tmp_path: Path) -> List[tuple]:
    return [(r["step"], r["checkpoint"]) for r in ledger.read(str(tmp_path / "ckpt"))
            if r["event"] == "save"]


@pytest.mark.parametrize("background", [True, False])
def test_periodic_saves_go_to_the_tier_and_every_second_to_the_directory(
        slurm_config, tmp_path: Path, caplog, background: bool) -> None:
    import tensorflow as tf

    caplog.set_level(logging.INFO, "mpi_resolver")
    checkpoint, step, weight = model_and_step(tf)
    config = slurm_config(checkpoint_every=5, local_dir=f"{tmp_path}/local-%N", shared_every=2,
                          checkpoint_async=background)
    handler = config.handler(None, checkpoint, str(tmp_path / "ckpt"))
    assert train(handler, step, weight, 26) == 26
    assert ckpts(tmp_path / "ckpt") == ["ckpt-2", "ckpt-4"]  # steps 10 and 20
    assert local_steps(tmp_path) == ["25"]  # the newest whole one alone
    assert saves(tmp_path) == [(5, "5 (node-local)"), (10, "ckpt-2"), (15, "15 (node-local)"),
                               (20, "ckpt-4"), (25, "25 (node-local)")]
    assert config.saver.newest == 25

    caplog.clear()
    checkpoint, step, weight = model_and_step(tf)  # the next run: the tier's step 25
    slurm_config(checkpoint_every=5, local_dir=f"{tmp_path}/local-%N").handler(
        None, checkpoint, str(tmp_path / "ckpt"))
    assert int(step.numpy()) == 25 and float(weight.numpy()) == 26.0
    assert f"mpi_resolver: restored step 25 from the node-local tier (own); the newest in " \
           f"{tmp_path}/ckpt/chief: {tmp_path}/ckpt/chief/ckpt-4" in messages(caplog)
    restored = [r for r in ledger.read(str(tmp_path / "ckpt")) if r["event"] == "restore"]
    assert restored[-1]["checkpoint"] == "25 (node-local: own)", restored[-1]


@pytest.mark.parametrize("lost, want", [
    ("tier", 20),  # the local directory gone: the checkpoint directory's newest
    ("none", 25),
])
def test_the_newest_step_whole_across_the_tiers_is_restored(slurm_config, tmp_path: Path,
                                                           lost: str, want: int) -> None:
    import shutil

    import tensorflow as tf

    run = slurm_config(checkpoint_every=5, local_dir=f"{tmp_path}/local-%N", shared_every=2)
    checkpoint, step, weight = model_and_step(tf)
    assert train(run.handler(None, checkpoint, str(tmp_path / "ckpt")), step, weight, 26) == 26
    if lost == "tier":
        shutil.rmtree(tmp_path / f"local-{NODE}")
    checkpoint, step, weight = model_and_step(tf)
    slurm_config(checkpoint_every=5, local_dir=f"{tmp_path}/local-%N").handler(
        None, checkpoint, str(tmp_path / "ckpt"))
    assert int(step.numpy()) == want and float(weight.numpy()) == want + 1.0


def test_a_save_the_tier_did_not_take_sends_the_next_to_the_directory(
        slurm_config, tmp_path: Path, caplog, monkeypatch) -> None:
    import tensorflow as tf

    from mpi_resolver.long_jobs.local_tier import LocalTier

    caplog.set_level(logging.INFO, "mpi_resolver")
    place = LocalTier.place  # a TensorFlow part is packed as a file, then placed

    def full_at_5(self, step: int, rank: int, path: str) -> None:
        if step == 5:
            raise OSError(28, "No space left on device")
        place(self, step, rank, path)

    monkeypatch.setattr(LocalTier, "place", full_at_5)
    checkpoint, step, weight = model_and_step(tf)
    handler = slurm_config(checkpoint_every=5, local_dir=f"{tmp_path}/local-%N").handler(
        None, checkpoint, str(tmp_path / "ckpt"))
    assert train(handler, step, weight, 16) == 16
    assert ckpts(tmp_path / "ckpt") == ["ckpt-2"]  # step 10, the save after the failure
    assert local_steps(tmp_path) == ["15"]
    assert saves(tmp_path) == [(10, "ckpt-2"), (15, "15 (node-local)")]
    failed = [r for r in ledger.read(str(tmp_path / "ckpt")) if r["event"] == "save_failed"]
    assert [(r["step"], r["error"]) for r in failed] == \
        [(5, "process 0: [Errno 28] No space left on device")]
    assert "mpi_resolver: the node-local save at step 5 is not whole (process 0: [Errno 28] No " \
           "space left on device): the next save goes to the checkpoint directory too" in \
        messages(caplog)


@pytest.mark.parametrize("kwargs", [{}, {"save_fn": lambda: None, "checkpoint_every": 5}])
def test_a_tier_without_the_package_s_periodic_saves_is_said_once(
        slurm_config, tmp_path: Path, caplog, kwargs) -> None:
    import tensorflow as tf

    caplog.set_level(logging.INFO, "mpi_resolver")
    checkpoint, _, _ = model_and_step(tf)
    slurm_config(local_dir=f"{tmp_path}/local-%N", **kwargs).handler(
        None, checkpoint, str(tmp_path / "ckpt"))
    assert messages(caplog).count(
        "mpi_resolver: local_dir is set, and the node-local tier takes the periodic saves of "
        "the package's own save: none here (checkpoint_every is not set, or the script saves "
        "by its own save_fn)") == 1
    assert not (tmp_path / f"local-{NODE}").exists()


@pytest.mark.parametrize("more", [0, 3])
def test_completion_saves_the_final_step_to_the_directory_then_the_tier_goes(
        slurm_config, tmp_path: Path, more: int) -> None:
    """A run that resumed from the tier's step 25 and completes there (more=0), or after 3
    steps more: the final step goes to the checkpoint directory (the tier's step is not
    there), then the node's local directory goes; the manifest says completed."""
    import tensorflow as tf

    from mpi_resolver.long_jobs.manifest import read_manifest

    checkpoint, step, weight = model_and_step(tf)
    run = slurm_config(checkpoint_every=5, local_dir=f"{tmp_path}/local-%N", shared_every=2)
    assert train(run.handler(None, checkpoint, str(tmp_path / "ckpt")), step, weight, 26) == 26
    checkpoint, step, weight = model_and_step(tf)  # the next run: the tier's step 25
    again = slurm_config(checkpoint_every=5, local_dir=f"{tmp_path}/local-%N", shared_every=2)
    handler = again.handler(None, checkpoint, str(tmp_path / "ckpt"))
    assert int(step.numpy()) == 25
    assert train(handler, step, weight, 25 + more) == 25 + more
    again.complete(remove=False)
    final = 25 + more
    assert saves(tmp_path)[-1] == (final, "ckpt-6")  # 5 saves before it, the tier's too
    assert not (tmp_path / f"local-{NODE}").exists()
    manifest = read_manifest(str(tmp_path / "ckpt"))
    assert (manifest["step"], manifest.get("completed")) == (final, True), manifest
