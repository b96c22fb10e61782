"""Long Keras 3 jobs on JAX for real on the two-node cluster: examples/train_jax.py with
--checkpoint-dir (mpi_resolver.jax's LongJob, restore_model, keras_callback), interrupted the
way Slurm interrupts jobs and resumed at the saved step with the model's and Adam's state:

- a bare `srun` in a batch job (`sbatch --requeue`): Slurm's warning signal as `#SBATCH
  --signal=USR1@N` sends it (`scancel --signal=USR1`); process 0 requeues (scontrol, real);
- examples/train.sbatch (supervise in front of srun) with SCRIPT=train_jax.py, the tasks
  without scontrol on PATH (as in a container): they save and exit 75, supervise requeues;
- (the time limit under supervise ran here once, and found JAX's teardown keeping process 0
  past KillWait: the exit after the save is now process_end's, the same after any signal, and
  tested by the jobs above; the time limit's decisions are supervise's, tested with
  TensorFlow in tests/cluster/test_long_jobs.py: a minute of training less in the suite);
- a process killed without warning (SIGKILL, as the OOM killer does): supervise runs the step
  again and it resumes from the last periodic checkpoint (--checkpoint-every), at most one
  interval lost;
- USR1 to one process only: both stop at the same step (the agreement through JAX's
  collectives, the barrier of JAX's coordination service: mpi_resolver.jax.coordinator).
The batch jobs run at once (tests/cluster/longjobs.py's Driver)."""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import Dict, Optional

import pytest

from tests.cluster.conftest import PY
from tests.cluster.longjobs import NONE, USR1, Driver, Job
from tests.cluster.test_jobs import Step
from tests.cluster.test_long_jobs import NO_SCONTROL  # the container stand-in, any script
from tests.cluster.test_scenarios import launch
from tests.docs.blocks import command, commands, runs_like
from tests.harness.slurm_cluster import SlurmCluster
from tests.jax.conftest import JAX_ENV, ROOT

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

TRAIN_JAX = str(ROOT / "examples" / "train_jax.py")
JAX_TEMPLATE = str(ROOT / "examples" / "train_jax.sbatch")
EPOCHS, STEPS = 8, 50  # 400 steps: run 1 is warned after its first epoch (600 cost 30 CPU-s more)
#: What process 0 prints once training is under way, in any run (a resumed run's first epoch
#: line is not epoch 1's).
PROGRESS = " train accuracy "
TOTAL = EPOCHS * STEPS
def job_env(jax_python: str, **extra: str) -> Dict[str, str]:
    """A JAX job's variables: JAX_ENV, .venv-jax's Python first on PATH."""
    return {**JAX_ENV, "PATH": f"{Path(jax_python).parent}:/usr/bin:/bin:/usr/sbin:/sbin",
            **extra}


