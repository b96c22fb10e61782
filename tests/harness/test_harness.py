"""Smoke tests of the throw-away Slurm cluster itself (root, Slurm, Open MPI and mpi4py needed)."""
from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
from typing import Dict, Iterator, Optional, Tuple

import pytest

from . import host_network, slurm_cluster
from .processes import group_members, starttime
from .slurm_cluster import ClusterError, SlurmCluster

PY = sys.executable
_TOOLS = ("slurmctld", "slurmd", "munged", "srun", "mpirun", "ip", "nsenter", "unshare")
_missing = [t for t in _TOOLS
            if not shutil.which(t, path=os.environ.get("PATH", "") + ":/usr/sbin")]
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
    left = [f"pid {p}" for p in pids if starttime(p) is not None]
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
    # none in the host namespace
    assert shutil.which("nvidia-smi", path=cluster.env["PATH"]) is None
    cluster.reset_nvidia_smi_calls()
    assert cluster.nvidia_smi_calls("node1") == 0


def test_on_node_and_names(cluster: SlurmCluster) -> None:
    r = subprocess.run(cluster.on_node("node2") + ["sh", "-c", "hostname; pwd; getent hosts node1"],
                       env=cluster.env, cwd=cluster.workdir, capture_output=True, text=True,
                       timeout=10)
    host, cwd, hosts = r.stdout.splitlines()
    assert (host, cwd) == ("node2", cluster.workdir)
    assert hosts.split() == [cluster.address("node1"), "node1", "node1-alias"]  # --address tests
    # The host namespace's /etc/hosts holds the names too (the newest cluster's first: where
    # clusters run at once, as the suite's side-by-side runs start them, a name resolves to the
    # last one started there, so the line is what is asserted, not the resolution).
    with open("/etc/hosts") as f:
        lines = [line.split("#")[0].split() for line in f]
    assert [cluster.address("node2"), "node2", "node2-alias"] in lines


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


def test_run_timeout_kills_group(cluster: SlurmCluster, tmp_path) -> None:
    """On timeout the whole process group is stopped: the shell and its background child."""
    pids = tmp_path / "pids"
    t = time.monotonic()
    with pytest.raises(subprocess.TimeoutExpired):
        cluster.run(["sh", "-c", f"sleep 30 & echo $$ $! > {pids}; wait"], timeout=0.5)
    # without the group stop, the pipes stay open for the sleeps' 30 s
    assert time.monotonic() - t < 20
    assert [p for p in map(int, pids.read_text().split()) if starttime(p) is not None] == []


@pytest.mark.parametrize("script, grace, signalled, after_grace", [
    pytest.param("sleep 30", 5.0, -15, False, id="ends on SIGTERM: at once"),
    pytest.param("trap '' TERM; sleep 30", 1.5, -9, True,
                 id="ignores SIGTERM: SIGKILL after grace"),
    pytest.param("(trap '' TERM; sleep 30)", 1.5, -15, True,
                 id="the shell ends on SIGTERM, its child ignores it: SIGKILL after grace"),
])
def test_stop_group_gives_sigterm_its_grace(script: str, grace: float, signalled: int,
                                            after_grace: bool) -> None:
    """stop_group: SIGTERM to the group; SIGKILL only once ``grace`` s have passed (an srun
    killed sooner leaves its job allocated), to whatever of the group is left, not only to
    the process it started; it returns once none of the group lives."""
    p = subprocess.Popen(["sh", "-c", f"{script.replace('sleep', 'echo ready; sleep')} & wait"],
                         start_new_session=True, stdout=subprocess.PIPE, text=True)
    assert p.stdout.readline() == "ready\n"  # the trap is set
    t = time.monotonic()
    slurm_cluster.stop_group(p, grace)
    took = time.monotonic() - t
    p.stdout.close()
    assert p.returncode in (signalled, 128 - signalled), p.returncode
    assert (took >= grace) if after_grace else (took < grace), took
    assert group_members(p.pid) == []


