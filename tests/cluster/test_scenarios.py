"""Real launches on a throw-away Slurm cluster: srun, sbatch, salloc + mpirun, mpirun alone.

Every rank runs tests/cluster/probe.py (or the command line) and reports what it resolved;
each scenario asserts on every rank's line, not only on the exit status. The common checks
are in ``assert_sound``. One launch serves several assertions where it can (the probe takes a
list of resolver arguments and resolves each in turn). The ranks resolve as MPIClusterResolver
does without importing TensorFlow (probe.py --no-tf; 6-7 s of CPU a rank saved), but for
``block_run``'s, which run the class and TensorFlow's own resolver in every rank; elsewhere
TensorFlow's answer is replayed in this process from what each rank saw (tf_replay.py).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import time
from collections import defaultdict
from dataclasses import dataclass
from typing import Any, Dict, List, Mapping, Optional, Sequence

import pytest

from tests.cluster.conftest import GPUS_PER_NODE, PROBE, PY, RANK_ENV, hiding
from tests.cluster.tf_replay import tensorflow_view
from tests.harness import chunked
from tests.harness.batch import wait_for_job
from tests.harness.slurm_cluster import PmiGarbled, SlurmCluster
from tests.docs.blocks import assert_sample, block

pytestmark = pytest.mark.cluster

TIMEOUT = 300  # seconds, for every launch: a hang's bound (4 ranks importing TensorFlow took 16 s
#                 here idle and over 120 s on a CI machine running every lane twice as slow)
SRUN_PMIX = ("srun", "--mpi=pmix")


# ------------------------------------------------------------------------------ launching
@dataclass
class Run:
    """One launch: its command, exit status, output, and every rank's parsed line."""

    argv: List[str]
    returncode: int
    stdout: str
    stderr: str
    lines: List[Dict[str, Any]]

    def variant(self, i: int) -> List[Dict[str, Any]]:
        """Returns the lines of the i-th resolver arguments, sorted by rank."""
        return sorted((line for line in self.lines if line.get("variant") == i),
                      key=lambda line: (line.get("rank") is None, line.get("rank")))

    def context(self) -> str:
        """Returns the command, its status and output, for assertion messages."""
        err = "\n".join(line for line in self.stderr.splitlines()
                        if not re.search(r"oneDNN|absl::|cudart_stub|cuda drivers", line))
        return (f"\n$ {shlex.join(self.argv)}\nexit status {self.returncode}\n"
                f"--- stdout\n{self.stdout[-8000:]}--- stderr (TensorFlow's start-up lines "
                f"left out)\n{err[-4000:]}")



SPEC_2_2 = {"worker": ["node1:8888", "node1:8889", "node2:8888", "node2:8889"]}


def assert_smi_calls(cluster: SlurmCluster, run: "Run", expected: Dict[str, int]) -> None:
    """Asserts how often each node's fake nvidia-smi ran since the last reset."""
    calls = {n: cluster.nvidia_smi_calls(n) for n in expected}
    assert calls == expected, f"nvidia-smi calls {calls}{run.context()}"


def launch(cluster: SlurmCluster, argv: Sequence[str], *, env: Optional[Mapping] = None,
           cwd: Optional[str] = None, timeout: float = TIMEOUT, parse: bool = True) -> Run:
    """Runs argv on the cluster's clients with RANK_ENV; returns the Run (fails on timeout).

    With ``parse``, every stdout line that starts with '{' must be one rank's JSON line.
    """
    argv = list(argv)
    try:
        p = cluster.run(argv, timeout=timeout, env={**RANK_ENV, **(env or {})},
                        cwd=cwd or cluster.workdir)
    except subprocess.TimeoutExpired as e:
        out = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
        err = e.stderr.decode() if isinstance(e.stderr, bytes) else (e.stderr or "")
        pytest.fail(f"{shlex.join(argv)} did not finish within {timeout} s (killed)\n"
                    f"--- stdout\n{out[-6000:]}\n--- stderr\n{err[-4000:]}")
    except PmiGarbled as e:
        pytest.fail(f"{e}\n--- stdout\n{e.stdout[-6000:]}\n--- stderr\n{e.stderr[-4000:]}")
    lines = parse_lines(p.stdout) if parse else []
    return Run(argv, p.returncode, p.stdout, p.stderr, lines)


