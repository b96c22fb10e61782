"""A step's task for tests/cluster/test_supervise.py: fails as MODE says, counted in DIR.

  python supervise_standin.py MODE DIR

Task 0 adds a line to DIR/runs.txt at each run's start (its number of lines: the runs so far).
MODE: kill-once (task 1 SIGKILLs itself on the first run only: DIR/killed marks it),
node2-twice (the task on node2 SIGKILLs itself on the first two runs: DIR/kills.txt), exit-3
(task 0 exits 3 on every run), exit-75 (every task exits 75, as after a save that asks to run
again), sleep (every task says it started, then sleeps a minute, for a scancel to end). Otherwise a
task sleeps a second and says it is done. The task's number: SLURM_PROCID under srun,
OMPI_COMM_WORLD_RANK under mpirun.
"""

import os
import signal
import sys
import time

mode, directory = sys.argv[1], sys.argv[2]
task = int(os.environ.get("SLURM_PROCID") or os.environ.get("OMPI_COMM_WORLD_RANK") or 0)
if task == 0:
    with open(os.path.join(directory, "runs.txt"), "a") as f:
        f.write("run\n")
if mode == "kill-once" and task == 1:
    marker = os.path.join(directory, "killed")
    if not os.path.exists(marker):
        open(marker, "w").close()
        time.sleep(0.5)
        os.kill(os.getpid(), signal.SIGKILL)
if mode == "node2-twice" and os.environ.get("SLURMD_NODENAME") == "node2":
    kills = os.path.join(directory, "kills.txt")
    if not os.path.exists(kills) or len(open(kills).read().splitlines()) < 2:
        with open(kills, "a") as f:
            f.write("killed\n")
        time.sleep(0.5)
        os.kill(os.getpid(), signal.SIGKILL)
print(f"task {task} on {os.environ.get('SLURMD_NODENAME', 'this host')}", flush=True)
if mode == "exit-3" and task == 0:
    time.sleep(0.5)
    sys.exit(3)
if mode == "exit-75":
    time.sleep(0.5)
    sys.exit(75)
if mode == "sleep":
    print(f"task {task} started", flush=True)
    time.sleep(60)
time.sleep(1)
print(f"task {task} done", flush=True)