@pytest.fixture(scope="module")
def jobs(jax_cluster: SlurmCluster, jax_python: str, tmp_path_factory) -> Dict[str, Job]:
    """Runs the batch jobs at once; returns them by name once all are done."""
    tmp = tmp_path_factory.mktemp("jaxlong")
    driver = Driver(jax_cluster, timeout=420)
    argv = ["srun", "--mpi=pmix", jax_python, TRAIN_JAX, "--epochs", str(EPOCHS),
            "--steps-per-epoch", str(STEPS), "--port-base", "auto", "--checkpoint-dir", "ckpt"]
    runs_like(command("jax-long-job-srun", "srun"), argv)  # docs/jax.md's, options added
    (tmp / "srun").mkdir()
    script = (f'cd {shlex.quote(str(tmp / "srun"))} && '
              'echo "== job $SLURM_JOB_ID (run $((${SLURM_RESTART_COUNT:-0} + 1)))" && '
              f"{shlex.join(argv)}")
    driver.add(Job("srun", ["-N2", "--ntasks-per-node=1", "--wrap", script], [USR1, NONE],
                   tmp / "srun" / "out.txt", env=job_env(jax_python), progress=PROGRESS))
    (tmp / "template").mkdir()
    (tmp / "template" / "no-scontrol.py").write_text(NO_SCONTROL.format(train=TRAIN_JAX))
    template = ["sbatch", "-N2", "--ntasks-per-node=1", JAX_TEMPLATE, "--epochs", str(EPOCHS),
                "--steps-per-epoch", str(STEPS)]  # the ports: the JAX template's 'auto'
    documented = shlex.split(commands("jax-long-job")[0])  # docs/jax.md's; run below with
    assert documented[:2] == ["sbatch", "examples/train_jax.sbatch"], documented  # SCRIPT
    assert JAX_TEMPLATE.endswith("/" + documented[1])  # set to the container's stand-in
    assert [w for w in documented if w.startswith("--")] == template[4::2]
    (tmp / "own").mkdir()
    own = "\n".join(commands("jax-long-job-own")).replace(
        "examples/train_jax.py", f"{TRAIN_JAX} --epochs {EPOCHS} --steps-per-epoch {STEPS}")
    (tmp / "own" / "job.sh").write_text(
        '#!/bin/bash\necho "== job $SLURM_JOB_ID (run $((${SLURM_RESTART_COUNT:-0} + 1)))"\n'
        f"cd {shlex.quote(str(tmp / 'own'))}\n{own}\n")
    driver.add(Job("own batch script", ["-N2", "--ntasks-per-node=1",
                                        str(tmp / "own" / "job.sh")],
                   [USR1, NONE], tmp / "own" / "out.txt", env=job_env(jax_python),
                   progress=PROGRESS))
    driver.add(Job("template", template[1:],
                   [USR1, NONE], tmp / "template" / "out.txt", progress=PROGRESS,
                   env=job_env(jax_python, SCRIPT=str(tmp / "template" / "no-scontrol.py"),
                               CHECKPOINT_DIR=str(tmp / "template" / "ckpt"))))
    driver.run()
    return {job.name: job for job in driver.jobs}


def two_runs(job: Job) -> int:
    """Asserts two runs, the second resuming at the first's saved step and reaching the
    planned total; returns that step."""
    assert job.error is None, job.context()
    steps = job.steps()
    assert len(steps) == 2, job.context()
    (saved, zero), (done, resumed) = steps
    assert zero == 0 and 0 < saved and resumed == saved, job.context()
    assert saved < TOTAL and done == TOTAL, job.context()
    first, second = job.runs()
    assert "resumed from the checkpoint in " in second and f"at step {saved}" in second, \
        job.context()
    assert "resumed from" not in first.replace("(resumed from 0)", ""), job.context()
    return saved


def test_usr1_saves_at_one_step_requeues_and_resumes(jobs: Dict[str, Job]) -> None:
    """A bare srun: process 0 requeues the job (scontrol); the next run resumes, completes,
    and removes the checkpoints."""
    job = jobs["srun"]
    two_runs(job)
    first, second = job.runs()
    assert first.count("checkpoint saved on SIGUSR1; ") == 1, job.context()
    assert re.search(r"checkpoint saved on SIGUSR1; .*requeue", first), job.context()
    # the barrier is named by the step: a process at another step would not have met it
    assert "not every worker said it had saved" not in first, job.context()
    assert "final test accuracy" in second and "final test accuracy" not in first, \
        job.context()
    assert job.states[0].startswith("PENDING BeginTime Restarts=1"), job.states
    assert not saved_steps(job.output.parent / "ckpt"), job.context()


def test_docs_own_batch_script_under_supervise_resumes(jobs: Dict[str, Job]) -> None:
    """docs/jax.md's three lines (#SBATCH with B:USR1, the variables, supervise in front of
    srun): the warning signal to the tasks, supervise requeues, the next run resumes in the
    job's own directory and completes; its report tells both runs."""
    job = jobs["own batch script"]
    saved = two_runs(job)
    first = job.runs()[0]
    assert re.search(r"^mpi-resolver supervise: run 1: .*requeued job \d+ \(scontrol "
                     r"requeue \d+\): exit 75$", first, re.M), job.context()
    ckpt = job.output.parent / "ckpt" / job.job_id
    assert (ckpt / "mpi_resolver.ledger.jsonl").exists(), job.context()
    report = subprocess.run([PY, "-m", "mpi_resolver", "report", str(ckpt), "--json"],
                            capture_output=True, text=True, timeout=120)
    out = json.loads(report.stdout)
    assert (len(out["runs"]), out["requeues"], out["steps_done"], out["completed"]) == (
        2, 1, TOTAL, True), out
    assert out["runs"][1]["steps_from"] == saved, out