def test_a_timed_out_step_says_what_its_processes_were_doing(cluster: SlurmCluster) -> None:
    """A step that outlives the timeout: the error's stderr ends with the harness's report,
    the load and a line each for the task (asleep, little CPU) and srun (diagnose.report), so
    that a stuck step can be told from a starved one."""
    with pytest.raises(subprocess.TimeoutExpired) as e:
        cluster.run(["srun", "-w", "node1", "-n1", "sleep", "60"], timeout=10)
    report = e.value.stderr.split("--- harness, at the timeout: load average ", 1)[1]
    held = r"(?: \((?:pending|blocked) [^)]*\))?"  # srun blocks signals in its threads
    assert re.search(rf"pid \d+ S in \w+: 0\.\d s of CPU in \d+ s alive{held}: "
                     r"/\S+/sleep 60\n", report), report
    assert re.search(rf"pid \d+ S in \w+: \d+\.\d s of CPU in \d+ s alive{held}: "
                     r"srun -w node1 -n1 sleep 60\n", report), report


PMI1_PUT = os.path.join(os.path.dirname(__file__), "pmi1_put.py")


@pytest.mark.parametrize("size", [1024, 1025])
def test_pmi1_line_limit_and_the_step_stopped_at_once(cluster: SlurmCluster, size: int) -> None:
    """Slurm 22.05's pmi2 plugin reads a PMI-1 request with one read() of at most 1,024 bytes
    (src/plugins/mpi/pmi2/pmi1.c): a put line of 1,024 bytes is stored whole; one of 1,025 is
    answered rc=0 but stored nowhere, with 'value not properly terminated in client request',
    and the task waits for ever. The harness stops such a step at once (PmiGarbled) instead
    of waiting out the timeout."""
    argv = ["srun", "-N2", "-n2", "--mpi=pmi2", PY, PMI1_PUT, str(size)]
    if size <= 1024:
        r = cluster.run(argv, timeout=120)
        assert r.returncode == 0, r.stderr
        assert len(re.findall(r"^stored (\d+) of \1 value bytes$", r.stdout, re.M)) == 2, \
            r.stdout
        assert "not properly terminated" not in r.stderr, r.stderr
        return
    with pytest.raises(slurm_cluster.PmiGarbled) as caught:
        cluster.run(argv, timeout=120)  # never reached: the task waits for ever
    assert "value not properly terminated in client request" in caught.value.line
    assert "more than 1,024 bytes" in str(caught.value)


def test_nodes_have_their_own_dev_shm(cluster: SlurmCluster) -> None:
    """Each node has a /dev/shm of its own, as a real node does: a file one node writes there
    is not seen by the other node nor by the host (MPICH names its shared memory after the
    job and step ids, which every throw-away cluster numbers from 1: two clusters on one
    machine would otherwise share it)."""
    name = f"/dev/shm/mpir-harness-test-{os.getpid()}"
    on = {n: cluster.on_node(n) for n in cluster.node_names}
    subprocess.run([*on["node1"], "sh", "-c", f"echo x > {name}"], check=True, timeout=30)
    try:
        seen = {n: subprocess.run([*on[n], "test", "-e", name], timeout=30).returncode == 0
                for n in cluster.node_names}
        assert seen == {"node1": True, "node2": False}
        assert not os.path.exists(name)
    finally:
        subprocess.run([*on["node1"], "rm", "-f", name], timeout=30)


def test_port_in_use_refused() -> None:
    with socket.socket() as s:
        s.bind(("0.0.0.0", 0))
        s.listen()
        c = SlurmCluster(["node1"], port=s.getsockname()[1])
        with pytest.raises(ClusterError, match="in use"):
            c.start()
        assert not os.path.exists(c.workdir)


def hosts_names() -> list:
    """Every name /etc/hosts of the host namespace lists."""
    with open("/etc/hosts") as f:
        return [name for line in f for name in line.split("#")[0].split()[1:]]