def parse_lines(stdout: str) -> List[Dict[str, Any]]:
    """Returns the probe's JSON lines, put together from its '@id k/n piece' chunks."""
    try:
        return chunked.read(stdout, "@")
    except chunked.TornRecord as e:
        pytest.fail(f"{e}\n{stdout[-3000:]}")


def probe_argv(variants: Any, *, tf: bool = True) -> List[str]:
    """Returns the argv that runs the probe with these resolver arguments."""
    return [PY, PROBE, json.dumps(variants)] + ([] if tf else ["--no-tf"])


def probe(cluster: SlurmCluster, launcher: Sequence[str], variants: Any, *, tf: bool = False,
          **kw) -> Run:
    """Runs the probe under ``launcher`` (srun ..., mpirun ..., salloc ... mpirun ...); with
    ``tf``, every rank runs MPIClusterResolver and TensorFlow's own resolver (else neither:
    assert_sound replays TensorFlow's here where it is compared)."""
    return launch(cluster, [*launcher, *probe_argv(variants, tf=tf)], **kw)


def short(host: str) -> str:
    return host.split(".", 1)[0].lower()


def host_of(address: str) -> str:
    return short(address.rsplit(":", 1)[0])


# ------------------------------------------------------------------------------ checks
def assert_sound(lines: List[Dict[str, Any]], *, n: int, run: Run,
                 placement: Optional[Mapping[int, str]] = None,
                 source: Optional[str] = None, verified: Optional[bool] = None,
                 mpi: Optional[bool] = None, tf: Optional[str] = None,
                 cvd: Optional[Mapping[int, str]] = None,
                 gpus_per_node: int = GPUS_PER_NODE) -> Dict[str, List[str]]:
    """Asserts what must hold for every rank of a successful resolution; returns the spec.

    Args:
      lines: one resolver's lines, one per rank (``Run.variant(i)``).
      n: the number of ranks.
      placement: {rank: host} where the launcher's placement is known.
      source, verified: what every rank's resolution must say.
      mpi: True, every rank started MPI and its size is n; False, no rank started MPI.
      tf: 'same': TensorFlow's resolver on the same rank gives the same ClusterSpec, task and
        CUDA_VISIBLE_DEVICES; 'differs': its ClusterSpec differs; None: not compared.
      cvd: {rank: CUDA_VISIBLE_DEVICES} where the exact slices are known.
    """
    where = run.context()
    errors = [line for line in lines if "error" in line]
    assert not errors, f"ranks failed: {json.dumps(errors, indent=1)[:6000]}{where}"
    assert [line["rank"] for line in lines] == list(range(n)), \
        f"expected one line from each of ranks 0..{n - 1}{where}"

    # one ClusterSpec, agreed by every rank; n unique addresses
    specs = {json.dumps(line["cluster"], sort_keys=True) for line in lines}
    assert len(specs) == 1, f"ranks disagree on the ClusterSpec: {sorted(specs)}{where}"
    cluster = lines[0]["cluster"]
    assert list(cluster) == ["worker"] and len(cluster["worker"]) == n, where
    addresses = cluster["worker"]
    assert len(set(addresses)) == n, f"addresses not unique: {addresses}{where}"

    for line in lines:
        rank = line["rank"]
        # task and own address; the address is on the host this rank runs on
        assert (line["task_type"], line["task_id"]) == ("worker", rank), where
        assert line["resolved_rank"] == rank, where
        assert line["address"] == addresses[rank], where
        assert host_of(line["address"]) == short(line["host"]), (
            f"rank {rank} runs on {line['host']} but its address is {line['address']}{where}")
        assert line["tf_config"] == {"cluster": cluster,
                                     "task": {"type": "worker", "index": rank}}, where
        assert line["master"] == "grpc://" + line["address"], where
        assert line["stable"] is True, f"rank {rank}: a second cluster_spec() differs{where}"
        gpus = line["cuda_visible_devices"]
        assert line["num_accelerators"] == {"GPU": len(gpus.split(",")) if gpus else 0}, where
        if placement is not None:
            assert short(line["host"]) == placement[rank], \
                f"rank {rank} ran on {line['host']}, expected {placement[rank]}{where}"
        if source is not None:
            assert line["source"] == source, where
        if verified is not None:
            assert line["verified"] is verified, where
        # MPI's size is the step's task count wherever both exist
        if mpi is True:
            assert line["mpi_size"] == n and line["mpi_rank"] == rank, where
        elif mpi is False:
            assert line["mpi_size"] is None, f"rank {rank} started MPI{where}"
        slurm = line["slurm"]
        if line["source"] == "slurm":
            assert slurm["SLURM_PROCID"] == str(rank), where
            assert slurm["SLURM_STEP_NUM_TASKS"] == str(n), where
            assert short(slurm["SLURMD_NODENAME"]) == short(line["host"]), where
            if line["mpi_size"] is not None:
                assert line["mpi_size"] == int(slurm["SLURM_STEP_NUM_TASKS"]), where
        else:
            assert line["tf"] is None, where
        # TensorFlow's resolver on the same rank (in it, or replayed here from what it saw)
        if tf is not None and line["tf"] is None:
            line["tf"] = tensorflow_view(line, gpus_per_node)
        if tf == "same":
            theirs = line["tf"]
            assert theirs is not None and "error" not in theirs, \
                f"rank {rank}: TensorFlow's resolver: {theirs}{where}"
            assert theirs["cluster"] == line["cluster"], where
            assert (theirs["task_type"], theirs["task_id"], theirs["address"]) == \
                (line["task_type"], line["task_id"], line["address"]), where
            assert theirs["cuda_visible_devices"] == line["cuda_visible_devices"], where
            assert theirs["master"] == line["master"], where
            assert theirs["num_accelerators"] == line["num_accelerators"], where
        elif tf == "differs":
            theirs = line["tf"]
            assert theirs is not None and "error" not in theirs, where
            assert theirs["cluster"] != line["cluster"], where

    # GPUs: every rank gets some of its node's GPUs, and no two ranks of a node share one
    by_host: Dict[str, List[str]] = defaultdict(list)
    node_gpus = {str(i) for i in range(gpus_per_node)}
    for line in lines:
        entries = (line["cuda_visible_devices"] or "").split(",")
        assert line["cuda_visible_devices"] and set(entries) <= node_gpus, \
            f"rank {line['rank']}: CUDA_VISIBLE_DEVICES={line['cuda_visible_devices']!r}{where}"
        by_host[short(line["host"])].extend(entries)
        if cvd is not None:
            assert line["cuda_visible_devices"] == cvd[line["rank"]], where
    for host, entries in by_host.items():
        assert len(entries) == len(set(entries)), \
            f"GPU slices overlap on {host}: {sorted(entries)}{where}"
    return cluster