def test_the_template_without_scontrol_supervise_requeues(jobs: Dict[str, Job]) -> None:
    """examples/train_jax.sbatch (train.sbatch's JAX face) runs SCRIPT with exactly its
    arguments, its ports 'auto'; the tasks have no scontrol and need none: they save and exit
    75, supervise requeues the job."""
    job = jobs["template"]
    two_runs(job)
    first = job.runs()[0]
    assert "checkpoint saved on SIGUSR1; supervise requeues the job; exit code 75" in first, \
        job.context()
    assert re.search(rf"^mpi-resolver supervise: run 1: .*; requeued job {job.job_id} "
                     rf"\(scontrol requeue {job.job_id}\): exit 75$", first, re.M), job.context()
    assert "scontrol is not on" not in first, job.context()
    assert job.states[-1] == "COMPLETED None Restarts=1", job.context()


EVERY = 25


def test_a_killed_process_costs_at_most_one_interval_and_the_step_restarts(
        jax_cluster: SlurmCluster, jax_python: str, tmp_path: Path) -> None:
    """SIGKILL to process 1 (as the OOM killer sends it) after the periodic save at step 50:
    the step ends, supervise names the task and runs the step again, and the new run resumes
    from the last periodic checkpoint (every 25 steps) with the weights and Adam's state,
    then completes."""
    ckpt = tmp_path / "ckpt"
    env_args = [f"{k}={v}" for k, v in JAX_ENV.items()]
    step = Step(jax_cluster, ["env", *env_args, PY, "-m", "mpi_resolver", "supervise",
                              "--max-restarts", "1", "--", "srun", "-N2", "--ntasks-per-node=1",
                              "--mpi=pmix", "--kill-on-bad-exit=1", jax_python, TRAIN_JAX,
                              "--epochs", "6", "--steps-per-epoch", "25", "--port-base", "auto",
                              "--checkpoint-dir", str(ckpt), "--checkpoint-every", str(EVERY)])
    pid = None
    try:
        deadline = time.monotonic() + 240
        while not (ckpt / "50").is_dir() and time.monotonic() < deadline:
            time.sleep(0.1)
        pid = _python_of_rank(str(ckpt), 1)
        assert pid is not None, f"process 1 not found{step.context()}"
        os.kill(pid, signal.SIGKILL)
        saved = saved_steps(ckpt)
        resumed = step.wait_for(r"^resumed from the checkpoint in .* at step (\d+)$", 240)
        rc = step.finish(240)
    finally:
        step.kill()
    where = step.context()
    assert rc == 0, where
    k = int(resumed.group(1))
    assert k % EVERY == 0 and k >= 50 and k >= saved[-1], f"resumed at {k}, saved {saved}{where}"
    assert re.search(rf"^steps done: 150 \(resumed from {k}\)$", "".join(step.stdout),
                     re.M), where
    err = "".join(step.stderr)
    assert len(re.findall(r"supervise: run 1: task 1 on node2: Killed\b.*restart 1 of 1$", err,
                          re.M)) == 1, where


def saved_steps(directory: Path) -> list:
    """Returns the steps of the Orbax checkpoints committed in ``directory``, oldest first."""
    return sorted(int(p.name) for p in directory.glob("*") if p.name.isdigit() and p.is_dir())


