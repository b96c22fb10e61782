"""Smoke tests of the throw-away Slurm cluster itself (root, Slurm, Open MPI and mpi4py needed)."""
from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sys
import time
from typing import Iterator

import pytest

from .slurm_cluster import ClusterError, SlurmCluster, _starttime

PY = sys.executable
_TOOLS = ("slurmctld", "slurmd", "munged", "srun", "mpirun", "ip", "nsenter", "unshare")
_missing = [t for t in _TOOLS if not shutil.which(t, path=os.environ.get("PATH", "") + ":/usr/sbin")]
pytestmark = [
    pytest.mark.cluster,
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root"),
    pytest.mark.skipif(bool(_missing), reason=f"missing tools: {_missing}"),
]

# one line per rank: "rank size host", written in one call so lines never interleave
RANKS = ("from mpi4py import MPI; import socket, sys; c = MPI.COMM_WORLD; "
         "sys.stdout.write(f'{c.rank} {c.size} {socket.gethostname()}\\n')")


def ranks(out: str) -> dict[int, tuple[int, str]]:
    """Parse RANKS output into {rank: (size, host)}."""
    rows = [line.split() for line in out.splitlines() if re.fullmatch(r"\d+ \d+ \S+", line)]
    return {int(r): (int(s), h) for r, s, h in rows}


def leftovers(c: SlurmCluster, pids: list[int], netns: list[str], links: list[str]) -> list[str]:
    """What of a stopped cluster is still there (empty when stop() cleaned up)."""
    left = [f"pid {p}" for p in pids if _starttime(p) is not None]
    listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    left += [f"netns {ns}" for ns in netns if ns in listed]
    left += [f"link {lk}" for lk in links if os.path.exists(f"/sys/class/net/{lk}")]
    with open("/etc/hosts") as f:
        left += [f"hosts {line.strip()}" for line in f if f"mpir-harness {c.tag}" in line]
    return left


@pytest.fixture(scope="session")
def cluster() -> Iterator[SlurmCluster]:
    with SlurmCluster(["node1", "node2"], gpus={"node1": 2, "node2": 4}) as c:
        yield c


def test_one_node_srun_pmix() -> None:
    with SlurmCluster(["node1"]) as c:
        r = c.run(["srun", "-N1", "-n4", "--mpi=pmix", PY, "-c", RANKS], timeout=60)
        assert r.returncode == 0, r.stderr
        assert ranks(r.stdout) == {i: (4, "node1") for i in range(4)}


def test_two_nodes_block(cluster: SlurmCluster) -> None:
    code = RANKS.replace("\\n'", " {__import__(\"os\").environ[\"SLURM_STEP_TASKS_PER_NODE\"]}\\n'")
    r = cluster.run(["srun", "-N2", "-n4", "--mpi=pmix", PY, "-c", code], timeout=60)
    assert r.returncode == 0, r.stderr
    lines = sorted(r.stdout.split("\n")[:-1])
    assert lines == ["0 4 node1 3,1", "1 4 node1 3,1", "2 4 node1 3,1", "3 4 node2 3,1"]


def test_two_nodes_cyclic(cluster: SlurmCluster) -> None:
    r = cluster.run(["srun", "-N2", "-n4", "--mpi=pmix", "--distribution=cyclic", PY, "-c", RANKS],
                    timeout=60)
    assert r.returncode == 0, r.stderr
    assert {k: h for k, (_, h) in ranks(r.stdout).items()} == {0: "node1", 1: "node2", 2: "node1",
                                                                3: "node1"}


def test_sbatch(cluster: SlurmCluster) -> None:
    script, out = os.path.join(cluster.workdir, "job.sh"), os.path.join(cluster.workdir, "job.out")
    with open(script, "w") as f:
        f.write("#!/bin/sh\nsrun hostname\n")
    r = cluster.run(["sbatch", "--wait", "-N2", "-n2", f"--output={out}", script], timeout=60)
    assert r.returncode == 0, r.stderr
    assert re.match(r"Submitted batch job \d+", r.stdout)
    with open(out) as f:
        assert sorted(f.read().split()) == ["node1", "node2"]


def test_salloc_mpirun(cluster: SlurmCluster) -> None:
    r = cluster.run(["salloc", "-N2", "mpirun", "-n", "4", PY, "-c", RANKS], timeout=90)
    assert r.returncode == 0, r.stderr
    got = ranks(r.stdout)
    assert sorted(got) == [0, 1, 2, 3] and {s for s, _ in got.values()} == {4}
    assert {h for _, h in got.values()} == {"node1", "node2"}


def test_hostfile_mpirun_rsh_agent(cluster: SlurmCluster) -> None:
    r = cluster.run(["mpirun", "--hostfile", cluster.hostfile(2), "--mca", "plm_rsh_agent",
                     cluster.rsh_agent, "-n", "4", PY, "-c", RANKS], timeout=90)
    assert r.returncode == 0, r.stderr
    got = ranks(r.stdout)
    assert got == {0: (4, "node1"), 1: (4, "node1"), 2: (4, "node2"), 3: (4, "node2")}


def test_fake_gpus(cluster: SlurmCluster) -> None:
    cluster.reset_nvidia_smi_calls()
    r = cluster.run(["srun", "-N2", "-n2", "bash", "-c",
                     "echo $(hostname) $(nvidia-smi --list-gpus | grep -c '^GPU ')"], timeout=60)
    assert r.returncode == 0, r.stderr
    assert sorted(r.stdout.splitlines()) == ["node1 2", "node2 4"]
    assert (cluster.nvidia_smi_calls("node1"), cluster.nvidia_smi_calls("node2")) == (1, 1)
    assert shutil.which("nvidia-smi", path=cluster.env["PATH"]) is None  # none in the host namespace
    cluster.reset_nvidia_smi_calls()
    assert cluster.nvidia_smi_calls("node1") == 0