def assert_all_fail(lines: List[Dict[str, Any]], *, n: int, run: Run, error_type: str,
                    says: Sequence[str]) -> None:
    """Asserts that every rank 0..n-1 raised ``error_type`` with all of ``says`` in its text."""
    where = run.context()
    assert [line["rank"] for line in lines] == list(range(n)), where
    for line in lines:
        assert line.get("error_type") == error_type, \
            f"rank {line['rank']}: expected {error_type}, got {json.dumps(line)[:2000]}{where}"
        for text in says:
            assert text in line["error"], f"rank {line['rank']}: {text!r} not in error{where}"


def queued(cluster: SlurmCluster) -> List[str]:
    """Returns squeue's lines for ``cluster``: 'JOBID NAME STATE' each."""
    out = cluster.run(["squeue", "-h", "-o", "%i %j %T"], timeout=30).stdout
    return [line.strip() for line in out.splitlines() if line.strip()]


def assert_nothing_left(cluster: SlurmCluster) -> None:
    """Asserts that no task, client or job of ``cluster`` still runs. Waited for, up to 30 s:
    slurmstepd exiting after its step, and a job COMPLETING (slurmctld has not yet heard from
    its nodes; measured in a run of the suite: a failed srun's job, just after srun ended);
    any other job in the queue fails at once."""
    deadline = time.monotonic() + 30
    while (cluster.leftovers() or _completing(queued(cluster))) \
            and time.monotonic() < deadline:
        time.sleep(0.2)
    assert cluster.leftovers() == []
    assert queued(cluster) == []


def _completing(lines: List[str]) -> bool:
    """True where the queue holds jobs and every one is COMPLETING."""
    return bool(lines) and all(line.endswith(" COMPLETING") for line in lines)


BLOCK_3_1 = {0: "node1", 1: "node1", 2: "node1", 3: "node2"}
BLOCK_2_2 = {0: "node1", 1: "node1", 2: "node2", 3: "node2"}
CYCLIC_3_1 = {0: "node1", 1: "node2", 2: "node1", 3: "node1"}


