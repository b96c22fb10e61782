"""`mpi-resolver check --checkpoint-dir DIR` for real on the two-node cluster: a directory
under the cluster's work directory (one file system for both emulated nodes, as a shared one
is for real nodes) passes; /dev/shm (each emulated node has its own tmpfs there, as every real
node has) is node-local; a directory only one node has is missing on the other; --json; with
--connect; and without MPI (--source slurm)."""

from __future__ import annotations

import contextlib
import json
import os
import re
import subprocess
from typing import Iterator, Sequence

from tests.cluster.conftest import PY
from tests.cluster.test_scenarios import Run, launch
from tests.harness.slurm_cluster import SlurmCluster
from tests.unit.test_readme_quotes import checkpoint_blocks
from tests.docs.blocks import command, runs_like

CHECK = (PY, "-m", "mpi_resolver", "check", "--gpus-per-node", "0", "--timeout", "3")
JOB = ("srun", "--mpi=pmix", "-N2", "--ntasks-per-node=2")


def shared_dir(cluster: SlurmCluster, name: str) -> str:
    """Returns an empty directory under the cluster's work directory (both nodes see it)."""
    path = os.path.join(cluster.workdir, name)
    os.makedirs(path, exist_ok=True)
    return path


@contextlib.contextmanager
def on_nodes(cluster: SlurmCluster, path: str, nodes: Sequence[str]) -> Iterator[str]:
    """Creates ``path`` in the mount namespace of each of ``nodes`` (their own /dev/shm), and
    removes it after the block."""
    def each(*argv: str) -> None:
        for node in nodes:
            subprocess.run([*cluster.on_node(node), *argv], check=True, timeout=30)

    each("mkdir", "-p", path)
    try:
        yield path
    finally:
        each("rm", "-rf", path)


def check(cluster: SlurmCluster, *args: str) -> Run:
    return launch(cluster, [*JOB, *CHECK, *args], parse=False)


def report_of(run: Run) -> str:
    """Returns the CHECKPOINT DIR report: from its first line to the end of rank 0's
    output."""
    return run.stdout[run.stdout.index("CHECKPOINT DIR"):].rstrip("\n")


def like_readme(report: str, path: str, which: int) -> None:
    """Asserts that ``report`` is the README's output ``which`` (0 good, 1 bad) but for the
    path, the sizes, the seconds waited and the columns' widths."""
    readme = checkpoint_blocks()[which]
    readme_path = re.search(r"CHECKPOINT DIR \w+: (\S+?):? ", readme).group(1)

    def normal(text: str, path: str) -> str:
        text = re.sub(r"[\d.]+ (?:B|[KMGTPE]iB)\b", "SIZE", text.replace(path, "DIR"))
        return re.sub(r" +", " ", re.sub(r"waited [\d.]+ s", "waited N s", text))

    assert normal(report, path) == normal(readme, readme_path)


def test_a_shared_directory_passes(cluster: SlurmCluster) -> None:
    path = shared_dir(cluster, "ckpt-shared")
    runs_like(command("commands", "srun --mpi=pmix mpi-resolver check --checkpoint-dir")
              .replace('"$SCRATCH/ckpt"', path), [*JOB, *CHECK, "--checkpoint-dir", path])
    run = check(cluster, "--checkpoint-dir", path)
    assert run.returncode == 0, run.context()
    assert "OK: Slurm and MPI agree on all 4 ranks." in run.stdout, run.context()
    assert re.fullmatch(rf"CHECKPOINT DIR OK: {re.escape(path)} seen and written by all 2 "
                        r"nodes; free space: [\d.]+ \w+ of [\d.]+ \w+ \(node1, node2 alike\)",
                        report_of(run)), run.context()
    like_readme(report_of(run), path, 0)
    assert os.listdir(path) == [], "every rank removes its file"


