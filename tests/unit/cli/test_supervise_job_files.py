"""mpi-resolver supervise reading the job's files in its checkpoint directory (cli/supervise),
its edges for real as in tests/unit/cli/test_supervise.py (supervise in a process of its own, a
stand-in srun or a Python step, a stand-in scontrol on PATH): the job's settings as the run
leaves its manifest (requeue, requeue_on_time_limit), the nodes earlier runs of a requeued job
blamed (its ledger) at the first run, and a manifest that cannot be read."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path
from typing import Dict, List, Optional

import pytest

from mpi_resolver.long_jobs import ledger
from tests.unit.cli.test_supervise import (CANCELLED, KILLED, SCONTROL, TIME_LIMIT, env,
                                           finish, runs, said, supervise)

pytestmark = pytest.mark.unit


@pytest.fixture
def scontrol(tmp_path: Path) -> Path:
    """A directory with scontrol's stand-in (its calls in calls.txt beside it)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "scontrol").write_text(SCONTROL)
    (bin_dir / "scontrol").chmod(0o755)
    return bin_dir


def calls(bin_dir: Path) -> List[str]:
    done = bin_dir / "calls.txt"
    return done.read_text().splitlines() if done.exists() else []


#: A step that writes the job's manifest as its run leaves it ($MANIFEST), says so, then
#: ends with {code} at once, or on SIGTERM where {wait}.
WRITES = """import os, signal, sys, time
signal.signal(signal.SIGTERM, lambda *_: sys.exit({code}))
path = os.path.join(os.environ["MPI_RESOLVER_CHECKPOINT_DIR"], "mpi_resolver.json")
with open(path, "w") as f:
    f.write(os.environ["MANIFEST"])
print("written", flush=True)
if {wait}:
    time.sleep(60)
sys.exit({code})
"""
SAVED = (r"run 1: python\S* exited 75, \d+\.\d s into the run; the newest checkpoint "
         r"(advanced to|is still) step 5: the tasks had the warning signal; ")
LIMIT = (r"SIGTERM at the time limit came to supervise; run 1: python\S* exited 143 \(128 \+ "
         r"SIGTERM\), \d+\.\d s into the run; the newest checkpoint advanced to step 5: the "
         r"job's time is ending; ")
REQUEUED = r"requeued job 12 \(scontrol requeue 12\): exit 75"


def written(settings: Dict[str, bool], job: str = "12") -> str:
    return json.dumps({"job": job, "step": 5, "settings": settings})


