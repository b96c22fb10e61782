"""docs/own-script.md's two ports of a user's own script, run for real on the two-node
cluster (Slurm's default KillWait) as the page submits them: examples/train.sbatch with
SCRIPT naming the port and the page's variables (the template's preflight and supervise
included): examples/own_script/fit_ported.py (Keras 2's fit with SlurmBackupAndRestore) and
loop_ported.py (a Keras 3 custom loop with SlurmTerminationConfig's handler), each interrupted
mid-training by Slurm's warning signal (USR1, as `#SBATCH --signal=USR1@N` sends it),
requeued by supervise and resumed at the saved step; and loop_ported.py once more without
interruption, whose final weights the interrupted run must equal bit for bit (the restore and
the data skip together).

The three jobs run at once (tests/cluster/longjobs.py's Driver), each on both nodes; the
page's MPI_RESOLVER_PORT_BASE=auto gives them ports free on each node, so they do not
collide."""

from __future__ import annotations

import io
import re
import shlex
import sys
import zipfile
from pathlib import Path
from typing import Dict, List

import numpy as np
import pytest

from tests.cluster.conftest import ROOT
from tests.cluster.longjobs import NONE, USR1, Driver, Job
from tests.docs.blocks import assert_sample, block

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

PY = sys.executable
SCRIPTS = ROOT / "examples" / "own_script"


def constant(name: str) -> int:
    """Returns the number all three scripts set ``name`` to (``EPOCHS = 5``)."""
    found = {int(m) for script in ("original.py", "fit_ported.py", "loop_ported.py")
             for m in re.findall(rf"^{name} = (\d+)", (SCRIPTS / script).read_text(), re.M)}
    assert len(found) == 1, (name, found)
    return found.pop()


EPOCHS = constant("EPOCHS")
STEPS_PER_EPOCH = constant("SAMPLES") // constant("BATCH_SIZE")
TOTAL = EPOCHS * STEPS_PER_EPOCH  #: the scripts' planned steps
#: (job, script, how each run is interrupted, the chief's line that shows it trains)
JOBS = [
    ("fit", "fit_ported.py", [USR1, NONE], f"{STEPS_PER_EPOCH}/{STEPS_PER_EPOCH} - "),
    ("loop", "loop_ported.py", [USR1, NONE], "epoch "),
    ("loop uninterrupted", "loop_ported.py", [NONE], "epoch "),
]
SAVED = "checkpoint saved on SIGUSR1; supervise requeues the job; exit code 75"
REQUEUED = re.compile(r"^mpi-resolver supervise: .*; requeued job (\S+) \(scontrol requeue \S+\): "
                      r"exit 75$", re.M)
TRAINED = re.compile(r"^steps trained: (\d+), accuracy: (\d\.\d+)$", re.M)


#: The job's variables: this Python (and its mpi-resolver) first on PATH, this checkout,
#: quiet TensorFlow, one thread per worker (2 cores).
JOB_ENV = {"PATH": f"{Path(PY).parent}:/usr/bin:/bin:/usr/sbin:/sbin", "PYTHONPATH": str(ROOT),
           "TF_CPP_MIN_LOG_LEVEL": "2", "OMP_NUM_THREADS": "1", "TF_NUM_INTRAOP_THREADS": "1",
           "TF_NUM_INTEROP_THREADS": "1", "PYTHONDONTWRITEBYTECODE": "1"}


def submission() -> Dict[str, str]:
    """Returns the variables of docs/own-script.md's `VAR=... sbatch .../train.sbatch`,
    checking that it submits the template."""
    words = shlex.split(block("own-script-sbatch").splitlines()[-1])
    at = words.index("sbatch")
    assert words[at + 1:] and words[-1].endswith("/examples/train.sbatch"), words
    variables = dict(w.split("=", 1) for w in words[:at])
    assert variables.get("SCRIPT") == "loop_ported.py", variables
    return variables


