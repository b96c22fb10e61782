"""A requeued job started early keeps its step: the signal of srun's --kill-on-bad-exit to the
last run's step is not sent again to the next run's step of the same number.

Slurm 22.05: srun --kill-on-bad-exit has its step signalled with SIG_TERM_KILL, and a node's
slurmstepd answers only after SIGTERM, KillWait and SIGKILL. Past MessageTimeout slurmctld
takes the node for one that does not answer and sends the signal again 60 s later, to the step
of that number: in a requeued job started early (`scontrol update StartTime=now`, as the long
jobs' driver does), the new run's. The harness's MessageTimeout outlasts KillWait
(tests/harness/slurm_cluster.py `message_timeout`); this test fails without it.

Run 1: two tasks on the two nodes; task 0 exits 1 (a bad exit); task 1 outlives the SIGTERM
(its node's slurmstepd then waits KillWait, 30 s, inside the RPC). The job is requeued and
started again at once; run 2's step (step 0 again) notes every signal until 140 s after the
bad exit. Started early by test_long_jobs.py, beside its jobs, on the same cluster."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Dict, List, Tuple

import pytest

from tests.cluster.longjobs import Early, show, wait_for
from tests.harness.requeue import start_due

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

#: Seconds after the bad exit that run 2 is watched: the signal sent again comes 70 s after it
#: (MessageTimeout 10 s + Slurm's RPC_RETRY_INTERVAL 60 s), at the next retry pass.
WATCH = 140
TASK = """import os, signal, sys, time
rank, run, log = int(os.environ["SLURM_PROCID"]), sys.argv[1], sys.argv[2]
def note(what):
    with open(f"{log}/run{run}-task{rank}.log", "a") as f:
        f.write(f"{time.time():.2f} {what}\\n")
for s in (signal.SIGTERM, signal.SIGINT, signal.SIGUSR1, signal.SIGUSR2):
    signal.signal(s, lambda number, frame: note(signal.Signals(number).name))
note("start")
if run == "1" and rank == 0:
    time.sleep(3)
    note("bad exit")
    sys.exit(1)
if run == "1":
    end = time.time() + 60
else:  # until WATCH s after run 1's bad exit
    bad = [l for l in open(f"{log}/run1-task0.log").read().splitlines() if l.endswith("bad exit")]
    end = float(bad[0].split()[0]) + %d
while time.time() < end:
    time.sleep(0.2)
note("end")
""" % WATCH
JOB = """#!/bin/bash
run=$(( ${{SLURM_RESTART_COUNT:-0}} + 1 ))
srun -N2 --ntasks-per-node=1 --kill-on-bad-exit=1 {python} {task} $run {log}
echo "step ended (run $run)"
sleep 600
"""
Events = Dict[str, List[Tuple[float, str]]]


def noted(log: Path) -> Dict[str, List[Tuple[float, str]]]:
    """Returns {'run1-task0': [(time.time(), what)], ...} as the tasks noted them."""
    return {p.stem: [(float(t), what) for t, what in
                     (line.split(" ", 1) for line in p.read_text().splitlines())]
            for p in sorted(log.glob("run*-task*.log"))}


def bad_exit(log: Path) -> float:
    """Returns when run 1's task 0 exited 1 (time.time()); 0.0 before it did."""
    return next((t for t, what in noted(log).get("run1-task0", []) if what == "bad exit"), 0.0)


def events(log: Path) -> Events:
    """Returns {'run1-task0': [(seconds after the bad exit, what)], ...}."""
    zero = bad_exit(log)
    return {name: [(round(t - zero, 1), what) for t, what in rows]
            for name, rows in noted(log).items()}


def ended(seen: Events) -> bool:
    """True once both tasks of run 2 noted their end."""
    return all("end" in [what for _, what in seen.get(f"run2-task{rank}", [])]
               for rank in (0, 1))


def observe(cluster, tmp_path_factory) -> Events:
    """Runs the job (run 1's bad exit, the requeue, run 2 started at once); returns what every
    task noted, in seconds after the bad exit."""
    log = tmp_path_factory.mktemp("stale-signal")
    (log / "task.py").write_text(TASK)
    (log / "job.sh").write_text(JOB.format(python=sys.executable, task=log / "task.py", log=log))
    out = log / "out.txt"
    r = cluster.run(["sbatch", "--parsable", "--requeue", "-N2", f"--output={out}",
                     str(log / "job.sh")], timeout=30)
    assert r.returncode == 0, r.stderr
    job = r.stdout.strip().split(";")[0]
    try:
        wait_for(lambda: out.exists() and "step ended (run 1)" in out.read_text(), 120,
                 "run 1's step to end")
        assert cluster.run(["scontrol", "requeue", job], timeout=30).returncode == 0
        wait_for(lambda: start_due(show(cluster, job), time.time()), 30, "the requeue to settle")
        assert cluster.run(["scontrol", "update", f"JobId={job}", "StartTime=now"],
                           timeout=30).returncode == 0
        wait_for(lambda: ended(events(log)) or time.time() > bad_exit(log) + WATCH + 10,
                 WATCH + 30, "run 2's step to end, or the time it had")
        return events(log)
    finally:
        cluster.run(["scancel", job], timeout=30)


#: observe()'s run, started early by test_long_jobs.py (its minutes of waiting go by while
#: the long jobs run).
EARLY = Early(observe)


@pytest.fixture(scope="module")
def observed(longjob_cluster, tmp_path_factory) -> Events:
    """The observation test_long_jobs.py started, else one run now."""
    return EARLY.result(longjob_cluster, tmp_path_factory)


def test_the_bad_exits_signal_reached_run_1_while_its_task_ran(observed: Events) -> None:
    """The case the rule is for: run 1's task 1 got --kill-on-bad-exit's SIGTERM and outlived
    it (its node answered the signal after KillWait, past Slurm's default MessageTimeout)."""
    run1 = [what for _, what in observed["run1-task1"]]
    assert run1[:2] == ["start", "SIGTERM"], observed
    assert "end" not in run1, observed  # SIGKILL after KillWait


def test_run_2s_step_gets_no_signal_of_run_1(observed: Events) -> None:
    """Run 2's step (the same number) ran from before the signal would come again until after,
    and got no signal."""
    for task in ("run2-task0", "run2-task1"):
        rows = observed[task]
        assert rows[0][1] == "start" and rows[0][0] < 70, observed  # before the resend
        assert [what for _, what in rows] == ["start", "end"], observed
        assert rows[-1][0] > 70, observed