# ------------------------------------------------------------------------------ shared runs
@pytest.fixture(scope="module")
def block_run(cluster: SlurmCluster) -> Run:
    """srun -N2 -n4 --mpi=pmix (tasks 3,1): served to scenario 2 and the tf-config check.
    Its ranks run MPIClusterResolver and TensorFlow's resolver themselves (the other scenarios
    resolve without TensorFlow, and TensorFlow's answer is replayed in this process)."""
    return probe(cluster, ["srun", "-N2", "-n4", "--mpi=pmix"], [{}], tf=True)


# ------------------------------------------------------------------------------ 1-3: block
def test_1_one_node_srun_pmix(cluster: SlurmCluster) -> None:
    """srun -N1 -n4 --mpi=pmix: Slurm cross-checked by MPI; TensorFlow's answer exactly."""
    run = probe(cluster, ["srun", "-N1", "-n4", "--mpi=pmix"], [{}])
    assert run.returncode == 0, run.context()
    spec = assert_sound(run.variant(0), n=4, run=run, placement={r: "node1" for r in range(4)},
                        source="slurm", verified=True, mpi=True, tf="same",
                        cvd={0: "0", 1: "1", 2: "2", 3: "3"})
    assert spec == {"worker": ["node1:8888", "node1:8889", "node1:8890", "node1:8891"]}


def test_2a_two_nodes_block_tasks_3_1(cluster: SlurmCluster, block_run: Run) -> None:
    """srun -N2 -n4 --mpi=pmix: SLURM_STEP_TASKS_PER_NODE=3,1; TensorFlow's answer exactly."""
    run = block_run
    assert run.returncode == 0, run.context()
    lines = run.variant(0)
    assert {line["slurm"]["SLURM_STEP_TASKS_PER_NODE"] for line in lines} == {"3,1"}
    spec = assert_sound(lines, n=4, run=run, placement=BLOCK_3_1, source="slurm",
                        verified=True, mpi=True, tf="same",
                        cvd={0: "0", 1: "1", 2: "2", 3: "0"})
    assert spec == {"worker": ["node1:8888", "node1:8889", "node1:8890", "node2:8888"]}
    assert all(line["notes"] == [] for line in lines), run.context()
    for line in lines:  # the other scenarios' replay gives what TensorFlow said in the rank
        assert line["tf"] is not None, run.context()
        assert tensorflow_view(line, GPUS_PER_NODE) == line["tf"], run.context()


def test_2b_ntasks_per_node_2_with_cuda_visible_devices(cluster: SlurmCluster) -> None:
    """srun -N2 --ntasks-per-node=2 --mpi=pmix with CUDA_VISIBLE_DEVICES=0,1,2,3 exported:
    two GPUs per task from that list, as TensorFlow; nobody runs nvidia-smi."""
    cluster.reset_nvidia_smi_calls()
    run = probe(cluster, ["srun", "-N2", "--ntasks-per-node=2", "--mpi=pmix"], [{}],
                env={"CUDA_VISIBLE_DEVICES": "0,1,2,3"})
    assert run.returncode == 0, run.context()
    lines = run.variant(0)
    assert {line["slurm"]["SLURM_STEP_TASKS_PER_NODE"] for line in lines} == {"2(x2)"}
    spec = assert_sound(lines, n=4, run=run, placement=BLOCK_2_2, source="slurm",
                        verified=True, mpi=True, tf="same",
                        cvd={0: "0,1", 1: "2,3", 2: "0,1", 3: "2,3"})
    assert spec == SPEC_2_2
    assert_smi_calls(cluster, run, {"node1": 0, "node2": 0})


def test_3_uneven_two_nodes_three_tasks(cluster: SlurmCluster) -> None:
    """srun -N2 -n3 --mpi=pmix: tasks 2,1; GPUs split by the fuller node, as TensorFlow."""
    run = probe(cluster, ["srun", "-N2", "-n3", "--mpi=pmix"], [{}])
    assert run.returncode == 0, run.context()
    lines = run.variant(0)
    assert {line["slurm"]["SLURM_STEP_TASKS_PER_NODE"] for line in lines} == {"2,1"}
    spec = assert_sound(lines, n=3, run=run, placement={0: "node1", 1: "node1", 2: "node2"},
                        source="slurm", verified=True, mpi=True, tf="same",
                        cvd={0: "0,1", 1: "2,3", 2: "0,1"})
    assert spec == {"worker": ["node1:8888", "node1:8889", "node2:8888"]}