def _python_of_rank(marker: str, rank: int) -> Optional[int]:
    """Returns the PID of the Python whose command line names ``marker`` and whose
    SLURM_PROCID is ``rank`` (a task of the step on the emulated nodes), or None."""
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes().split(b"\0")
            environ = Path(f"/proc/{entry}/environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if (Path(cmdline[0].decode()).name.startswith("python")
                and any(marker.encode() in part for part in cmdline)
                and f"SLURM_PROCID={rank}".encode() in environ):
            return int(entry)
    return None


def test_a_signal_to_one_process_stops_both_at_one_step(jax_cluster: SlurmCluster,
                                                        jax_python: str,
                                                        tmp_path: Path) -> None:
    """USR1 to process 1 alone (kill, by its PID): the agreement stops process 0 at the same
    step (its barrier, named by the step, is met), process 0 saves and both exit 75 (an srun
    step, not a batch job: scontrol's refusal to requeue it is said in the line)."""
    ckpt = tmp_path / "ckpt"
    argv = ["srun", "-N2", "--ntasks-per-node=1", "--mpi=pmix", jax_python,
            TRAIN_JAX, "--epochs", "40", "--steps-per-epoch", "50", "--port-base", "auto",
            "--checkpoint-dir", str(ckpt), "--checkpoint-every", "50"]
    result: dict = {}
    runner = threading.Thread(target=lambda: result.update(run=launch(
        jax_cluster, argv, env=JAX_ENV, timeout=240, parse=False)))
    runner.start()
    deadline = time.monotonic() + 200
    while not (ckpt / "50").is_dir() and time.monotonic() < deadline:
        time.sleep(0.2)  # process 0's first periodic save: training is under way
    pid = _python_of_rank(str(ckpt), 1)
    assert pid is not None, "process 1 not found"
    os.kill(pid, signal.SIGUSR1)
    runner.join(240)
    run = result["run"]
    assert run.returncode == 75, run.context()
    assert re.search(r"^mpi_resolver: checkpoint saved on SIGUSR1; scontrol requeue \d+ failed "
                     r".*Only batch jobs", run.stderr, re.M), run.context()
    assert "not every worker said it had saved" not in run.stderr, run.context()
    (done,) = [int(n) for n in re.findall(r"^steps done: (\d+) \(resumed from 0\)$",
                                           run.stdout, re.M)]
    assert 50 <= done < 2000 and not re.search(r"^epoch 40/", run.stdout, re.M), run.context()


#: A JAX loop with LongJob that completes its training, then loses process 1 (as an
#: out-of-memory in the final evaluation would, or JAX's abort where process 0 ends first).
DONE_THEN_KILLED = """import os, signal
from mpi_resolver.jax import initialize, LongJob
initialize(port_base="auto")
import jax.numpy as jnp
job = LongJob(checkpoint_every=5)
state = {"w": jnp.zeros(3)}
step, state = job.restore(state)
print("start", step, flush=True)
while step < 20:
    state = {"w": state["w"] + 1}
    step += 1
    job.step_done(step, state)
job.complete(remove=True)
print("completed", step, flush=True)
if os.environ.get("SLURM_PROCID") == "1":
    os.kill(os.getpid(), signal.SIGKILL)
"""
BATCH = """#!/bin/bash
export MPI_RESOLVER_CHECKPOINT_DIR={directory}/ckpt
mkdir -p "$MPI_RESOLVER_CHECKPOINT_DIR"
{python} -m mpi_resolver supervise --max-restarts 2 -- \\
  srun --mpi=pmix --kill-on-bad-exit=1 {jax_python} {script}
"""


