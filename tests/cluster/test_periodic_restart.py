"""Workers lost without warning, for real: examples/train.py with periodic checkpoints on two
emulated nodes, run by `mpi-resolver supervise` in front of `srun --mpi=pmix`; one task's
Python process gets SIGKILL (as from the kernel's OOM killer) or SIGSTOP (a worker that stops
answering) mid-training. The step ends, supervise says which task ended how on which node and
runs it again, and the next run resumes from the newest checkpoint whole at the kill: the steps
lost are at most one interval plus the step in flight, and one interval more where the kill
cut a background write (the save being written is lost), and the run ends at the planned
total. The same
for the chief, for Keras 2's `fit`, and for TensorFlow 2.15.1. Then a torn newest checkpoint:
both workers of the next run resume from the one before it, with one warning naming it."""

from __future__ import annotations

import os
import re
import signal
import time
from pathlib import Path

import pytest

from mpi_resolver.long_jobs import ledger
from mpi_resolver.long_jobs.manifest import write_manifest
from tests.cluster.conftest import PY, ROOT
from tests.cluster.test_jobs import Step
from tests.cluster.test_lost_worker import START, TRAIN, release, task_pids
from tests.harness.saves import wait_saved
from tests.harness.slurm_cluster import SlurmCluster

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

EVERY = 10
OLDEST = str(ROOT / ".venv-tf215" / "bin" / "python")


def train_argv(python: str, port: int, ckpt: Path, *extra: str) -> list:
    return ["srun", "-N2", "--ntasks-per-node=1", "--mpi=pmix", "--label",
            "--kill-on-bad-exit=1", python, TRAIN, "--epochs", "3", "--steps-per-epoch", "20",
            "--log-every", "1", "--checkpoint-dir", str(ckpt), "--checkpoint-every",
            str(EVERY), "--port-base", str(port), *extra]


def newest_saved(directory: Path) -> int:
    """Returns the step of the newest whole save the ledger in ``directory`` records."""
    return max(r["step"] for r in ledger.read(str(directory)) if r.get("event") == "save")


def last_step(text: str) -> int:
    """Returns the last step the chief printed (--log-every 1), or by --fit's progress."""
    return max(map(int, re.findall(r"^\s*0:   step (\d+): loss", text, re.M)))


CASES = [
    pytest.param(1, "SIGKILL", (), PY, 24720, id="worker-SIGKILL"),
    pytest.param(0, "SIGKILL", (), PY, 24721, id="chief-SIGKILL"),
    pytest.param(1, "SIGSTOP", (), PY, 24722, id="worker-SIGSTOP"),
    pytest.param(1, "SIGKILL", ("--fit",), PY, 24723, id="fit-worker-SIGKILL"),
    pytest.param(1, "SIGKILL", (), OLDEST, 24724, id="tf2.15.1-worker-SIGKILL"),
]


@pytest.mark.parametrize("rank, signame, extra, python, port", CASES)
def test_a_lost_worker_costs_an_interval_and_a_write_at_most_and_the_step_restarts(
        cluster: SlurmCluster, rank: int, signame: str, extra: tuple, python: str,
        port: int) -> None:
    if not Path(python).exists():
        pytest.fail(f"{python} is missing: run `bash scripts/setup_versions.sh`")
    ckpt = Path(cluster.workdir) / f"periodic-{port}"
    step = Step(cluster, [PY, "-m", "mpi_resolver", "supervise", "--max-restarts", "2", "--",
                          *train_argv(python, port, ckpt, *extra)])
    pids: dict = {}
    try:
        step.wait_for(r"^\s*0:   step 25: loss ", START)
        wait_saved(ckpt, 2 * EVERY, START)  # on disk: one interval at most is lost
        pids = task_pids(cluster, port)
        assert sorted(pids) == [0, 1], f"{pids}{step.context()}"
        os.kill(pids[rank], getattr(signal, signame))
        hit = time.monotonic()
        whole = newest_saved(ckpt)  # at the kill: a write in flight is cut with the chief
        resumed = step.wait_for(r"^\s*0: resumed from the checkpoint in .* at step (\d+)$",
                                START)
        back = time.monotonic() - hit
        # the chief's last step of the first run: its whole output before the resume (read
        # at the kill, the output lagged the process under load: it printed 25 of its 30)
        last = last_step(step.text.split(resumed.group(0))[0])
        rc = step.finish(START)
    finally:
        step.kill()
        release(list(pids.values()))
    where = step.context()
    assert rc == 0, where
    k = int(resumed.group(1))
    # the newest save whole at the kill (or one the survivor finished after it); the steps
    # lost: one interval and the step in flight, and the interval of a background write the
    # kill cut (the clean clone's chief-SIGKILL: killed at step 32 while the write of 30 was
    # in flight under load, resumed at 20)
    assert k % EVERY == 0 and k >= whole, f"resumed at {k}, {whole} saved at the kill, {where}"
    assert last - 2 * EVERY - 1 <= k <= last + 1, f"resumed at {k}, {where}"
    assert re.search(rf"^\s*0: steps done: 60 \(resumed from {k}\)$", step.text, re.M), where
    err = "".join(step.stderr)
    node = "node2" if rank == 1 else "node1"
    # SIGKILL: srun names the killed task. SIGSTOP: the survivor notices (TensorFlow's
    # heartbeat), names the stopped one (examples/lost_worker.py) and exits 1 first; supervise
    # blames the stopped one, never the survivor's node.
    named = (rf"task {rank} on {node}: Killed" if signame == "SIGKILL" else
             rf"task {rank} on {node}: lost, a peer said \(worker:{rank}\)")
    assert len(re.findall(rf"supervise: run 1: {named}[ ,].*restart 1 of 2$", err, re.M)) == 1, \
        where
    assert "restart 2 of 2" not in err, where
    print(f"{signame} of task {rank} after step {last} (at least): the next run resumed at "
          f"step {k} ({last - k} steps lost, interval {EVERY}), its first line {back:.1f} s "
          "after the signal")