# ------------------------------------------------------------------------------ 4: cyclic
def test_4_cyclic_placement_true_with_and_without_mpi(cluster: SlurmCluster) -> None:
    """srun -N2 -n4 --distribution=cyclic --mpi=pmix: rank 1 runs on node2.

    First source='slurm' (no MPI: cyclic read from SLURM_DISTRIBUTION and checked against
    SLURMD_NODENAME/SLURM_GTIDS), then source='auto' (cross-checked by MPI): both put rank 1's
    address on node2, where TensorFlow's resolver puts it on node1, and a note says why.
    """
    run = probe(cluster, ["srun", "-N2", "-n4", "--distribution=cyclic", "--mpi=pmix"],
                [{"source": "slurm"}, {}])
    assert run.returncode == 0, run.context()
    expected = {"worker": ["node1:8888", "node2:8888", "node1:8889", "node1:8890"]}
    for variant, mpi in ((0, False), (1, True)):
        lines = run.variant(variant)
        assert {line["slurm"]["SLURM_DISTRIBUTION"] for line in lines} == {"cyclic"}
        spec = assert_sound(lines, n=4, run=run, placement=CYCLIC_3_1, source="slurm",
                            verified=mpi, mpi=mpi, tf="differs",
                            cvd={0: "0", 1: "0", 2: "1", 3: "2"})
        assert spec == expected
        for line in lines:
            assert host_of(line["tf"]["cluster"]["worker"][1]) == "node1", run.context()
            # without MPI a second note: the other node's GPUs were not checked
            unchecked = [n for n in line["notes"] if "not checked without MPI" in n]
            assert len(unchecked) == (0 if mpi else 1), run.context()
            notes = [n for n in line["notes"] if n not in unchecked]
            assert len(notes) == 1, run.context()
            note = notes[0]
            for text in ("TensorFlow", "rank 1", "node1", "node2", "cyclic"):
                assert text in note, f"{text!r} not in note {note!r}{run.context()}"
    assert "differs from TensorFlow" in run.stderr, run.context()  # logged as a warning


# ------------------------------------------------------------------------------ 5: sbatch
def test_5_sbatch_job_script(cluster: SlurmCluster) -> None:
    """sbatch of a job script (-N2, --ntasks-per-node=2) running srun --mpi=pmix: every
    rank's line from the job's output file; nvidia-smi once per node."""
    out = os.path.join(cluster.workdir, "probe-job.out")
    script = os.path.join(cluster.workdir, "probe-job.sbatch")
    with open(script, "w") as f:
        f.write("#!/bin/sh\n"
                "#SBATCH -N2\n"
                "#SBATCH --ntasks-per-node=2\n"
                "#SBATCH --job-name=mpir-probe\n"
                f"#SBATCH --output={out}\n"
                "#SBATCH --time=2\n"
                f"srun --mpi=pmix {shlex.join(probe_argv([{}], tf=False))}\n")
    cluster.reset_nvidia_smi_calls()
    try:
        sub = launch(cluster, ["sbatch", "--parsable", script], timeout=30)
        assert sub.returncode == 0 and sub.stdout.strip().isdigit(), sub.context()
        state = wait_for_job(cluster, sub.stdout.strip())
    finally:
        cluster.run(["scancel", "--name=mpir-probe"], timeout=30)  # no-op when it ended
    with open(out) as f:
        text = f.read()
    run = Run(sub.argv, sub.returncode, text, f"job: {state}\n{sub.stderr}",
              parse_lines(text))
    assert state == "COMPLETED 0:0", run.context()
    lines = run.variant(0)
    spec = assert_sound(lines, n=4, run=run, placement=BLOCK_2_2, source="slurm",
                        verified=True, mpi=True, cvd={0: "0,1", 1: "2,3", 2: "0,1", 3: "2,3"})
    assert spec == SPEC_2_2
    assert_smi_calls(cluster, run, {"node1": 1, "node2": 1})


# ------------------------------------------------------------------------------ 6, 7, 9: mpirun
def test_6_mpirun_without_slurm_one_host(cluster: SlurmCluster) -> None:
    """mpirun -n 4 on node1, no Slurm: source 'mpi', all on one host, nvidia-smi once."""
    cluster.reset_nvidia_smi_calls()
    run = probe(cluster, [*cluster.on_node("node1"), "mpirun", "-n", "4"], [{}])
    assert run.returncode == 0, run.context()
    lines = run.variant(0)
    assert all(line["slurm"]["SLURM_PROCID"] is None for line in lines), run.context()
    spec = assert_sound(lines, n=4, run=run, placement={r: "node1" for r in range(4)},
                        source="mpi", verified=False, mpi=True,
                        cvd={0: "0", 1: "1", 2: "2", 3: "3"})
    assert spec == {"worker": ["node1:8888", "node1:8889", "node1:8890", "node1:8891"]}
    assert_smi_calls(cluster, run, {"node1": 1, "node2": 0})