@pytest.fixture(scope="module")
def jobs(longjob_cluster, tmp_path_factory) -> Dict[str, Job]:
    """Runs the three jobs side by side (Driver), each in a directory of its own (its
    checkpoints and model.keras land there: the page's submit directory, CHECKPOINT_ROOT the
    template's default there); returns them by name once all are done."""
    tmp = tmp_path_factory.mktemp("own-script")
    driver = Driver(longjob_cluster)
    for name, script, interrupts, progress in JOBS:
        where = tmp / name.replace(" ", "-")
        where.mkdir()
        env = {**JOB_ENV, **submission(), "SCRIPT": str(SCRIPTS / script),
               "CHECKPOINT_ROOT": str(where / "checkpoints")}
        driver.add(Job(name, [f"--chdir={where}", str(ROOT / "examples" / "train.sbatch")],
                       interrupts, where / "out.txt", env, progress=progress))
    driver.run()
    return {job.name: job for job in driver.jobs}


def weights(model: Path) -> List[np.ndarray]:
    """Returns the arrays of a Keras .keras file (its model.weights.h5), in file order."""
    import h5py

    with zipfile.ZipFile(model) as z:
        data = z.read("model.weights.h5")
    arrays: List[np.ndarray] = []
    with h5py.File(io.BytesIO(data), "r") as f:
        f.visititems(lambda _, obj: arrays.append(obj[()])
                     if isinstance(obj, h5py.Dataset) else None)
    return arrays


def interrupted_then_finished(job: Job) -> str:
    """Asserts run 1 saved on the signal (both tasks exit 75) and supervise requeued the job,
    and run 2 trained to the planned total; returns run 2's output."""
    assert job.error is None, job.context()
    runs = job.runs()
    assert len(runs) == 2, job.context()
    assert SAVED in runs[0], job.context()
    assert [m.group(1) for m in REQUEUED.finditer(runs[0])] == [job.job_id], job.context()
    assert len(re.findall(r"task \d: Exited with exit code 75", runs[0])) == 2, job.context()
    assert not TRAINED.search(runs[0]), job.context()  # it did not run to its end
    assert job.states == ["PENDING BeginTime Restarts=1", "COMPLETED None Restarts=1"], \
        job.context()
    trained = TRAINED.findall(runs[1])
    assert [int(steps) for steps, _ in trained] == [TOTAL], job.context()
    assert float(trained[0][1]) > 0.9, job.context()  # chance is 0.25
    return runs[1]


def test_the_fit_port_resumes_at_the_saved_batch(jobs):
    """Keras 2's fit: run 2 starts in a later epoch than 1 (the backup restored), and the
    optimizer's step count ends at the planned total: run 2 trained exactly the steps run 1
    had not (from the epoch's start, or from 0, it would have trained more)."""
    job = jobs["fit"]
    second = interrupted_then_finished(job)
    epochs = [int(e) for e in re.findall(rf"^Epoch (\d+)/{EPOCHS}$", second, re.M)]
    assert epochs and epochs[0] > 1 and epochs[-1] == EPOCHS, job.context()
    assert (job.output.parent / "model.keras").is_file(), job.context()


def test_the_loop_port_resumes_at_the_saved_step_with_the_data_after_it(jobs):
    """The custom loop: run 2 resumes at the step in the checkpoint (no step it trained is
    lost: run 1's last epoch line is at or before it), and ends with the very weights of the
    same script run without interruption: the model, the optimizer and the step restored,
    and the data skipped to where run 1 stopped."""
    job = jobs["loop"]
    second = interrupted_then_finished(job)
    resumed = [int(s) for s in re.findall(r"^resumed at step (\d+)$", second, re.M)]
    assert len(resumed) == 1 and 0 < resumed[0] < TOTAL, job.context()
    trained_before = [int(e) * STEPS_PER_EPOCH
                      for e in re.findall(rf"^epoch (\d+)/{EPOCHS}:", job.runs()[0], re.M)]
    assert trained_before and resumed[0] >= trained_before[-1], job.context()
    assert_sample(block("own-script-loop-output"), job.text(), job.context())
    reference = jobs["loop uninterrupted"]
    assert reference.error is None and reference.steps() == [], reference.context()
    assert [int(s) for s, _ in TRAINED.findall(reference.text())] == [TOTAL], \
        reference.context()
    mine = weights(job.output.parent / "model.keras")
    theirs = weights(reference.output.parent / "model.keras")
    assert len(mine) == len(theirs) == 4, (len(mine), len(theirs))
    for a, b in zip(mine, theirs, strict=True):
        np.testing.assert_array_equal(a, b)