def test_a_process_lost_after_the_training_completed_trains_nothing_again(
        jax_cluster: SlurmCluster, jax_python: str, tmp_path: Path) -> None:
    """LongJob.complete() records the job's training completed (every process's end, then the
    manifest); process 1 then dies: supervise ends the job with 0 (COMPLETED), no run again."""
    from tests.cluster.longjobs import show

    (tmp_path / "loop.py").write_text(DONE_THEN_KILLED)
    (tmp_path / "job.sh").write_text(BATCH.format(directory=tmp_path, python=PY,
                                                  jax_python=jax_python,
                                                  script=tmp_path / "loop.py"))
    r = jax_cluster.run(["sbatch", "--parsable", "-N2", "--ntasks-per-node=1",
                         f"--output={tmp_path / 'out.txt'}", str(tmp_path / "job.sh")],
                        env=job_env(jax_python), timeout=30)
    assert r.returncode == 0, r.stderr
    job_id = r.stdout.strip()
    fields: Dict[str, str] = {}
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline:
        fields = show(jax_cluster, job_id)
        if fields.get("JobState") in ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT"):
            break
        time.sleep(0.5)
    out = (tmp_path / "out.txt").read_text(errors="replace")
    jax_cluster.run(["scancel", job_id], timeout=30)
    where = f"\n{fields}\n{out}"
    assert (fields.get("JobState"), fields.get("ExitCode")) == ("COMPLETED", "0:0"), where
    assert out.count("start 0") == 2 and "start 20" not in out, where  # one run, no retraining
    assert re.search(r"^mpi-resolver supervise: run 1: task 1 on node2: Killed \(signal 9\), "
                     r".*; its training completed at step 20: nothing is trained again: exit 0$",
                     out, re.M), where
    manifest = (tmp_path / "ckpt" / "mpi_resolver.json").read_text()
    assert '"completed": true' in manifest and not saved_steps(tmp_path / "ckpt")


#: A JAX loop with LongJob whose rounds come every second of training (the steps: a sleep and
#: LongJob's own agreement, a small collective); process 0 says the steps it did.
ROUNDS_LOOP = """import time
from mpi_resolver.jax import initialize, LongJob
initialize(port_base="auto")
import jax.numpy as jnp
job = LongJob(total_steps={steps})
state = {{"w": jnp.zeros(3)}}
step, state = job.restore(state)
while step < {steps}:
    state = {{"w": state["w"] + 1}}
    time.sleep(0.01)
    step += 1
    job.step_done(step, state)
job.complete()
print("done", step, flush=True)
"""


def test_a_process_held_to_70_percent_is_named_by_process_0(
        jax_cluster: SlurmCluster, jax_python: str, tmp_path: Path) -> None:
    """LongJob's slow-rank rounds (MPI_RESOLVER_STRAGGLER_ROUND=1s): process 1 held to 70 %
    of its time from its start (tests/harness/cpu_limit; both processes pinned to one CPU) is
    named by process 0, in its log and the ledger, as `mpi-resolver report --json` reads
    it."""
    from tests.harness.cpu_limit import Limit, cpus, pin

    (tmp_path / "loop.py").write_text(ROUNDS_LOOP.format(steps=900))
    ckpt = tmp_path / "ckpt"
    argv = ["srun", "-N2", "--ntasks-per-node=1", "--mpi=pmix", jax_python,
            str(tmp_path / "loop.py")]
    env = {**JAX_ENV, "MPI_RESOLVER_CHECKPOINT_DIR": str(ckpt),
           "MPI_RESOLVER_STRAGGLER_ROUND": "1s"}
    result: dict = {}
    runner = threading.Thread(target=lambda: result.update(run=launch(
        jax_cluster, argv, env=env, timeout=240, parse=False)))
    runner.start()
    deadline, pid = time.monotonic() + 120, None
    while pid is None and runner.is_alive() and time.monotonic() < deadline:
        pid = _python_of_rank(str(tmp_path / "loop.py"), 1)
        time.sleep(0.1)
    assert pid is not None, "process 1 not found"
    while (first := _python_of_rank(str(tmp_path / "loop.py"), 0)) is None and \
            runner.is_alive() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert first is not None, "process 0 not found"
    for each in (first, pid):  # one CPU for both: the rest of the machine weighs alike
        pin(each, cpus()[0])
    limit = Limit(pid)
    limit.start()
    try:
        runner.join(240)
    finally:
        limit.stop()
    run = result["run"]
    assert run.returncode == 0 and "done 900" in run.stdout, run.context()
    assert re.search(r"^mpi_resolver: slow-rank rounds: every 1 s of training \(the first "
                     r"after \d+ steps\), each of the 2 ranks' probe", run.stderr, re.M), \
        run.context()
    named = re.findall(r"^mpi_resolver: rank 1 on node2 is slow: [\d.]+ s for what its peers "
                       r"do in [\d.]+ s \(([\d.]+) times their median\), slow in [345] of its "
                       r"last 5 rounds$", run.stderr, re.M)
    assert len(named) == 1 and float(named[0]) > 1.2, run.context()
    report = subprocess.run([PY, "-m", "mpi_resolver", "report", "--json", str(ckpt)],
                            capture_output=True, text=True, timeout=60)
    out = json.loads(report.stdout)
    assert out["slow_ranks"] == 1 and out["runs"][0]["slow_ranks"][0]["node"] == "node2"