def test_7_mpirun_inside_salloc(cluster: SlurmCluster) -> None:
    """salloc -N2 mpirun -n 4: Slurm's variables describe mpirun's daemons.

    source='auto' notices and uses MPI (a note says so): ranks on node1 and node2, the spec
    placement-true. verify=True fails on every rank with a MismatchError naming mpirun inside
    an allocation.
    """
    run = probe(cluster, ["salloc", "-N2", "mpirun", "-n", "4"], [{}, {"verify": True}])
    assert run.returncode == 3, run.context()
    lines = run.variant(0)
    # what the ranks saw: the daemons' step (2 tasks), not the ranks
    assert {line["slurm"]["SLURM_STEP_NUM_TASKS"] for line in lines} == {"2"}, run.context()
    assert_sound(lines, n=4, run=run, source="mpi", verified=False, mpi=True)
    assert {short(line["host"]) for line in lines} == {"node1", "node2"}, run.context()
    for line in lines:
        assert any("mpirun" in note and "allocation" in note and "using MPI" in note
                   for note in line["notes"]), run.context()
    assert_all_fail(run.variant(1), n=4, run=run, error_type="MismatchError",
                    says=("mpirun", "inside a Slurm allocation", "SLURM_PROCID"))


def assert_two_nodes_without_slurm(run: Run) -> List[Dict[str, Any]]:
    """Asserts a 4-rank job with ranks 0,1 on node1 and 2,3 on node2, started without Slurm
    (any MPI): source 'mpi', every rank sound, the node's GPUs divided; returns its lines."""
    assert run.returncode == 0, run.context()
    lines = run.variant(0)
    assert all(line["slurm"]["SLURM_PROCID"] is None for line in lines), run.context()
    spec = assert_sound(lines, n=4, run=run, placement=BLOCK_2_2, source="mpi",
                        verified=False, mpi=True, cvd={0: "0,1", 1: "2,3", 2: "0,1", 3: "2,3"})
    assert spec == SPEC_2_2
    return lines


def test_9_mpirun_hostfile_two_hosts(cluster: SlurmCluster) -> None:
    """mpirun --hostfile (node1, node2; 2 slots) -n 4 through the harness's rsh agent, no
    Slurm: source 'mpi', ranks 0,1 on node1 and 2,3 on node2; nvidia-smi once per node."""
    cluster.reset_nvidia_smi_calls()
    run = probe(cluster, ["mpirun", "--hostfile", cluster.hostfile(2), "-n", "4"], [{}])
    assert_two_nodes_without_slurm(run)
    assert_smi_calls(cluster, run, {"node1": 1, "node2": 1})


# ------------------------------------------------------------------------------ 8: --mpi=none
def test_8_srun_mpi_none(cluster: SlurmCluster) -> None:
    """srun -N2 -n4 --mpi=none: source 'slurm' from Slurm's variables, MPI never started, a
    note and a warning that the cross-check was skipped (enable: --mpi=pmix). verify=True
    and source='mpi' fail on every rank with a ResolutionError naming --mpi=pmix."""
    run = probe(cluster, ["srun", "-N2", "-n4", "--mpi=none"],
                [{}, {"verify": True}, {"source": "mpi"}])
    assert run.returncode == 3, run.context()
    lines = run.variant(0)
    assert_sound(lines, n=4, run=run, placement=BLOCK_3_1, source="slurm", verified=False,
                 mpi=False, tf="same", cvd={0: "0", 1: "1", 2: "2", 3: "0"})
    for line in lines:
        assert any("skipped" in note and "--mpi=pmix" in note for note in line["notes"]), \
            run.context()
    warnings = [x for x in run.stderr.splitlines() if "mpi_resolver" in x and "skipped" in x]
    assert len(warnings) == 4 and all("--mpi=pmix" in w for w in warnings), run.context()
    assert_all_fail(run.variant(1), n=4, run=run, error_type="ResolutionError",
                    says=("verify=True", "--mpi=pmix"))
    assert_all_fail(run.variant(2), n=4, run=run, error_type="ResolutionError",
                    says=("source='mpi'", "without MPI wiring", "--mpi=pmix"))
    assert all(line["mpi_size"] is None for line in run.lines), run.context()