def test_on_node_and_names(cluster: SlurmCluster) -> None:
    r = subprocess.run(cluster.on_node("node2") + ["sh", "-c", "hostname; pwd; getent hosts node1"],
                       env=cluster.env, cwd=cluster.workdir, capture_output=True, text=True, timeout=10)
    host, cwd, hosts = r.stdout.splitlines()
    assert (host, cwd) == ("node2", cluster.workdir)
    assert hosts.split() == [cluster.address("node1"), "node1"]
    assert socket.gethostbyname("node2") == cluster.address("node2")  # host namespace too


def test_tcp_between_nodes_by_name(cluster: SlurmCluster) -> None:
    server = ("import socket; s = socket.socket(); "
              "s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind(('', 8888)); "
              "s.listen(); c, a = s.accept(); c.sendall(socket.gethostname().encode() + b' ' + "
              "c.recv(64)); c.close()")
    client = ("import socket, time\nfor _ in range(100):\n try:\n"
              "  c = socket.create_connection(('node1', 8888), timeout=5); break\n"
              " except OSError: time.sleep(0.05)\n"
              "c.sendall(socket.gethostname().encode()); print(c.recv(64).decode())")
    srv = subprocess.Popen(cluster.on_node("node1") + [PY, "-c", server], env=cluster.env,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        r = cluster.run(cluster.on_node("node2") + [PY, "-c", client], timeout=20)
        assert r.stdout.strip() == "node1 node2", r.stderr
    finally:
        srv.kill()
        srv.wait(5)


def test_tcp_between_tasks_by_name(cluster: SlurmCluster) -> None:
    code = ("import os, socket, time\nif os.environ['SLURM_PROCID'] == '0':\n"
            " s = socket.create_server(('', 8889), reuse_port=True); c, _ = s.accept()\n"
            " print('got', c.recv(64).decode())\nelse:\n"
            " for _ in range(100):\n  try:\n"
            "   c = socket.create_connection(('node1', 8889)); break\n"
            "  except OSError: time.sleep(0.05)\n"
            " c.sendall(socket.gethostname().encode())\n")
    r = cluster.run(["srun", "-N2", "-n2", PY, "-c", code], timeout=30)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "got node2"


def test_n9_n10_order_and_placement() -> None:
    code = RANKS.replace("\\n'", " {__import__(\"os\").environ[\"SLURM_STEP_NODELIST\"]}\\n'")
    with SlurmCluster(["n9", "n10"]) as c:
        r = c.run(["srun", "-N2", "-n4", "--mpi=pmix", "--distribution=block", PY, "-c", code],
                  timeout=60)
        assert r.returncode == 0, r.stderr
        assert sorted(r.stdout.split("\n")[:-1]) == [
            "0 4 n9 n[9-10]", "1 4 n9 n[9-10]", "2 4 n9 n[9-10]", "3 4 n10 n[9-10]"]


def test_run_timeout_kills_group(cluster: SlurmCluster) -> None:
    t = time.monotonic()
    with pytest.raises(subprocess.TimeoutExpired):
        cluster.run(["sh", "-c", "sleep 30 & sleep 30"], timeout=0.5)
    assert time.monotonic() - t < 5


def test_port_in_use_refused() -> None:
    with socket.socket() as s:
        s.bind(("0.0.0.0", 0))
        s.listen()
        c = SlurmCluster(["node1"], port=s.getsockname()[1])
        with pytest.raises(ClusterError, match="in use"):
            c.start()
        assert not os.path.exists(c.workdir)


def test_stop_leaves_nothing() -> None:
    c = SlurmCluster(["node1", "node2"]).start()
    pids = [p for p, _, _ in c.state["pids"]]
    netns, links = list(c.state["netns"]), list(c.state["links"])
    assert len(pids) == 4 and len(netns) == 2
    t = time.monotonic()
    c.stop()
    assert time.monotonic() - t < 5
    assert leftovers(c, pids, netns, links) == []
    assert not os.path.exists(c.workdir)
    c.stop()  # idempotent


def test_failed_start_cleans_up() -> None:
    class Broken(SlurmCluster):
        def _write_rsh_agent(self) -> None:  # fails after every daemon started
            raise RuntimeError("boom")

    c = Broken(["node1", "node2"])
    with pytest.raises(RuntimeError, match="boom"):
        c.start()
    assert c.state["pids"] == [] and not os.path.exists(c.workdir)
    listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    assert f"mpir-{c.tag}-" not in listed


def test_command_line(tmp_path: "os.PathLike[str]") -> None:
    script, d = os.path.join(os.path.dirname(__file__), "slurm_cluster.py"), str(tmp_path)
    r = subprocess.run([PY, script, "start", "--nodes", "a1,b2", "--dir", d],
                       capture_output=True, text=True, timeout=60)
    try:
        assert r.returncode == 0, r.stderr
        assert f"export SLURM_CONF={d}/slurm.conf" in r.stdout
        s = subprocess.run(["bash", "-c", r.stdout + "\nsinfo -h -N -o '%N %t'"],
                           capture_output=True, text=True, timeout=30)
        assert s.stdout.split("\n")[:-1] == ["a1 idle", "b2 idle"], s.stderr
    finally:
        st = subprocess.run([PY, script, "stop", "--dir", d], capture_output=True, text=True,
                            timeout=60)
    assert st.returncode == 0, st.stderr
    assert not os.path.exists(os.path.join(d, "harness.json"))
    assert "a1" not in subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
