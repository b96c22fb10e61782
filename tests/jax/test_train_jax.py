"""examples/train_jax.py on two emulated nodes: Keras 3 on JAX, DataParallel and model.fit
across two `srun --mpi=pmix` tasks started by mpi_resolver.jax.initialize; train.py's lines,
the same weights on both processes, an accuracy as train.py's; and examples/train_jax_loop.py,
a custom JAX loop interrupted and resumed to the weights of an uninterrupted run."""

from __future__ import annotations

import os
import re
import signal
import threading
import time
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


def train(cluster: SlurmCluster, python: str, *args: str, script: str = TRAIN_JAX):
    extra = [] if "--port-base" in args else ["--port-base", "auto"]
    run = launch(cluster, [*SRUN, python, script, *args, *extra], env=JAX_ENV, timeout=180,
                 parse=False)
    assert run.returncode == 0, run.context()
    return run


def test_fit_on_two_nodes_lines_weights_accuracy(jax_cluster: SlurmCluster, jax_python: str,
                                                 tmp_path: Path) -> None:
    """Two processes on two nodes: train.py's lines printed once (process 0), the same
    weights on both, the accuracy; with --checkpoint-dir and --checkpoint-every, the
    periodic checkpoints, removed once training completed (a resume: test_long_jobs.py)."""
    ckpt = tmp_path / "ckpt"
    run = train(jax_cluster, jax_python, "--epochs", str(EPOCHS), "--steps-per-epoch",
                str(STEPS), "--checkpoint-dir", str(ckpt), "--checkpoint-every", "20")
    runs_like(commands("jax-train")[0], run.argv)  # docs/jax.md's command, options added
    out = run.stdout
    assert re.search(r"^process 0/2: node1:\d+, coordinator node1:\d+", out, re.M), run.context()
    assert re.search(r"^process 1/2: node2:\d+, coordinator node1:\d+", out, re.M), run.context()
    epochs = re.findall(r"^epoch (\d+)/(\d+): loss \d\.\d{4}  train accuracy \d\.\d{4}", out,
                        re.M)
    assert epochs == [("1", "3"), ("2", "3"), ("3", "3")], run.context()  # process 0 only
    digests = re.findall(r"^process (\d): weights digest ([0-9a-f]{16})$", out, re.M)
    assert sorted(p for p, _ in digests) == ["0", "1"], run.context()
    assert len({d for _, d in digests}) == 1, run.context()  # the same weights on both
    assert out.count("steps done: 60 (resumed from 0)") == 1, run.context()
    accuracy = [float(a) for a in re.findall(r"^final test accuracy: (\d\.\d{4})$", out, re.M)]
    assert len(accuracy) == 1 and accuracy[0] >= MIN_ACCURACY, run.context()
    # completed: the checkpoints removed, the manifest saying so kept
    assert ckpt.is_dir() and sorted(os.listdir(ckpt)) == [
        "mpi_resolver.json", "mpi_resolver.ledger.jsonl", "mpi_resolver.progress.json"], \
        run.context()  # the ledger and the progress file stay too


TRAIN_LOOP = str(ROOT / "examples" / "train_jax_loop.py")


def test_custom_loop_interrupted_and_resumed_ends_with_the_same_weights(
        jax_cluster: SlurmCluster, jax_python: str, tmp_path: Path) -> None:
    """examples/train_jax_loop.py (plain JAX, Adam by hand, LongJob): USR1 to process 1
    alone after the periodic save at step 40 stops both at one step (exit 75); the next run
    resumes there and ends with the weights of an uninterrupted run, bit for bit (the
    parameters, Adam's moments and count restored, the batches a function of the step)."""
    from tests.jax.test_long_jobs import _python_of_rank

    ckpt = tmp_path / "ckpt"
    argv = [*SRUN, jax_python, TRAIN_LOOP, "--steps", "300", "--port-base", "auto",
            "--checkpoint-every", "40"]
    interrupted = [*argv, "--checkpoint-dir", "ckpt"]  # in tmp_path
    runs_like(commands("jax-loop")[0], interrupted)  # docs/jax.md's command, options added
    result: dict = {}
    first = threading.Thread(target=lambda: result.update(run=launch(
        jax_cluster, interrupted, env=JAX_ENV, cwd=str(tmp_path), timeout=180, parse=False)))
    first.start()
    deadline = time.monotonic() + 150
    while not (ckpt / "40").is_dir() and time.monotonic() < deadline:
        time.sleep(0.05)
    pid = _python_of_rank(TRAIN_LOOP, 1)
    assert pid is not None, "process 1 not found"
    os.kill(pid, signal.SIGUSR1)
    first.join(180)
    stopped = result["run"]
    assert stopped.returncode == 75, stopped.context()
    (saved,) = [int(n) for n in re.findall(r"^steps done: (\d+) \(resumed from 0\)$",
                                           stopped.stdout, re.M)]
    assert 40 <= saved < 300, stopped.context()
    resumed = train(jax_cluster, jax_python, *argv[len(SRUN) + 2:], "--checkpoint-dir",
                    str(ckpt), script=TRAIN_LOOP)
    assert f"resumed from the checkpoint in {ckpt} at step {saved}" in resumed.stdout, \
        resumed.context()
    assert f"steps done: 300 (resumed from {saved})" in resumed.stdout, resumed.context()
    whole = train(jax_cluster, jax_python, *argv[len(SRUN) + 2:], "--checkpoint-dir",
                  str(tmp_path / "whole"), script=TRAIN_LOOP)
    digests = set(re.findall(r"^process \d: weights digest ([0-9a-f]{16})$",
                             resumed.stdout + whole.stdout, re.M))
    assert len(digests) == 1, resumed.context() + whole.context()