# ------------------------------------------------------------------------------ plane
def test_plane_distribution(cluster: SlurmCluster) -> None:
    """srun -N2 -n4 --distribution=plane=2 --mpi=pmix: Slurm's variables do not say where
    ranks run, so source='slurm' fails on every rank (MismatchError: use --mpi=pmix with
    source='auto'), and source='auto' builds the spec from where MPI ranks run."""
    run = probe(cluster, ["srun", "-N2", "-n4", "--distribution=plane=2", "--mpi=pmix"],
                [{"source": "slurm"}, {}])
    assert run.returncode == 3, run.context()
    assert_all_fail(run.variant(0), n=4, run=run, error_type="MismatchError",
                    says=("SLURM_DISTRIBUTION", "plane", "--mpi=pmix"))
    assert all(line["mpi_size"] is None for line in run.variant(0)), run.context()
    lines = run.variant(1)
    assert_sound(lines, n=4, run=run, source="slurm", verified=True, mpi=True)
    assert {short(line["host"]) for line in lines} == {"node1", "node2"}, run.context()


# ------------------------------------------------------------------------------ n9 / n10
def test_n9_n10_srun_pmix(cluster_n9: SlurmCluster) -> None:
    """srun -N2 -n4 --mpi=pmix on n9, n10: rank 0 on n9 (TensorFlow sorts n10 first)."""
    run = probe(cluster_n9, ["srun", "-N2", "-n4", "--mpi=pmix"], [{}])
    assert run.returncode == 0, run.context()
    lines = run.variant(0)
    assert {line["slurm"]["SLURM_STEP_NODELIST"] for line in lines} == {"n[9-10]"}
    spec = assert_sound(lines, n=4, run=run, placement={0: "n9", 1: "n9", 2: "n9", 3: "n10"},
                        source="slurm", verified=True, mpi=True, tf="differs",
                        cvd={0: "0", 1: "1", 2: "2", 3: "0"})
    assert spec == {"worker": ["n9:8888", "n9:8889", "n9:8890", "n10:8888"]}
    for line in lines:
        assert host_of(line["tf"]["cluster"]["worker"][0]) == "n10", run.context()
        assert any("TensorFlow" in note and "n10" in note for note in line["notes"]), \
            run.context()


def test_n9_n10_srun_mpi_none_source_slurm(cluster_n9: SlurmCluster) -> None:
    """srun -N2 -n4 --mpi=none, source='slurm' on n9, n10: no MPI, placement still right
    (Slurm's node-list order), from Slurm's variables alone."""
    run = probe(cluster_n9, ["srun", "-N2", "-n4", "--mpi=none"], [{"source": "slurm"}])
    assert run.returncode == 0, run.context()
    lines = run.variant(0)
    spec = assert_sound(lines, n=4, run=run, placement={0: "n9", 1: "n9", 2: "n9", 3: "n10"},
                        source="slurm", verified=False, mpi=False, tf="differs",
                        cvd={0: "0", 1: "1", 2: "2", 3: "0"})
    assert spec == {"worker": ["n9:8888", "n9:8889", "n9:8890", "n10:8888"]}


# ------------------------------------------------------------------------------ command line
@pytest.fixture(scope="module")
def cli_env(cluster: SlurmCluster) -> Dict[str, str]:
    """RANK_ENV with a `tensorflow` first on the path that fails to import: the command line
    must not import TensorFlow."""
    return hiding(cluster, "tensorflow", "the mpi_resolver command line imported TensorFlow")


CLI = (PY, "-m", "mpi_resolver")