def test_a_torn_newest_checkpoint_is_skipped_by_every_worker(cluster: SlurmCluster) -> None:
    port = 24725
    ckpt = Path(cluster.workdir) / f"periodic-{port}"
    first = Step(cluster, train_argv(PY, port, ckpt))
    pids: dict = {}
    try:
        first.wait_for(r"^\s*0:   step 25: loss ", START)
        pids = task_pids(cluster, port)
        os.kill(pids[1], signal.SIGKILL)  # after the saves at steps 10 and 20
        first.finish(START)
    finally:
        first.kill()
        release(list(pids.values()))
    chief = ckpt / "chief"
    # The kept checkpoints, by number: the saves at steps 10 and 20, and at 30 where the
    # workers got there before the kill landed (steps of 10-20 ms: a loaded machine's test
    # reads the step-25 line late)
    kept = sorted(int(p.name.split(".")[0][5:]) for p in chief.glob("ckpt-*.index"))
    assert len(kept) == 2 and kept[1] == kept[0] + 1, kept  # keep=2
    newest, before = f"ckpt-{kept[1]}", f"ckpt-{kept[0]}"
    data = next(chief.glob(f"{newest}.data-*"))
    data.write_bytes(data.read_bytes()[: data.stat().st_size // 2])  # a crash mid-write
    second = Step(cluster, train_argv(PY, port, ckpt))
    rc = second.finish(START)
    where = second.context()
    assert rc == 0, where
    err = "".join(second.stderr)
    warned = re.findall(rf"checkpoint {newest} in {chief} does not restore \(.*\): skipped; "
                        r"resuming from (ckpt-\d+)", err)
    assert warned == [before], where  # one line: worker 0's
    assert re.search(rf"^\s*0: steps done: 60 \(resumed from {10 * kept[0]}\)$", second.text,
                     re.M), where


def test_a_directory_of_a_job_slurm_has_forgotten_is_taken_over(cluster: SlurmCluster) -> None:
    """The directory's manifest names a job of this cluster that slurmctld no longer knows
    (its record purged MinJobAge after its end; here one that never ran): real scontrol says
    "Invalid job id specified", the job sees its cluster in SLURM_CLUSTER_NAME, and worker 0
    takes the directory over with one warning."""
    port = 24726
    ckpt = Path(cluster.workdir) / f"periodic-{port}"
    shown = cluster.run(["scontrol", "show", "config"], timeout=30).stdout
    name = re.search(r"^ClusterName\s*=\s*(\S+)$", shown, re.M).group(1)
    write_manifest(str(ckpt), {"job": "99999", "cluster": name, "step": 0, "host": "node1",
                               "written": "2026-01-01T00:00:00", "settings": {}})
    step = Step(cluster, train_argv(PY, port, ckpt))
    try:
        rc = step.finish(START)
    finally:
        step.kill()
    where = step.context()
    assert rc == 0, where
    warned = re.findall(rf"{ckpt} holds the checkpoint of job 99999 \(step 0, written "
                        r"2026-01-01T00:00:00 on node1\); job \d+ resumes from it and takes the "
                        r"directory over \(job 99999 is no longer known to Slurm: it ended over "
                        r"MinJobAge ago\)", "".join(step.stderr))
    assert len(warned) == 1, where  # worker 0's alone
    assert re.search(r"^\s*0: steps done: 60 \(resumed from 0\)$", step.text, re.M), where
