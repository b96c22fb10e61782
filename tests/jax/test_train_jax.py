"""examples/train_jax.py on two emulated nodes: Keras 3 on JAX, DataParallel and model.fit
across two `srun --mpi=pmix` tasks started by mpi_resolver.jax.initialize; train.py's lines,
the same weights on both processes, an accuracy as train.py's, and a resumed run."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.cluster.test_scenarios import launch
from tests.docs.blocks import commands, runs_like
from tests.harness.slurm_cluster import SlurmCluster
from tests.jax.conftest import JAX_ENV, ROOT

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

TRAIN_JAX = str(ROOT / "examples" / "train_jax.py")
#: train.py's test_training: seeded runs of 3 x 20 steps reach about 0.95 (chance is 0.1).
EPOCHS, STEPS, MIN_ACCURACY = 3, 20, 0.8
SRUN = ["srun", "-N2", "--ntasks-per-node=1", "--mpi=pmix", "--kill-on-bad-exit=1"]


def train(cluster: SlurmCluster, python: str, *args: str):
    run = launch(cluster, [*SRUN, python, TRAIN_JAX, *args, "--port-base", "auto"],
                 env=JAX_ENV, timeout=180, parse=False)
    assert run.returncode == 0, run.context()
    return run


def test_fit_on_two_nodes_lines_weights_accuracy_and_resume(jax_cluster: SlurmCluster,
                                                            jax_python: str,
                                                            tmp_path: Path) -> None:
    ckpt = tmp_path / "ckpt"
    run = train(jax_cluster, jax_python, "--epochs", str(EPOCHS - 1), "--steps-per-epoch",
                str(STEPS), "--checkpoint-dir", str(ckpt))
    out = run.stdout
    assert re.search(r"^process 0/2: node1:\d+, coordinator node1:\d+", out, re.M), run.context()
    assert re.search(r"^process 1/2: node2:\d+, coordinator node1:\d+", out, re.M), run.context()
    epochs = re.findall(r"^epoch (\d+)/(\d+): loss \d\.\d{4}  train accuracy \d\.\d{4}", out,
                        re.M)
    assert epochs == [("1", "2"), ("2", "2")], run.context()  # printed once, by process 0
    digests = re.findall(r"^process (\d): weights digest ([0-9a-f]{16})$", out, re.M)
    assert sorted(p for p, _ in digests) == ["0", "1"], run.context()
    assert len({d for _, d in digests}) == 1, run.context()  # the same weights on both
    assert out.count("steps done: 40 (resumed from 0)") == 1, run.context()

    again = train(jax_cluster, jax_python, "--epochs", str(EPOCHS), "--steps-per-epoch",
                  str(STEPS), "--checkpoint-dir", str(ckpt))
    runs_like(commands("jax-train")[0], again.argv)  # docs/jax.md's command, options added
    out = again.stdout
    assert f"resumed from the checkpoint in {ckpt} at step 40" in out, again.context()
    assert re.findall(r"^epoch (\d+)/", out, re.M) == ["3"], again.context()
    assert out.count("steps done: 60 (resumed from 40)") == 1, again.context()
    accuracy = [float(a) for a in re.findall(r"^final test accuracy: (\d\.\d{4})$", out, re.M)]
    assert len(accuracy) == 1 and accuracy[0] >= MIN_ACCURACY, again.context()
