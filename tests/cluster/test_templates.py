"""Both sbatch templates with a user's own script (tests/cluster/template_script.py, which takes
--greeting only): it runs with exactly the arguments given after the template's name, and the
package's settings reach it through the templates' MPI_RESOLVER_* variables (the checkpoint
directory, the signal and its grace period, the periodic saves; the port base the submitter
sets), and SRUN_CPUS_PER_TASK carries --cpus-per-task to the steps."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Dict, List

import pytest

from tests.cluster.test_training import task_env
from tests.harness.batch import sbatch_wait

pytestmark = [pytest.mark.cluster]

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = str(ROOT / "tests" / "cluster" / "template_script.py")


def own_lines(log: str) -> List[Dict]:
    """Returns every task's OWN SCRIPT record, by rank."""
    found = [json.loads(m) for m in re.findall(r"^OWN SCRIPT (\{.*\})$", log, re.M)]
    return sorted(found, key=lambda r: r["rank"])


def submit(cluster, template: str, options: List[str], tmp_path: Path,
           **extra: str) -> str:
    """Runs ``template`` (sbatch, waited for) with the own script; returns its output."""
    out = tmp_path / "out.txt"
    env = {**task_env(cluster), "SCRIPT": SCRIPT, "CHECKPOINT_DIR": str(tmp_path / "ckpt"),
           **extra}
    job = sbatch_wait(cluster, [f"--output={out}", *options, str(ROOT / "examples" / template),
                                "--greeting", "hello there"], env=env, cwd=str(ROOT),
                      timeout=150)
    log = out.read_text() if out.exists() else "(no output file)"
    assert job.state == "COMPLETED 0:0", f"{job.context()}\n{log[-4000:]}"
    return log


def test_the_cpu_template_runs_any_script_with_its_own_arguments(cluster, tmp_path):
    log = submit(cluster, "train.sbatch", ["--cpus-per-task=2"], tmp_path,
                 MPI_RESOLVER_PORT_BASE="auto")
    records = own_lines(log)
    assert [r["rank"] for r in records] == [0, 1], log
    for r in records:
        assert r["greeting"] == "hello there", log
        assert (r["signal"], r["grace"]) == ("SIGUSR1", 120.0), log
        assert r["every"] == "auto" and r["checkpoint_dir"] == str(tmp_path / "ckpt"), log
        assert r["srun_cpus_per_task"] == "2" and r["step"] == "CPUs=4", log
        ports = [int(a.rsplit(":", 1)[1]) for a in r["cluster"]["worker"]]
        assert 8888 not in ports, log  # MPI_RESOLVER_PORT_BASE=auto reached the resolver
    assert "OK: Slurm and MPI agree on all 2 ranks." in log, log
    assert log.index("OK: Slurm and MPI agree") < log.index("== training:")
    assert "== training: " + SCRIPT + " --greeting hello there" in log, log


def test_the_gpu_template_runs_any_script_with_its_own_arguments(gres_cluster, tmp_path):
    """Sized down to node1 with two tasks, as tests/cluster/test_training.py does."""
    log = submit(gres_cluster, "train_gpu.sbatch",
                 ["-w", "node1", "--nodes=1", "--ntasks-per-node=2", "--gres=gpu:2",
                  "--cpus-per-task=1"], tmp_path, MPI_RESOLVER_PORT_BASE="24400")
    records = own_lines(log)
    assert [r["rank"] for r in records] == [0, 1], log
    for r in records:
        assert r["greeting"] == "hello there", log
        assert (r["signal"], r["grace"]) == ("SIGUSR1", 300.0), log
        assert r["every"] == "auto" and r["checkpoint_dir"] == str(tmp_path / "ckpt"), log
        assert r["srun_cpus_per_task"] == "1" and r["step"] == "CPUs=2", log
        assert r["cluster"] == {"worker": ["node1:24400", "node1:24401"]}, log
    # the preflight resolved the same ports, from the same variable
    assert re.search(r"^0\s+node1\s+worker\s+0\s+node1:24400\s", log, re.M), log
    assert "== training: " + SCRIPT + " --greeting hello there" in log, log