def test_stop_leaves_nothing() -> None:
    c = SlurmCluster(["node1", "node2"]).start()
    pids = [p for p, _, _ in c.state["pids"]]
    netns, links = list(c.state["netns"]), list(c.state["links"])
    assert len(pids) == 4 and len(netns) == 2
    assert {"node1", "node2", c.head_name} <= set(hosts_names())
    c.stop()
    assert leftovers(c, pids, netns, links) == []
    assert c.head_name not in hosts_names()
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
    r = subprocess.run([PY, script, "start", "--nodes", "a1,b2", "--gres", "a1=2", "--dir", d],
                       capture_output=True, text=True, timeout=60)
    try:
        assert r.returncode == 0, r.stderr
        assert f"export SLURM_CONF={d}/slurm.conf" in r.stdout
        with open(os.path.join(d, "harness.json")) as f:
            head = json.load(f)["head_name"]
        assert f"head: {head}=" in r.stdout
        s = subprocess.run(["bash", "-c", r.stdout + "\nsinfo -h -N -o '%N %t %G'"],
                           capture_output=True, text=True, timeout=30)
        assert s.stdout.split("\n")[:-1] == ["a1 idle gpu:2", "b2 idle (null)"], s.stderr
    finally:
        st = subprocess.run([PY, script, "stop", "--dir", d], capture_output=True, text=True,
                            timeout=60)
    assert st.returncode == 0, st.stderr
    assert not os.path.exists(os.path.join(d, "harness.json"))
    assert "a1" not in subprocess.run(["ip", "netns", "list"], capture_output=True,
                                      text=True).stdout
    assert head not in hosts_names()