#: A JAX loop whose state is sharded across the two processes (each holds two of the four
#: rows), with a host-local array beside it (each process its own copy, as jnp.zeros makes
#: it), saved and restored by LongJob through Orbax; USR1 to process 1 at step 5.
SHARDED = """import json, os, signal
from mpi_resolver.jax import initialize, LongJob
initialize(port_base="auto")
import jax, jax.numpy as jnp, numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec
rows = NamedSharding(Mesh(np.array(jax.devices()), ("data",)), PartitionSpec("data"))
zeros = np.zeros((4, 2), np.float32)
state = {"w": jax.make_array_from_callback((4, 2), rows, lambda index: zeros[index]), "n": 0,
         "h": jnp.zeros(2)}
job = LongJob(checkpoint_every=3)
step, state = job.restore(state)
print(json.dumps({"process": jax.process_index(), "start": step, "n": state["n"],
                  "own": np.asarray(state["w"].addressable_data(0)).tolist(),
                  "whole_here": state["w"].is_fully_addressable,
                  "h": np.asarray(state["h"]).tolist(),
                  "h_here": state["h"].sharding == jnp.zeros(2).sharding}), flush=True)
grow = jax.jit(lambda w: w + 1.0 + jnp.arange(4.0)[:, None])  # row r: r + 1 a step
while step < 12:
    state = {"w": grow(state["w"]), "n": state["n"] + 1, "h": state["h"] + 1}
    step += 1
    if step == 5 and jax.process_index() == 1:
        os.kill(os.getpid(), signal.SIGUSR1)
    job.step_done(step, state)
job.complete()
"""


def test_a_state_sharded_across_processes_is_saved_and_restored(jax_cluster: SlurmCluster,
                                                                jax_python: str,
                                                                tmp_path: Path) -> None:
    """Each process saves the rows it owns (Orbax, no copy through process 0) and, in the
    next run, reads back its own rows at the saved step, into the same sharding; a
    host-local array (which Orbax refuses across hosts) is saved as process 0's copy and
    put back on each process's device."""
    (tmp_path / "sharded.py").write_text(SHARDED)
    argv = ["srun", "-N2", "--ntasks-per-node=1", "--mpi=pmix", jax_python,
            str(tmp_path / "sharded.py")]
    env = {**JAX_ENV, "MPI_RESOLVER_CHECKPOINT_DIR": str(tmp_path / "ckpt")}
    first = launch(jax_cluster, argv, env=env, timeout=180, parse=False)
    assert first.returncode == 75, first.context()
    second = launch(jax_cluster, argv, env=env, timeout=180, parse=False)
    assert second.returncode == 0, second.context()
    said = sorted((json.loads(x) for x in second.stdout.splitlines() if x.startswith("{")),
                  key=lambda one: one["process"])
    assert len(said) == 2, second.context()
    k = said[0]["start"]
    assert k >= 5 and all(one["start"] == k and one["n"] == k for one in said), said
    for one in said:  # process p holds rows 2p and 2p + 1, row r at k x (r + 1)
        p = one["process"]
        assert one["own"] == [[k * (2 * p + 1.0)] * 2, [k * (2 * p + 2.0)] * 2], said
        assert one["whole_here"] is False, said
        assert one["h"] == [k, k] and one["h_here"] is True, said  # back on its own device