def test_each_node_s_own_dev_shm_is_node_local(cluster: SlurmCluster) -> None:
    with on_nodes(cluster, f"/dev/shm/mpir-ckpt-{os.getpid()}", ("node1", "node2")) as path:
        run = check(cluster, "--checkpoint-dir", path)
    assert run.returncode == 1, run.context()
    lines = report_of(run).splitlines()
    assert lines[0] == (f"CHECKPOINT DIR FAILED: {path}: 2 of 2 nodes cannot use it as the "
                        "job's shared checkpoint directory:"), run.context()
    assert re.match(r"node1, node2 +node-local +each node has its own: no node sees the files "
                    r"written on the others \(waited 3\.\d s; tmpfs\) +use a directory on a "
                    r"shared file system, such as \$HOME or the site's scratch", lines[2]), \
        run.context()
    assert len(lines) == 4 and lines[3].endswith("(node1, node2 alike)"), run.context()
    like_readme(report_of(run), path, 1)


def test_a_directory_one_node_lacks_is_missing_there(cluster: SlurmCluster) -> None:
    with on_nodes(cluster, f"/dev/shm/mpir-ckpt-{os.getpid()}", ("node1",)) as path:
        run = check(cluster, "--checkpoint-dir", path)
    assert run.returncode == 1, run.context()
    lines = report_of(run).splitlines()
    assert lines[0].startswith(f"CHECKPOINT DIR FAILED: {path}: 1 of 2 nodes"), run.context()
    assert re.match(r"node2 +missing +looking it up: No such file or directory \(ENOENT\) +"
                    rf"create it on a shared file system \(`mkdir -p {re.escape(path)}`",
                    lines[2]), run.context()
    assert len(lines) == 4 and lines[3].endswith("(node1)"), run.context()


def test_json_carries_the_result(cluster: SlurmCluster) -> None:
    path = shared_dir(cluster, "ckpt-json")
    run = check(cluster, "--json", "--checkpoint-dir", path)
    assert run.returncode == 0, run.context()
    found = json.loads(run.stdout)["checkpoint_dir"]
    assert (found["ok"], found["path"], found["nodes"], found["gathered"]) == (
        True, path, ["node1", "node2"], True), run.context()
    assert [s["hosts"] for s in found["space"]] == [["node1", "node2"]], run.context()
    with on_nodes(cluster, f"/dev/shm/mpir-ckpt-{os.getpid()}", ("node1", "node2")) as shm:
        failed = check(cluster, "--json", "--checkpoint-dir", shm)
    assert failed.returncode == 1, failed.context()
    found = json.loads(failed.stdout)["checkpoint_dir"]
    assert [(p["hosts"], p["problem"]) for p in found["problems"]] == [
        (["node1", "node2"], "node-local")], failed.context()
    assert found["fstypes"] == {"node1": "tmpfs", "node2": "tmpfs"}, failed.context()


def test_with_connect(cluster: SlurmCluster) -> None:
    path = shared_dir(cluster, "ckpt-connect")
    run = check(cluster, "--connect", "--checkpoint-dir", path)
    assert run.returncode == 0, run.context()
    assert run.stdout.count("CHECKPOINT DIR OK") == 1, run.context()
    assert "CONNECT OK: the job's 4 connection(s) among 4 rank(s)" in run.stdout, run.context()


def test_without_mpi_each_rank_checks_its_own_node(cluster: SlurmCluster) -> None:
    """--source slurm: rank 0 says it checked its own node and that the others could not be
    compared; the other ranks print nothing where theirs passed."""
    path = shared_dir(cluster, "ckpt-slurm")
    run = check(cluster, "--source", "slurm", "--checkpoint-dir", path)
    assert run.returncode == 0, run.context()
    assert run.stdout.count("CHECKPOINT DIR") == 1, run.context()
    assert f"CHECKPOINT DIR OK on this rank's node: {path} written and read back on node1" \
        in run.stdout, run.context()
    assert "note: without MPI (--source slurm) the ranks cannot compare what they see" in \
        run.stdout, run.context()
    with on_nodes(cluster, f"/dev/shm/mpir-ckpt-{os.getpid()}", ("node1",)) as shm:
        failed = check(cluster, "--source", "slurm", "--checkpoint-dir", shm)
    assert failed.returncode == 1, failed.context()
    assert failed.stdout.count("rank 2: CHECKPOINT DIR FAILED on this rank's node") == 1
    assert failed.stdout.count("rank 3: CHECKPOINT DIR FAILED on this rank's node") == 1