def test_cli_check_srun_pmix(cluster: SlurmCluster, cli_env, block_run: Run) -> None:
    """srun -N2 -n4 --mpi=pmix mpi-resolver check: exit 0, the report printed once."""
    run = launch(cluster, [*SRUN_PMIX, "-N2", "-n4", *CLI, "check"], env=cli_env)
    assert run.returncode == 0, run.context()
    out = run.stdout
    assert out.count("OK: Slurm and MPI agree on all 4 ranks") == 1, run.context()
    assert out.count("What each rank sees:") == 1, run.context()
    assert out.count("ClusterSpec: ") == 1, run.context()
    spec = json.loads(out.split("ClusterSpec: ", 1)[1].splitlines()[0])
    assert spec == block_run.variant(0)[0]["cluster"], run.context()
    rows = [line.split() for line in out.splitlines() if re.match(r"\d+\s+node\d", line)]
    # the records table (rank, mpi host, SLURM_PROCID, SLURMD_NODENAME, tasks, GPUs...)
    records = [r for r in rows if len(r) >= 5 and r[2].isdigit()]
    assert [(r[0], r[1], r[2], r[3], r[4]) for r in records] == [
        (str(k), h, str(k), h, "4") for k, h in BLOCK_3_1.items()], run.context()
    assert "tensorflow" not in run.stderr.lower(), run.context()


def test_cli_check_json(cluster: SlurmCluster, cli_env, block_run: Run) -> None:
    """check --json: one JSON document (rank 0's) that says the ranks agree."""
    run = launch(cluster, [*SRUN_PMIX, "-N2", "-n4", *CLI, "check", "--json"], env=cli_env,
                 parse=False)
    assert run.returncode == 0, run.context()
    report = json.loads(run.stdout)
    assert report["agree"] is True and report["differences"] == [], run.context()
    assert report["cluster"] == block_run.variant(0)[0]["cluster"], run.context()
    assert [(r["rank"], r["host"]) for r in report["records"]] == list(BLOCK_3_1.items())
    assert [(r["rank"], r["address"]) for r in report["ranks"]] == [
        (line["rank"], line["address"]) for line in block_run.variant(0)]


def test_cli_check_mpirun_inside_salloc(cluster: SlurmCluster, cli_env) -> None:
    """salloc -N2 mpirun -n 4 mpi-resolver check: exit 1, a table naming the mismatch."""
    run = launch(cluster, ["salloc", "-N2", "mpirun", "-n", "4", *CLI, "check"], env=cli_env)
    assert run.returncode == 1, run.context()
    out = run.stdout
    assert out.count("MISMATCH: Slurm and MPI disagree") == 1, run.context()
    assert out.count("What each rank sees:") == 1, run.context()
    assert "mpirun" in out and "inside a Slurm allocation" in out, run.context()
    table = out.split("MISMATCH:", 1)[1]
    assert re.search(r"^1\s+rank\s+SLURM_PROCID=0\s+rank 1$", table, re.M), run.context()
    assert re.search(r"^3\s+size\s+2 tasks\s+4 processes$", table, re.M), run.context()
    assert "OK:" not in out, run.context()
    assert_sample(block("mismatch-mpirun-in-salloc"), out, run.context())


def test_cli_tf_config_srun_pmix(cluster: SlurmCluster, cli_env, block_run: Run) -> None:
    """srun --mpi=pmix mpi-resolver tf-config: each rank prints its own TF_CONFIG, equal to
    MPIClusterResolver.tf_config() on the same rank of the same scenario."""
    run = launch(cluster, [*SRUN_PMIX, "-l", "-N2", "-n4", *CLI, "tf-config"], env=cli_env)
    assert run.returncode == 0, run.context()
    got = {}
    for text in run.stdout.splitlines():
        label, _, config = text.partition(": ")
        assert label.strip().isdigit(), run.context()
        assert int(label) not in got, f"rank {label} printed twice{run.context()}"
        got[int(label)] = json.loads(config)
    expected = {line["rank"]: line["tf_config"] for line in block_run.variant(0)}
    assert got == expected, run.context()
    assert all(c["task"]["index"] == r for r, c in got.items())


def test_cli_check_srun_mpi_none_error_once(cluster: SlurmCluster, cli_env) -> None:
    """srun -N2 -n4 --mpi=none mpi-resolver check: exit 2, one error naming --mpi=pmix."""
    run = launch(cluster, ["srun", "--mpi=none", "-N2", "-n4", *CLI, "check"], env=cli_env,
                 parse=False)
    assert run.returncode == 2, run.context()
    errors = [x for x in run.stderr.splitlines() if x.startswith("mpi-resolver: error:")]
    assert errors and all("--mpi=pmix" in x for x in errors), run.context()
    assert run.stdout == "", run.context()
    assert len(errors) == 1, f"the error was printed {len(errors)} times{run.context()}"


def test_zz_nothing_left_running(cluster: SlurmCluster) -> None:
    """After every launch: no probe, command line or job of this cluster still runs."""
    assert_nothing_left(cluster)
