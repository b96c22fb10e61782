"""A node lost outright, for real: a 3-node throw-away cluster, a 2-node batch job
(`sbatch --requeue --open-mode=append -N2 --ntasks-per-node=1`) whose script runs
examples/train.py with periodic checkpoints under `mpi-resolver supervise` in front of
`srun --mpi=pmix --kill-on-bad-exit=1`. Once the chief has printed step 25, the node that runs
task 1 loses its power: every process in its network namespace (its slurmd, the step's
slurmstepd, the task) is frozen and then killed (SIGSTOP, then SIGKILL, by PID), so none of
them reports anything to anyone, and nothing answers there any more.

What Slurm 22.05 does then (measured here, SlurmdTimeout=10, MessageTimeout 10 s): the
survivor's collective fails ("Connection reset by peer" at once, or TensorFlow's heartbeat
after 10 s) and it exits 1; srun may give up on the lost node's step after KillWait + 2 s, and
a step that supervise reruns then waits ("Requested nodes are busy"): the lost node's part of
the old step is never released, so no restart can be used up meanwhile. The job holds until
slurmctld sets the node DOWN. In its debug log each ping of a node whose slurmd is gone takes
MessageTimeout (connects refused, retried every second), no new round starts before one ends,
and the node is set DOWN by the first round whose previous round started SlurmdTimeout after
its last answer: 24.4-29.7 s after the loss in 7 runs (SlurmdTimeout 5: 25.8 s; Slurm's default
300: by that rule about 5 minutes). At that moment slurmctld logs "requeue job JobId=J due to
failure of node N", records the run as JobState=NODE_FAIL (the job completion log), ends the
batch script ("CANCELLED ... DUE TO NODE FAILURE" in the job's output) and, the job allowing
requeue, puts it back PENDING with Reason=BeginTime and Restarts=1 within 0.1 s; `scontrol show
job` never shows NODE_FAIL itself (COMPLETING, then PENDING). With the node's link also down
(no answer at all, no refusal) the time was the same (one run: 28.0 s). The next run may start
121 s after the requeue (tests/harness/requeue.py); the test starts it at once (`scontrol
update StartTime=now` once that is due, 2 s later) on the two nodes left, and its chief resumes
from the last periodic checkpoint.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import time
from pathlib import Path
from typing import Dict, Iterator, List

import pytest

from tests.cluster.conftest import PY, RANK_ENV, _require_cluster_tools
from tests.cluster.longjobs import show
from tests.cluster.test_lost_worker import TRAIN, task_pids
from tests.cluster.test_scenarios import assert_nothing_left
from tests.harness.requeue import start_due
from tests.harness.saves import wait_saved
from tests.harness.slurm_cluster import SlurmCluster

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

NODES = ("node1", "node2", "node3")
#: Slurm's SlurmdTimeout on this cluster (its default, 300 s, would hold the test 5 minutes)
SLURMD_TIMEOUT = 10
EVERY = 10
PORT = 24740
START = 150  # seconds for a run's workers to start and the chief to reach a step (2 cores)
NODE_FAIL_BOUND = 90  # seconds from the loss to the requeue (measured 24.4-29.7)
SCRIPT = """#!/bin/bash
echo "== job $SLURM_JOB_ID (run $(( ${{SLURM_RESTART_COUNT:-0}} + 1 ))) on $SLURM_JOB_NODELIST"
python -m mpi_resolver supervise --max-restarts 2 -- \\
  srun --mpi=pmix --kill-on-bad-exit=1 python {train} --epochs 3 --steps-per-epoch 20 \\
  --log-every 1 --checkpoint-dir {ckpt} --checkpoint-every {every} --port-base {port}
"""
RUN = re.compile(r"^== job (\d+) \(run (\d+)\) on (\S+)$", re.M)
STEP = re.compile(r"^  step (\d+): loss ", re.M)


@pytest.fixture(scope="module")
def lost_node_cluster() -> Iterator[SlurmCluster]:
    """node1, node2 and node3 (no GPUs), SlurmdTimeout=SLURMD_TIMEOUT; stopped after the
    module (which also ends what is left of the node the test powered off)."""
    _require_cluster_tools()
    c = SlurmCluster(NODES, gpus={}, slurmd_timeout=SLURMD_TIMEOUT)
    try:
        c.start()
        yield c
    finally:
        c.stop()


def runs(text: str) -> List[str]:
    """Returns each run's part of the job's appended output (from its '== job' line on)."""
    starts = [m.start() for m in RUN.finditer(text)]
    return [text[a:b] for a, b in zip(starts, starts[1:] + [len(text)], strict=True)]


def environ(pid: int) -> Dict[str, str]:
    raw = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    return dict(v.decode(errors="replace").split("=", 1) for v in raw if b"=" in v)


def netns_of(cluster: SlurmCluster, pid: int) -> str:
    """Returns the name of the cluster's node namespace that ``pid`` runs in."""
    inode = os.stat(f"/proc/{pid}/ns/net").st_ino
    names = [ns for ns in cluster.state["netns"] if os.stat(f"/run/netns/{ns}").st_ino == inode]
    assert len(names) == 1, f"pid {pid} is in none of {cluster.state['netns']}"
    return names[0]