@pytest.mark.parametrize("before, during, limit, code, job_line, done, status, line", [
    pytest.param(None, written({"requeue": False}), False, 75, CANCELLED, [], 75,
                 SAVED + r"not requeued: the job's settings say requeue=False: exit 75",
                 id="the first run writes requeue=False: not requeued"),
    pytest.param(None, written({"requeue": True}), False, 75, CANCELLED, ["requeue 12"], 75,
                 SAVED + REQUEUED, id="the first run writes requeue=True: requeued"),
    pytest.param(written({"requeue": True}), written({"requeue": False}), False, 75,
                 CANCELLED, [], 75, SAVED + r"not requeued: the job's settings say "
                 r"requeue=False: exit 75", id="the run's manifest, not the one before it"),
    pytest.param(None, written({"requeue": False}, job="11"), False, 75, CANCELLED,
                 ["requeue 12"], 75, SAVED + REQUEUED,
                 id="another job's settings are not this job's: the defaults"),
    pytest.param(None, written({"requeue_on_time_limit": True}), True, 143, TIME_LIMIT,
                 ["show job -o 12", "show job -o 12", "requeue 12"], 75, LIMIT + REQUEUED,
                 id="the time limit, the run writes requeue_on_time_limit=True: requeued"),
    pytest.param(None, written({"requeue_on_time_limit": False}), True, 143, TIME_LIMIT,
                 ["show job -o 12"], 143, LIMIT + r"not requeued: the time limit ends the job "
                 r"\(requeue_on_time_limit=False\): exit 143",
                 id="the time limit, requeue_on_time_limit=False: ended"),
])
def test_the_settings_are_the_manifest_s_as_the_run_leaves_it(
        tmp_path: Path, scontrol: Path, before: Optional[str], during: str, limit: bool,
        code: int, job_line: str, done: List[str], status: int, line: str) -> None:
    """The first run writes the job's manifest (its settings with it): supervise decides on
    the requeue with the settings it holds when the run has ended, not at its own start."""
    directory = tmp_path / "ckpt"
    directory.mkdir()
    if before is not None:
        (directory / "mpi_resolver.json").write_text(before)
    extra = {"PATH": f"{scontrol}:{os.environ['PATH']}", "SLURM_JOB_ID": "12",
             "JOB_LINE": job_line, "MANIFEST": during,
             "MPI_RESOLVER_CHECKPOINT_DIR": str(directory)}
    proc = subprocess.Popen([sys.executable, "-m", "mpi_resolver", "supervise", "--",
                             sys.executable, "-c", WRITES.format(code=code, wait=limit)],
                            env=env(**extra), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None and proc.stdout.readline() == b"written\n"
    if limit:
        proc.send_signal(signal.SIGTERM)
    _, err, seen = finish(proc, 30, 25)
    assert proc.returncode == status, (err, seen)
    assert calls(scontrol) == done
    assert re.fullmatch(line, said(err)[-1]), said(err)


def blamed_run(run: int, node: str = "node2", job: str = "12") -> Dict[str, object]:
    """Returns the ledger's record of an earlier run of ``job`` whose task on ``node`` was
    killed, the job requeued after it."""
    return ledger.RunEnded(job, run, "killed by a signal", f"task 1 on {node}: Killed (signal 9)",
                           node, True, 137, 10 * run, 10 * run + 10, "advanced",
                           "requeue").record()


TWICE = [blamed_run(1), blamed_run(2)]
LEFT = ("the next run leaves out node2 (failed twice in this job): the job has 1 node more "
        "than the step needs")
KEPT = ("node2 (failed twice in this job) is not left out of the next run: the job has no "
        "spare node for it; to leave it out, ask Slurm for 1 node more and raise SPARE_NODES "
        "(supervise --spare-nodes) by as many")


@pytest.mark.parametrize("records, nodes, nodelist, args, first, lines", [
    pytest.param(TWICE, "3", "node[1-3]", ["--", "-N2", "x"], "-N2 --exclude=node2 x", [LEFT],
                 id="a spare node (the step's -N): left out of the first run"),
    pytest.param(TWICE, "3", "node[1-3]", ["--spare-nodes", "1", "--", "x"],
                 "--nodes=2 --exclude=node2 x", [LEFT], id="--spare-nodes 1: left out"),
    pytest.param(TWICE, "2", "node[1-2]", ["--", "-N2", "x"], "-N2 x", [KEPT],
                 id="no spare node: not left out, said"),
    pytest.param(TWICE, "3", "node[1,3-4]", ["--", "-N2", "x"], "-N2 x", [],
                 id="not in this allocation: nothing to leave out"),
    pytest.param(TWICE[:1], "3", "node[1-3]", ["--", "-N2", "x"], "-N2 x", [],
                 id="blamed once: kept"),
    pytest.param([blamed_run(1, job="99"), blamed_run(2, job="99")], "3", "node[1-3]",
                 ["--", "-N2", "x"], "-N2 x", [], id="another job's runs: not this job's"),
])
def test_the_first_run_of_a_requeued_job_leaves_out_its_earlier_lemons(
        srun: Path, tmp_path: Path, scontrol: Path, records: List[Dict[str, object]],
        nodes: str, nodelist: str, args: List[str], first: str, lines: List[str]) -> None:
    """The nodes that failed twice in the job's earlier runs (its ledger: before the
    requeue) are left out of the new allocation's first run where it has a spare node; where
    it has none, supervise says so."""
    directory = tmp_path / "ckpt"
    directory.mkdir()
    for record in records:
        ledger.append(str(directory), record)
    split = args.index("--")
    proc = supervise([*args[:split], "--", str(srun), *args[split + 1:]],
                     MPI_RESOLVER_CHECKPOINT_DIR=str(directory), SLURM_JOB_ID="12",
                     SLURM_JOB_NUM_NODES=nodes, SLURM_JOB_NODELIST=nodelist,
                     PATH=f"{scontrol}:{os.environ['PATH']}")
    assert proc.returncode == 0, proc.stderr
    assert runs(srun) == [first]
    assert said(proc.stderr) == lines


def test_a_node_that_cannot_be_left_out_is_said_once(srun: Path, tmp_path: Path,
                                                     scontrol: Path) -> None:
    """node2, a lemon of the runs before the requeue, fails again in this allocation (no
    spare node): every run keeps it; the line is said before the first run only."""
    directory = tmp_path / "ckpt"
    directory.mkdir()
    for record in TWICE:
        ledger.append(str(directory), record)
    proc = supervise(["--", str(srun), "-N2", "x"], MPI_RESOLVER_CHECKPOINT_DIR=str(directory),
                     SLURM_JOB_ID="12", SLURM_JOB_NUM_NODES="2", SLURM_JOB_NODELIST="node[1-2]",
                     PATH=f"{scontrol}:{os.environ['PATH']}", REPORT_1=KILLED, EXIT_1="143",
                     MANIFEST_1=json.dumps({"job": "12", "step": 40}))
    assert proc.returncode == 0, proc.stderr
    assert runs(srun) == ["-N2 x", "-N2 x"]
    assert [re.sub(r"\d+\.\d s", "T s", line) for line in said(proc.stderr)] == [
        KEPT, "run 3: task 1 on node2: Killed (signal 9), T s into the run; the newest "
        "checkpoint advanced to step 40: restart 1 of 3", "the step completed after 1 restart"]


@pytest.mark.parametrize("make, why", [
    pytest.param(lambda p: p.write_text("{not json"), "Expecting property name enclosed in "
                 "double quotes: line 1 column 2 (char 1)", id="not JSON"),
    pytest.param(lambda p: p.write_text("[1, 2]"), "a JSON list, not an object",
                 id="not an object"),
    pytest.param(lambda p: p.mkdir(), "Is a directory", id="not a file"),
])
def test_a_manifest_that_cannot_be_read_is_said_once_and_max_restarts_bounds(
        srun: Path, tmp_path: Path, make, why: str) -> None:
    """Two crashes without a readable manifest: no 'no progress' stop (79), which a
    manifest that cannot be read does not show; the restarts are --max-restarts' alone."""
    directory = tmp_path / "ckpt"
    directory.mkdir()
    path = directory / "mpi_resolver.json"
    make(path)
    proc = supervise(["--max-restarts", "1", "--", str(srun), "x"],
                     MPI_RESOLVER_CHECKPOINT_DIR=str(directory), SLURM_JOB_ID="12",
                     REPORT_1=KILLED, EXIT_1="143", REPORT_2=KILLED, EXIT_2="143")
    assert proc.returncode == 137, proc.stderr
    got = said(proc.stderr)
    assert got[0] == (f"warning: the job's manifest {path} cannot be read ({why}): supervise "
                      "sees neither the checkpoints' progress nor the job's settings there, so "
                      "the restarts are bounded by --max-restarts 1 alone and the settings are "
                      "the defaults (requeue=True, requeue_on_time_limit=False); fix or remove "
                      "the file"), got
    assert [re.sub(r"\d+\.\d s", "T s", line) for line in got[1:]] == [
        "run 1: task 1 on node2: Killed (signal 9), T s into the run: restart 1 of 1",
        "run 2: task 1 on node2: Killed (signal 9), T s into the run: the restarts are used "
        "up (--max-restarts 1): exit 137"]