@pytest.mark.parametrize("argv, says", [
    (["--gres", "node1"], "expected NODE=COUNT"),
    (["--gres", "node3=2"], "gres names unknown nodes: ['node3']"),
    (["--gres", "node1=0"], "expected 1-64 GPUs"),
    (["--gpus", "node1=x"], "expected NODE=COUNT"),
])
def test_command_line_bad_gpu_counts(tmp_path: "os.PathLike[str]", argv, says) -> None:
    script = os.path.join(os.path.dirname(__file__), "slurm_cluster.py")
    r = subprocess.run([PY, script, "start", "--nodes", "node1", "--dir", str(tmp_path), *argv],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 2 and says in r.stderr, (r.returncode, r.stderr)
    assert not os.path.exists(os.path.join(tmp_path, "harness.json"))


def test_remove_hosts_lines_whole_marker(tmp_path, monkeypatch) -> None:
    """Cluster 1's marker ('... 7-1') is a prefix of cluster 10's: only its own lines go."""
    hosts = tmp_path / "hosts"
    hosts.write_text("127.0.0.1 localhost\n10.0.0.2\tnode1\t# mpir-harness 7-1\n"
                     "10.0.1.2\tnode1\t# mpir-harness 7-10\n")
    monkeypatch.setattr(host_network, "HOSTS", str(hosts))
    host_network.remove_hosts_lines("# mpir-harness 7-1")
    assert hosts.read_text() == "127.0.0.1 localhost\n10.0.1.2\tnode1\t# mpir-harness 7-10\n"


# ----------------------------------------------------------------- GRES: Slurm binds GPUs
GRES = {"node1": 4, "node2": 2}
#: Slurm's variables of a task's GPUs, in the order GRES_ROWS lists them
GPU_VARS = ("CUDA_VISIBLE_DEVICES", "SLURMD_TRES_BIND", "SLURM_STEP_GPUS", "SLURM_GPUS_ON_NODE",
            "SLURM_NTASKS_PER_TRES")
#: one line per task: rank|host|value of each GPU_VARS ('~' where unset)
SHOW_GPU_VARS = "echo \"$SLURM_PROCID|$SLURMD_NODENAME" + "".join(
    f"|${{{v}-~}}" for v in GPU_VARS) + '"'
Task = Tuple[str, Optional[str], Optional[str], Optional[str], Optional[str], Optional[str]]


@pytest.fixture(scope="module")
def gres_cluster() -> Iterator[SlurmCluster]:
    with SlurmCluster(["node1", "node2"], gres=GRES) as c:
        yield c


def gpu_vars(c: SlurmCluster, options: str) -> Dict[int, Task]:
    """Runs one task per rank under srun OPTIONS; returns {rank: (host, *GPU_VARS)}."""
    r = c.run(["srun", *options.split(), "sh", "-c", SHOW_GPU_VARS], timeout=30)
    assert r.returncode == 0, f"srun {options}: {r.stderr}"
    rows = [line.split("|") for line in r.stdout.splitlines()]
    return {int(row[0]): tuple(None if v == "~" else v for v in row[1:]) for row in rows}


#: what Slurm 22.05 gives each task on this harness (measured): rank: (host, CUDA_VISIBLE_DEVICES,
#: SLURMD_TRES_BIND, SLURM_STEP_GPUS, SLURM_GPUS_ON_NODE, SLURM_NTASKS_PER_TRES); None = unset
GRES_ROWS: Dict[str, Dict[int, Task]] = {
    "-w node1 -n4 --gpus-per-task=1": {
        i: ("node1", str(i), "gpu:per_task:1", str(i), "4", None) for i in range(4)},
    "-w node1 -n2 --gpus-per-task=2": {
        0: ("node1", "0,1", "gpu:per_task:2", "0,1", "4", None),
        1: ("node1", "2,3", "gpu:per_task:2", "2,3", "4", None)},
    "-w node1 -n4 --gpus-per-node=4": {
        i: ("node1", "0,1,2,3", None, "0,1,2,3", "4", None) for i in range(4)},
    "-w node1 -n4 --gpus=4 --gpu-bind=single:1": {
        i: ("node1", str(i), "gpu:single:1", str(i), "4", None) for i in range(4)},
    "-w node1 -n4 --ntasks-per-gpu=2 --gpus=2": {
        i: ("node1", str(i // 2), "gpu:single:2", str(i // 2), "2", "2") for i in range(4)},
    "-w node1 -n4 --gpus-per-task=1 --gpu-bind=none": {
        i: ("node1", None, "gpu:none", None, "4", None) for i in range(4)},
    "-w node1 -n2 --gpus-per-node=4 --gpu-bind=map_gpu:3,1": {
        0: ("node1", "3", "gpu:map_gpu:3,1", "3", "4", None),
        1: ("node1", "1", "gpu:map_gpu:3,1", "1", "4", None)},
    "-w node1 -n4": {i: ("node1", None, None, None, None, None) for i in range(4)},
    # two nodes: a node with one task of the step gets no SLURMD_TRES_BIND
    "-w node1,node2 -n4 --gpus-per-task=1": {
        0: ("node1", "0", "gpu:per_task:1", "0", "3", None),
        1: ("node1", "1", "gpu:per_task:1", "1", "3", None),
        2: ("node1", "2", "gpu:per_task:1", "2", "3", None),
        3: ("node2", "0", None, "0", "1", None)},
    "-w node1,node2 -n4 --gpus=6": {
        **{i: ("node1", "0,1,2,3", None, "0,1,2,3", "4", None) for i in range(3)},
        3: ("node2", "0,1", None, "0,1", "2", None)},
}


def test_gres_cluster_config(gres_cluster: SlurmCluster) -> None:
    """gres.conf beside slurm.conf; Slurm reports the GRES per node."""
    c = gres_cluster
    with open(os.path.join(c.workdir, "gres.conf")) as f:
        assert f.read() == ("AutoDetect=off\nNodeName=node1 Name=gpu File=/dev/tty[0-3]\n"
                            "NodeName=node2 Name=gpu File=/dev/tty[0-1]\n")
    r = c.run(["sinfo", "-h", "-N", "-o", "%N %t %G"], timeout=10)
    assert r.stdout.splitlines() == ["node1 idle gpu:4", "node2 idle gpu:2"], r.stderr


@pytest.mark.parametrize("options", list(GRES_ROWS))
def test_gres_binding(gres_cluster: SlurmCluster, options: str) -> None:
    """Slurm allocates and binds the GRES GPUs itself, as measured."""
    got = gpu_vars(gres_cluster, options)
    expected = GRES_ROWS[options]
    assert got == expected, (f"srun {options}: (host, {', '.join(GPU_VARS)}) per rank\n"
                             f"got      {got}\nexpected {expected}")


def test_gres_and_fake_nvidia_smi_together() -> None:
    """gres and gpus side by side: Slurm binds GRES GPUs, nvidia-smi answers for its node."""
    with SlurmCluster(["node1"], gres={"node1": 2}, gpus={"node1": 2}) as c:
        c.reset_nvidia_smi_calls()
        r = c.run(["srun", "-n2", "--gpus-per-task=1", "sh", "-c",
                   "echo $SLURM_PROCID $CUDA_VISIBLE_DEVICES $(nvidia-smi -L | wc -l)"],
                  timeout=30)
        assert sorted(r.stdout.splitlines()) == ["0 0 2", "1 1 2"], r.stderr
        assert c.nvidia_smi_calls("node1") == 2


def test_gres_bad_arguments() -> None:
    with pytest.raises(ValueError, match="gres names unknown nodes"):
        SlurmCluster(["node1"], gres={"node2": 1})
    with pytest.raises(ValueError, match="expected 1-64 GPUs"):
        SlurmCluster(["node1"], gres={"node1": 0})


# ----------------------------------------------------------------- the head's name
def test_head_name_resolves_everywhere(gres_cluster: SlurmCluster) -> None:
    """head_name is the bridge address in the host namespace, on every node and in a task,
    and a node reaches a server on the head by that name."""
    c = gres_cluster
    assert re.fullmatch(r"mpirhead[0-9a-f]+x[0-9a-f]+", c.head_name), c.head_name
    with open(os.path.join(c.workdir, "harness.json")) as f:
        assert json.load(f)["head_name"] == c.head_name
    assert socket.gethostbyname(c.head_name) == c.bridge_addr
    for node in c.node_names:
        r = subprocess.run(c.on_node(node) + ["getent", "hosts", c.head_name], env=c.env,
                           capture_output=True, text=True, timeout=10)
        assert r.stdout.split() == [c.bridge_addr, c.head_name], (node, r.stdout, r.stderr)
    r = c.run(["srun", "-w", "node2", "-n1", "getent", "hosts", c.head_name], timeout=30)
    assert r.stdout.split() == [c.bridge_addr, c.head_name], r.stderr
    with socket.create_server((c.bridge_addr, 0)) as srv:
        client = (f"import socket; s = socket.create_connection(({c.head_name!r}, "
                  f"{srv.getsockname()[1]}), timeout=5); s.sendall(socket.gethostname().encode())")
        p = subprocess.Popen(c.on_node("node1") + [PY, "-c", client], env=c.env)
        srv.settimeout(10)
        conn, _ = srv.accept()
        with conn:
            assert conn.recv(64) == b"node1"
        assert p.wait(10) == 0


def test_head_names_unique() -> None:
    a, b = SlurmCluster(["node1"]), SlurmCluster(["node1"])
    try:
        assert a.head_name != b.head_name
    finally:
        a.stop()
        b.stop()


@pytest.mark.parametrize("kill_wait, expected", [(0, 10), (5, 10), (6, 16), (30, 40)])
def test_message_timeout_outlasts_kill_wait(kill_wait: int, expected: int) -> None:
    """Slurm's default where KillWait leaves 5 s of it; else KillWait + 10 s (a node answers
    srun --kill-on-bad-exit's signal after KillWait: tests/cluster/test_stale_signal.py)."""
    assert slurm_cluster.message_timeout(kill_wait) == expected