def ns_pids(ns: str) -> List[int]:
    out = subprocess.run(["ip", "netns", "pids", ns], capture_output=True, text=True,
                         timeout=10, check=True).stdout
    return [int(p) for p in out.split()]


def cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode().strip()
    except OSError:
        return ""


def power_off(ns: str) -> List[str]:
    """Ends every process of the node namespace ``ns`` as a power loss would: all of them
    frozen first (SIGSTOP, until no new one appears), so that none sees another die and
    reports it, then SIGKILLed, by PID. Returns their command lines."""
    frozen: Dict[int, str] = {}
    while new := [p for p in ns_pids(ns) if p not in frozen]:
        for pid in new:
            frozen[pid] = cmdline(pid)
            with contextlib.suppress(ProcessLookupError):  # ended meanwhile
                os.kill(pid, signal.SIGSTOP)
    for pid in frozen:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while ns_pids(ns) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert ns_pids(ns) == [], f"still running in {ns}: {ns_pids(ns)}"
    return list(frozen.values())


def wait_until(condition, seconds: float, what: str, context) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"no {what} within {seconds} s{context()}")
        time.sleep(0.1)


def test_a_lost_node_fails_the_job_slurm_requeues_it_and_the_next_run_resumes(
        lost_node_cluster: SlurmCluster, tmp_path: Path) -> None:
    cluster = lost_node_cluster
    config = cluster.run(["scontrol", "show", "config"], timeout=30).stdout
    assert re.search(rf"^SlurmdTimeout\s*= {SLURMD_TIMEOUT} sec$", config, re.M), config
    assert re.search(r"^ReturnToService\s*= 2$", config, re.M), config
    ckpt = Path(cluster.workdir) / "lost-node-ckpt"
    out = tmp_path / "out.txt"
    script = tmp_path / "job.sh"
    script.write_text(SCRIPT.format(train=TRAIN, ckpt=ckpt, every=EVERY, port=PORT))
    env = {**RANK_ENV, "PATH": f"{Path(PY).parent}:{cluster.env['PATH']}"}
    r = cluster.run(["sbatch", "--parsable", "--requeue", "--open-mode=append", "-N2",
                     "--ntasks-per-node=1", f"--output={out}", str(script)], env=env,
                    timeout=30)
    assert r.returncode == 0, r.stderr
    job = r.stdout.strip()
    times: Dict[str, float] = {}
    fields: Dict[str, str] = {}

    def text() -> str:
        return out.read_text(errors="replace") if out.exists() else ""

    def context() -> str:
        log = Path(cluster.workdir, "log", "slurmctld.log").read_text(errors="replace")
        return (f"\njob {job}: {fields}\ntimes {times}\n--- output\n{text()[-6000:]}"
                f"\n--- slurmctld.log\n{log[-3000:]}")

    try:
        wait_until(lambda: any(int(s) >= 25 for s in STEP.findall(text())), START,
                   "chief's step 25", context)
        wait_saved(ckpt, 2 * EVERY, START)  # on disk: one interval at most is lost
        pids = task_pids(cluster, PORT)
        assert sorted(pids) == [0, 1], f"{pids}{context()}"
        lost = environ(pids[1])["SLURMD_NODENAME"]
        killed = power_off(netns_of(cluster, pids[1]))
        hit, wall_hit = time.monotonic(), time.time()
        assert any(c.startswith(f"slurmd -D -N {lost} ") for c in killed), killed
        assert any(c.startswith("slurmstepd:") for c in killed), killed
        assert any(TRAIN in c for c in killed), killed

        def requeued() -> bool:
            fields.clear()
            fields.update(show(cluster, job))
            nodes = cluster.run(["sinfo", "-h", "-n", lost, "-o", "%T"], timeout=30).stdout
            if "down" in nodes.lower() and "down" not in times:
                times["down"] = time.monotonic() - hit
            if fields.get("Restarts") == "1" and "restarts" not in times:
                times["restarts"] = time.monotonic() - hit
            return fields.get("JobState") == "PENDING" and fields.get("Reason") == "BeginTime"

        wait_until(requeued, NODE_FAIL_BOUND, "requeue (PENDING, Reason=BeginTime)", context)
        times["requeued"] = time.monotonic() - hit
        assert fields.get("Restarts") == "1", context()
        wait_until(lambda: start_due(show(cluster, job), time.time()), 30,
                   "requeue to settle (tests/harness/requeue.py)", context)
        r = cluster.run(["scontrol", "update", f"JobId={job}", "StartTime=now"], timeout=30)
        assert r.returncode == 0, r.stderr
        times["start_now"] = time.monotonic() - hit
        wait_until(lambda: len(runs(text())) >= 2, START, "second run", context)
        times["run_2"] = time.monotonic() - hit
        wait_until(lambda: "resumed from the checkpoint" in runs(text())[1], START,
                   "resume", context)
        times["resumed"] = time.monotonic() - hit

        def ended() -> bool:
            fields.clear()
            fields.update(show(cluster, job))
            return fields.get("JobState") in ("COMPLETED", "FAILED", "CANCELLED", "NODE_FAIL")

        wait_until(ended, START, "end of the second run", context)
        times["done"] = time.monotonic() - hit
    finally:
        cluster.run(["scancel", job], timeout=30)  # nothing where it completed
    where = context()
    assert (fields.get("JobState"), fields.get("ExitCode")) == ("COMPLETED", "0:0"), where
    assert fields.get("Restarts") == "1", where
    assert len(runs(text())) == 2, where
    first, second = runs(text())
    # Slurm's own record of the lost node: the controller's log, the job completion log
    # (the first run ended NODE_FAIL) and the batch step's line in the job's output.
    log = Path(cluster.workdir, "log", "slurmctld.log").read_text(errors="replace")
    assert re.search(rf"requeue job JobId={job} due to failure of node {lost}$", log, re.M), where
    assert re.search(rf"Nodes {lost} not responding, setting DOWN$", log, re.M), where
    comp = Path(cluster.workdir, "log", "jobcomp.txt").read_text(errors="replace")
    assert re.search(rf"^JobId={job} .*JobState=NODE_FAIL ", comp, re.M), f"{comp}{where}"
    assert re.search(rf"\*\*\* JOB {job} ON \S+ CANCELLED AT \S+ DUE TO NODE FAILURE",
                     first), where
    # The next run: on the two nodes left, resumed from the last periodic checkpoint.
    left = sorted(set(NODES) - {lost})
    hosts = dict(re.findall(rf"^rank (\d): worker:\d at (\w+):{PORT},", second, re.M))
    assert sorted(hosts.values()) == left, where
    last = max(map(int, STEP.findall(first)))
    resumed = re.search(rf"^resumed from the checkpoint in {re.escape(str(ckpt))} at step "
                        r"(\d+)$", second, re.M)
    assert resumed, where
    k = int(resumed.group(1))
    assert k % EVERY == 0 and k >= 20 and 0 <= last - k <= EVERY + 1, \
        f"resumed at {k} after step {last}{where}"
    assert re.search(rf"^steps done: 60 \(resumed from {k}\)$", second, re.M), where
    assert_nothing_left(cluster)
    stamp = re.search(rf"^\[(\S+)\] requeue job JobId={job} ", log, re.M)
    logged = time.mktime(time.strptime(stamp.group(1)[:19], "%Y-%m-%dT%H:%M:%S")) \
        + float("0" + stamp.group(1)[19:]) - wall_hit if stamp else float("nan")
    print(f"\n{lost} lost after the chief's step {last} (task 1's node; SlurmdTimeout="
          f"{SLURMD_TIMEOUT}): NODE_FAIL and the requeue logged {logged:.1f} s later "
          f"(sinfo down {times.get('down', float('nan')):.1f} s, Restarts=1 "
          f"{times.get('restarts', float('nan')):.1f} s, PENDING BeginTime "
          f"{times['requeued']:.1f} s); StartTime=now sent at {times['start_now']:.1f} s; "
          f"the next run's first line {times['run_2']:.1f} s, its resume at step {k} "
          f"({last - k} steps lost) {times['resumed']:.1f} s, its end {times['done']:.1f} s "
          f"after the loss")
