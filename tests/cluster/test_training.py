"""End-to-end training on the throw-away cluster: examples/train.py, train.sbatch, mpirun.sh.

Two TensorFlow workers on two emulated nodes, each a real `srun --mpi=pmix` (or sbatch, or
mpirun) task running MultiWorkerMirroredStrategy with MPIClusterResolver. Short runs (a few
seconds of training each); the whole file takes well under two minutes on 2 cores.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Dict, List, Tuple

import pytest

from tests.docs.blocks import command, commands, runs_like
from tests.harness.batch import sbatch_wait

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
TRAIN = EXAMPLES / "train.py"
PY = sys.executable
#: Seeded runs of this length reach about 0.95 on the held-out split (chance is 0.1).
EPOCHS, STEPS = 3, 20
MIN_ACCURACY = 0.8
FINAL = re.compile(r"final test accuracy: (\d\.\d{4})\s*$")


def task_env(cluster) -> Dict[str, str]:
    """Variables for the tasks: this Python first on PATH, this checkout, quiet TensorFlow."""
    return {"PATH": f"{Path(PY).parent}{os.pathsep}{cluster.env['PATH']}",
            "PYTHONPATH": str(ROOT), "TF_CPP_MIN_LOG_LEVEL": "2",
            "PYTHONDONTWRITEBYTECODE": "1"}


def labelled(stdout: str) -> List[Tuple[int, str]]:
    """Splits `srun --label` output into (task, line) pairs."""
    out = []
    for line in stdout.splitlines():
        m = re.match(r"\s*(\d+): ?(.*)$", line)
        assert m, f"unlabelled line {line!r} in:\n{stdout}"
        out.append((int(m.group(1)), m.group(2)))
    return out


def final_accuracies(text: str) -> List[float]:
    return [float(m.group(1)) for m in map(FINAL.search, text.splitlines()) if m]


def load_and_evaluate(path: Path, keras2: bool = False) -> float:
    """Loads the saved model in a fresh process; returns its accuracy on train.py's test split.

    keras2: the model was saved by Keras 2 (train.py --fit): load it with tf_keras.
    """
    keras = "tf_keras as keras" if keras2 else "keras"
    code = (f"import sys, numpy as np, {keras}\n"
            f"sys.path.insert(0, {str(TRAIN.parent)!r})  # train.py and digits.py beside it\n"
            "import train\n"
            "_, _, x, y = train.load_data(train.SEED)\n"
            "model = keras.models.load_model(sys.argv[1])\n"
            "print(float(np.mean(np.argmax(model.predict(x, verbose=0), axis=1) == y)))\n")
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", "CUDA_VISIBLE_DEVICES": ""}
    if keras2:
        env["TF_USE_LEGACY_KERAS"] = "1"
    # a bound for a hang, not a time to meet: TensorFlow's import alone took over 60 s under
    # the suite's busiest minutes (mutmut's runs beside the clusters), 90 s were too few once
    p = subprocess.run([PY, "-c", code, str(path)], capture_output=True, text=True, env=env,
                       timeout=600)
    assert p.returncode == 0, p.stderr[-3000:]
    return float(p.stdout.split()[-1])


def test_srun_two_workers_train_chief_prints_and_saves(cluster, tmp_path: Path) -> None:
    save = tmp_path / "out" / "model.keras"
    r = cluster.run(["srun", "-N2", "--ntasks-per-node=1", "--mpi=pmix", "--label",
                     "--kill-on-bad-exit=1", PY, str(TRAIN), "--epochs", str(EPOCHS),
                     "--steps-per-epoch", str(STEPS), "--port-base", "24310",
                     "--save", str(save)], env=task_env(cluster), timeout=120)
    assert r.returncode == 0, f"{r.stdout}\n{r.stderr[-4000:]}"
    runs_like(command("commands", "srun --mpi=pmix python train.py"), r.args)
    runs_like(commands("keras-fit-or-loop")[0], r.args)  # the custom loop
    lines = labelled(r.stdout)
    # Each rank's line at start; progress, the save and the result from the chief (task 0).
    starts = [(task, line) for task, line in lines if line.startswith("rank ")]
    assert sorted(starts) == [
        (0, "rank 0: worker:0 at node1:24310, GPUs none (none; Slurm: SLURMD_TRES_BIND unset)"),
        (1, "rank 1: worker:1 at node2:24310, GPUs none (none; Slurm: SLURMD_TRES_BIND unset)")]
    lines = [(task, line) for task, line in lines if not line.startswith("rank ")]
    assert {task for task, _ in lines} == {0}, r.stdout
    text = "\n".join(line for _, line in lines)
    assert re.search(r"^workers: 2 +this: worker:0 on grpc://node1:24310", text, re.M), text
    assert "batch: 32 per worker x 2 workers = 64 global" in text
    assert re.search(r"^training: custom loop, Keras 3\.", text, re.M), text
    epochs = re.findall(r"^epoch (\d+)/%d: loss [\d.]+  train accuracy [\d.]+" % EPOCHS, text,
                        re.M)
    assert epochs == [str(e) for e in range(1, EPOCHS + 1)], text
    assert len(re.findall(r"^saved model: ", text, re.M)) == 1, text
    accuracies = final_accuracies(text)
    assert len(accuracies) == 1, text
    assert accuracies[0] > MIN_ACCURACY, text
    assert text.rstrip().endswith(f"final test accuracy: {accuracies[0]:.4f}")
    # One writer, one file: nothing else in the save directory (no second, clashing save).
    assert sorted(os.listdir(save.parent)) == ["model.keras"]
    # The saved model is the trained one: it scores the same on the held-out split.
    assert load_and_evaluate(save) == pytest.approx(accuracies[0], abs=1e-4)


def test_srun_two_workers_fit_with_tf_keras(cluster, tmp_path: Path) -> None:
    """train.py --fit: Keras 2 (tf_keras) model.fit under MultiWorkerMirroredStrategy on two
    nodes, same output, accuracy and save as the custom loop. Fails if tf_keras is missing."""
    save = tmp_path / "out" / "model.keras"
    env = {**task_env(cluster), "OMP_NUM_THREADS": "1", "TF_NUM_INTRAOP_THREADS": "1",
           "TF_NUM_INTEROP_THREADS": "1"}
    r = cluster.run(["srun", "-N2", "--ntasks-per-node=1", "--mpi=pmix", "--label",
                     "--kill-on-bad-exit=1", PY, str(TRAIN), "--fit", "--epochs", str(EPOCHS),
                     "--steps-per-epoch", str(STEPS), "--port-base", "24340",
                     "--save", str(save)], env=env, timeout=120)
    assert r.returncode == 0, f"{r.stdout}\n{r.stderr[-4000:]}"
    runs_like(commands("keras-fit-or-loop")[2], r.args)  # --fit
    lines = labelled(r.stdout)
    starts = sorted(task for task, line in lines if line.startswith("rank "))
    assert starts == [0, 1], r.stdout  # each rank's line at start
    lines = [(task, line) for task, line in lines if not line.startswith("rank ")]
    assert {task for task, _ in lines} == {0}, r.stdout
    text = "\n".join(line for _, line in lines)
    assert re.search(r"^workers: 2 +this: worker:0 on grpc://node1:24340", text, re.M), text
    assert "batch: 32 per worker x 2 workers = 64 global" in text
    assert re.search(r"^training: model\.fit, Keras 2\.\d+\.\d+ \(tf_keras\)$", text, re.M), text
    epochs = re.findall(r"^epoch (\d+)/%d: loss [\d.]+  train accuracy [\d.]+" % EPOCHS, text,
                        re.M)
    assert epochs == [str(e) for e in range(1, EPOCHS + 1)], text
    assert len(re.findall(r"^saved model: ", text, re.M)) == 1, text
    accuracies = final_accuracies(text)
    assert len(accuracies) == 1 and accuracies[0] > MIN_ACCURACY, text
    assert text.rstrip().endswith(f"final test accuracy: {accuracies[0]:.4f}")
    # Every worker saved (Keras 2's save is a collective), the other one to a scratch dir.
    assert sorted(os.listdir(save.parent)) == ["model.keras"]
    assert load_and_evaluate(save, keras2=True) == pytest.approx(accuracies[0], abs=1e-4)


def test_sbatch_job_script_checks_then_trains(cluster, tmp_path: Path) -> None:
    """examples/train.sbatch under a real sbatch, its --output read back (the job waited for
    by tests/harness/batch.py, not `sbatch --wait`'s back-off: 42 s for this 8-12 s job)."""
    out = tmp_path / "train.out"
    job = sbatch_wait(cluster, [f"--output={out}", str(EXAMPLES / "train.sbatch"),
                                "--epochs", str(EPOCHS), "--steps-per-epoch", str(STEPS),
                                "--port-base", "24320"],
                      env={**task_env(cluster), "CHECKPOINT_DIR": str(tmp_path / "ckpt")},
                      cwd=str(ROOT), timeout=150)
    log = out.read_text() if out.exists() else "(no output file)"
    assert job.state == "COMPLETED 0:0", f"{job.context()}\n{log[-4000:]}"
    assert "OK: Slurm and MPI agree on all 2 ranks." in log, log
    assert "CONNECT OK: the job's 2 connection(s) among 2 rank(s)" in log, log
    assert '"worker": ["node1:24320", "node2:24320"]' in log, log  # check saw train's ports
    assert log.index("OK: Slurm and MPI agree") < log.index("== training:")
    assert f"CHECKPOINT DIR OK: {tmp_path / 'ckpt'} seen and written by all 2 nodes" in log, log
    accuracies = final_accuracies(log)
    assert len(accuracies) == 1 and accuracies[0] > MIN_ACCURACY, log
    # a run that was not interrupted: the last line, and no checkpoint left behind
    assert f"steps done: {EPOCHS * STEPS} (resumed from 0)" in log, log
    assert not (tmp_path / "ckpt" / "chief").exists()


def test_mpirun_script_with_hostfile(cluster, tmp_path: Path) -> None:
    """examples/mpirun.sh without Slurm: Open MPI's mpirun over a hostfile, one rank a node."""
    env = {**task_env(cluster), "NP": "2", "HOSTFILE": cluster.hostfile(1), "PYTHON": PY}
    r = cluster.run(["bash", str(EXAMPLES / "mpirun.sh"), "--epochs", "2", "--steps-per-epoch",
                     str(STEPS), "--port-base", "24330"], env=env, cwd=str(tmp_path),
                    timeout=150)
    assert r.returncode == 0, f"{r.stdout}\n{r.stderr[-4000:]}"
    assert "source: mpi" in r.stdout, r.stdout
    assert '"worker": ["node1:24330", "node2:24330"]' in r.stdout, r.stdout
    assert re.search(r"^workers: 2 +this: worker:0 on grpc://node1:24330", r.stdout, re.M)
    assert len(re.findall(r"^epoch \d+/2:", r.stdout, re.M)) == 2, r.stdout  # chief only
    accuracies = final_accuracies(r.stdout)
    assert len(accuracies) == 1 and accuracies[0] > MIN_ACCURACY, r.stdout


def test_sbatch_gpu_template_checks_then_trains_on_the_gres_cluster(gres_cluster,
                                                                      tmp_path: Path) -> None:
    """examples/train_gpu.sbatch under sbatch (waited for) on the GRES cluster, sized down to
    node1 with two tasks and two GPUs (the template asks for 2 nodes x 4 tasks, --gres=gpu:4):
    the check shows one GPU each, the CPU build of TensorFlow trains on CPU, and each rank
    prints its line at start."""
    out = tmp_path / "train-gpu.out"
    job = sbatch_wait(gres_cluster, [f"--output={out}", "-w", "node1", "--nodes=1",
                                     "--ntasks-per-node=2", "--gres=gpu:2", "--cpus-per-task=1",
                                     str(EXAMPLES / "train_gpu.sbatch"), "--epochs", "1",
                                     "--steps-per-epoch", str(STEPS), "--collective", "ring",
                                     "--collective-timeout", "600"],
                      env={**task_env(gres_cluster), "CHECKPOINT_DIR": str(tmp_path / "c")},
                      cwd=str(ROOT), timeout=150)
    log = out.read_text() if out.exists() else "(no output file)"
    assert job.state == "COMPLETED 0:0", f"{job.context()}\n{log[-4000:]}"
    assert "OK: Slurm and MPI agree on all 2 ranks." in log, log
    assert "CONNECT OK: the job's 2 connection(s) among 2 rank(s)" in log, log
    rows = re.findall(r"^([01])\s+node1\s+worker\s+\1\s+node1:888[89]\s+(\S+)\s+(\S+)$", log, re.M)
    assert rows == [("0", "0", "divided"), ("1", "1", "divided")], log
    starts = sorted(re.findall(r"^rank (\d): worker:\1 at node1:888[89], GPUs (\S+)", log, re.M))
    assert starts == [("0", "none"), ("1", "none")], log  # tensorflow-cpu: --gpus-per-node 0
    assert log.index("OK: Slurm and MPI agree") < log.index("== training:")
    accuracies = final_accuracies(log)
    assert len(accuracies) == 1, log
