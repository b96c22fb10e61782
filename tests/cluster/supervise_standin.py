"""A step's task for tests/cluster/test_supervise.py: fails as MODE says, counted in DIR.

  python supervise_standin.py MODE DIR

Task 0 adds a line to DIR/runs.txt at each run's start (its number of lines: the runs so far).
Where a mode makes progress, task 0 writes the job's manifest into DIR/ckpt (the job's
checkpoint directory, MPI_RESOLVER_CHECKPOINT_DIR) as a training's chief would: its newest
step, 10 a run.

MODE:
  kill-once         task 1 SIGKILLs itself on the first run only (DIR/killed marks it)
  node2-twice       the task on node2 SIGKILLs itself on the first two runs (DIR/kills.txt);
                    progress every run
  node2-twice-75    the same, then on the third run every task exits 75 (saved: to run
                    again)
  node2-drained     the task on node2 writes DIR/waiting, waits for DIR/drained (the test
                    drains node2 first), then SIGKILLs itself, on the first run; progress
                    every run
  exit-3            task 0 exits 3 on every run, after progress
  crash-loop        task 1 SIGKILLs itself at once on every run (no progress)
  usage             task 0 exits 2 (argparse's usage error)
  config            every task exits 78 (a configuration the package refuses)
  exit-75           every task exits 75, as after a save that asks to run again
  save-failed       every task exits 74, as after a save on the signal that failed
  done-then-killed  task 0 writes the manifest's "completed" for this job, then task 1 is
                    SIGKILLed, as after training (an evaluation's out of memory)
  oom-once          task 1 fills 600 MB on the first run only (DIR/filled marks it; over the
                    job's --mem, the cgroup's OOM killer ends it); progress every run
  sleep             every task says it started, then sleeps a minute, for a scancel to end
Otherwise a task sleeps a second and says it is done. The task's number: SLURM_PROCID under
srun, OMPI_COMM_WORLD_RANK under mpirun.
"""

import json
import os
import signal
import sys
import time

mode, directory = sys.argv[1], sys.argv[2]
task = int(os.environ.get("SLURM_PROCID") or os.environ.get("OMPI_COMM_WORLD_RANK") or 0)
node = os.environ.get("SLURMD_NODENAME", "this host")
job = os.environ.get("SLURM_JOB_ID")
runs = os.path.join(directory, "runs.txt")
if task == 0:
    with open(runs, "a") as f:
        f.write("run\n")
run = len(open(runs).read().splitlines()) if os.path.exists(runs) else 1


def manifest(**more) -> None:
    """Writes the job's manifest (task 0: the chief's part), its newest step 10 a run."""
    ckpt = os.path.join(directory, "ckpt")
    os.makedirs(ckpt, exist_ok=True)
    with open(os.path.join(ckpt, "mpi_resolver.json"), "w") as f:
        json.dump({"job": job, "step": 10 * run, **more}, f)


def killed_on(marker: str, times: int) -> None:
    """SIGKILLs this task where ``marker`` (a file in DIR) lists fewer than ``times`` kills."""
    path = os.path.join(directory, marker)
    if not os.path.exists(path) or len(open(path).read().splitlines()) < times:
        with open(path, "a") as f:
            f.write("killed\n")
        time.sleep(0.5)
        os.kill(os.getpid(), signal.SIGKILL)


if task == 0 and mode in ("node2-twice", "node2-twice-75", "node2-drained", "exit-3",
                          "oom-once"):
    manifest()
if mode == "crash-loop" and task == 1:
    os.kill(os.getpid(), signal.SIGKILL)
if mode == "kill-once" and task == 1:
    killed_on("killed", 1)
if mode in ("node2-twice", "node2-twice-75") and node == "node2":
    killed_on("kills.txt", 2)
if mode == "node2-drained" and node == "node2" and run == 1:
    open(os.path.join(directory, "waiting"), "w").close()  # the test drains node2 now
    deadline = time.monotonic() + 60
    while not os.path.exists(os.path.join(directory, "drained")) and time.monotonic() < deadline:
        time.sleep(0.1)
    killed_on("kills.txt", 1)
print(f"task {task} on {node}", flush=True)
if mode == "oom-once" and task == 1 and not os.path.exists(os.path.join(directory, "filled")):
    open(os.path.join(directory, "filled"), "w").close()
    time.sleep(0.5)
    filled = [bytearray(b"x" * (1 << 20)) for _ in range(600)]  # pages touched: resident
    time.sleep(10)  # the OOM killer ends the task before this
if mode == "exit-3" and task == 0:
    time.sleep(0.5)
    sys.exit(3)
if mode == "usage" and task == 0:
    print("usage: train.py [--epochs N]", file=sys.stderr, flush=True)
    sys.exit(2)
if mode == "config":
    sys.exit(78)
if mode == "exit-75" or (mode == "node2-twice-75" and run >= 3):
    time.sleep(0.5)
    sys.exit(75)
if mode == "node2-twice-75":
    time.sleep(5)  # srun ends it after node2's task is killed
if mode == "save-failed":
    time.sleep(0.5)
    sys.exit(74)
if mode == "done-then-killed":
    if task == 0:
        manifest(completed=True)
    else:
        time.sleep(1.0)
        os.kill(os.getpid(), signal.SIGKILL)
if mode == "sleep":
    print(f"task {task} started", flush=True)
    time.sleep(60)
time.sleep(1)
print(f"task {task} done", flush=True)
