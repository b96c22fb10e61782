"""A throw-away Slurm cluster on this machine, one network namespace per node (test harness).

Stdlib only; needs root and Debian's slurm-wlm, munge, openmpi-bin and iproute2. Each node is
a network namespace joined to a private bridge, running its own slurmd under
``unshare --uts --mount`` with its own hostname, spool, /etc/hosts, fake-GPU bin directory and
/dev/shm. The own /dev/shm matters: MPI libraries name their shared memory after the job and
step ids (MPICH: /dev/shm/mpich_shm_<hash of "job.step">_<node index>), which every throw-away
cluster numbers from 1, so two clusters on one machine would otherwise share, and garble, the
memory of their jobs; and MPI libraries that mistake which ranks share a node (Intel MPI's own
PMI-1 client) fail here as they would on real nodes.

Two kinds of pretend GPUs, usable together:

- ``gpus={"node1": 4}``: a fake ``nvidia-smi`` on that node's PATH (Slurm knows nothing of it;
  it counts its calls, see ``nvidia_smi_calls``).
- ``gres={"node1": 4}``: real Slurm GRES. slurm.conf gets ``GresTypes=gpu`` and ``Gres=gpu:4``
  on the node's line; gres.conf (beside slurm.conf, where Slurm looks for it) says
  ``AutoDetect=off`` and ``NodeName=node1 Name=gpu File=/dev/tty[0-3]``: existing device files
  (Slurm 22.05 numbers the GPUs by their position in File, not by the file names: tty[4-7]
  also gives 0-3). Slurm then allocates GPUs to jobs and binds them to tasks itself
  (CUDA_VISIBLE_DEVICES, SLURM_STEP_GPUS, SLURMD_TRES_BIND, SLURM_GPUS_ON_NODE, ...), and
  each srun step still starts in about 0.15 s.

The head (the host namespace: slurmctld and the client commands, on the bridge address) has a
host name of its own, ``head_name`` (``mpirhead<unique>``), in /etc/hosts and in every node's
hosts file: what a node uses to reach back to a launcher on the head (MPICH's
``mpiexec -localhost NAME``).

Command line (for shell demos)::

    python slurm_cluster.py start --nodes node1,node2 --dir DIR   # prints export lines
    python slurm_cluster.py start --gres node1=4,node2=2 --dir DIR
    python slurm_cluster.py stop --dir DIR
"""
from __future__ import annotations

import argparse
import atexit
import contextlib
import itertools
import json
import os
import random
import re
import shlex
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from typing import Any, Mapping, Sequence

if not __package__:  # run as a script: python tests/harness/slurm_cluster.py start|stop
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__)))))
from tests.harness import diagnose, host_network, slurm_files  # noqa: E402
from tests.harness.slurm_files import message_timeout  # noqa: E402
from tests.harness.processes import (GARBLED, ClusterError, Output, PmiGarbled,  # noqa: E402
                                     alive, kill_all, sh, starttime, stop_group)

__all__ = ["SlurmCluster", "ClusterError", "PmiGarbled", "GARBLED", "stop_group",
           "message_timeout"]

STATE_FILE = "harness.json"
PORT_RANGE = (20000, 32000)  # below the kernel's ephemeral range (32768-60999)
_STRIP_PREFIXES = ("SLURM_", "SLURMD_", "PMI_", "PMIX_", "OMPI_", "PRTE_")
_instances = itertools.count()


class SlurmCluster:
    """A throw-away Slurm cluster on this machine: munged, slurmctld, and one slurmd per node."""

    def __init__(self, nodes: Sequence[str] = ("node1", "node2"), *, cpus_per_node: int = 8,
                 workdir: str | None = None, gpus: Mapping[str, int] | None = None,
                 gres: Mapping[str, int] | None = None, port: int | None = None,
                 private_shm: bool = True, kill_wait: int = 5,
                 slurmd_timeout: int | None = None, memory_mb: int | None = None) -> None:
        """Describe the cluster; nothing runs until start().

        Args:
            nodes: node names, in Slurm's node order (also the hostnames).
            cpus_per_node: CPUs declared per node (more than the real ones is fine).
            workdir: directory for all state (kept after stop); default a temp dir (removed).
            gpus: fake GPU count per node name; nodes not named get no nvidia-smi.
            gres: Slurm GRES GPU count per node name (1-64): Slurm allocates and binds them
                (device files /dev/tty0..N-1); nodes not named have no GRES.
            port: slurmctld port (slurmd uses port+1); default a free one in 20000-32000.
            private_shm: give each node a /dev/shm of its own (a tmpfs, gone with the node),
                as on real nodes. False shares the machine's (only to measure what that does:
                scripts/mpich_pmi2_loop.py --shared-dev-shm).
            kill_wait: Slurm's KillWait, the seconds between SIGTERM and SIGKILL when a job
                ends (5: quick for tests; Slurm's default, which long jobs save within, 30).
            slurmd_timeout: Slurm's SlurmdTimeout, the seconds without an answer from a
                node's slurmd before slurmctld sets the node DOWN (None: not written,
                Slurm's default 300).
            memory_mb: each node's memory (RealMemory), which Slurm then allocates and
                enforces with cgroup v1 (task/cgroup, ConstrainRAMSpace: a task over its
                job's --mem is killed by the kernel's OOM killer, and srun says "Out Of
                Memory"); None: memory neither counted nor enforced.
        """
        if not nodes or len(set(nodes)) != len(nodes):
            raise ValueError(f"nodes must be distinct and non-empty: {list(nodes)}")
        for n in nodes:
            if not re.fullmatch(r"[A-Za-z][A-Za-z0-9-]{0,40}", n):
                raise ValueError(f"bad node name {n!r}")
        for what, counts in (("gpus", gpus), ("gres", gres)):
            if counts and set(counts) - set(nodes):
                unknown = sorted(set(counts) - set(nodes))
                raise ValueError(f"{what} names unknown nodes: {unknown}")
        for n, count in (gres or {}).items():
            if not (isinstance(count, int) and 1 <= count <= 64):
                raise ValueError(f"gres: {n}={count!r}: expected 1-64 GPUs")
        self.node_names: list[str] = list(nodes)
        self.private_shm = private_shm
        self.kill_wait = kill_wait
        self.slurmd_timeout = slurmd_timeout
        self.memory_mb = memory_mb
        self.cpus_per_node = cpus_per_node
        self.gpus: dict[str, int] = dict(gpus or {})
        self.gres: dict[str, int] = dict(gres or {})
        self._port = port
        self._owns_workdir = workdir is None
        self.workdir = (os.path.abspath(workdir) if workdir
                        else tempfile.mkdtemp(prefix="mpir-slurm-"))
        k = next(_instances)
        self.tag = f"{os.getpid()}-{k}"
        self._ifbase = f"m{os.getpid():x}x{k:x}"  # interface names: at most 15 characters
        #: the head's host name (its bridge address) in /etc/hosts and every node's hosts file
        self.head_name = f"mpirhead{os.getpid():x}x{k:x}"
        self.state: dict[str, Any] = {"workdir": self.workdir, "owns_workdir": self._owns_workdir,
                                      "pids": [], "netns": [], "links": [], "hosts_marker": None,
                                      "head_name": self.head_name, "gpus": self.gpus,
                                      "gres": self.gres}
        self.env: dict[str, str] = {}
        self.rsh_agent = os.path.join(self.workdir, "rsh-agent")
        self._addr: dict[str, str] = {}
        self._slurmd_pid: dict[str, int] = {}
        atexit.register(self.stop)  # safety net, also removes an unused temp dir

    # ----------------------------------------------------------------- paths and state
    def _p(self, *parts: str) -> str:
        return os.path.join(self.workdir, *parts)

    def _save(self) -> None:
        self.state.update(nodes=self.node_names, addr=self._addr, slurmd_pid=self._slurmd_pid,
                          env=self.env)
        tmp = self._p(STATE_FILE + ".tmp")
        with open(tmp, "w") as f:
            json.dump(self.state, f, indent=1)
        os.replace(tmp, self._p(STATE_FILE))

    def _spawn(self, name: str, args: Sequence[str]) -> int:
        """Start a daemon in its own session, output to log/NAME.out; remember its PID."""
        with open(self._p("log", f"{name}.out"), "ab") as out:
            p = subprocess.Popen(list(args), stdin=subprocess.DEVNULL, stdout=out, stderr=out,
                                 env=self._daemon_env(), start_new_session=True)
        self.state["pids"].append([p.pid, starttime(p.pid), name])
        self._save()
        return p.pid

    @staticmethod
    def _daemon_env() -> dict[str, str]:
        return {k: v for k, v in os.environ.items() if not k.startswith(_STRIP_PREFIXES)}

    # ----------------------------------------------------------------- public helpers
    def address(self, node: str) -> str:
        """The node's IP address on the bridge."""
        return self._addr[node]

    def on_node(self, node: str) -> list[str]:
        """argv prefix that runs a command on node (its network, UTS and mount namespaces).

        The command keeps the caller's working directory and environment.
        """
        return ["nsenter", "-t", str(self._slurmd_pid[node]), "-n", "-u", "-m", "--wd=.", "--"]

    def hostfile(self, slots: int) -> str:
        """Write an Open MPI hostfile listing every node with slots=N; return its path."""
        path = self._p(f"hostfile.{slots}")
        with open(path, "w") as f:
            f.writelines(f"{n} slots={slots}\n" for n in self.node_names)
        return path

    def nvidia_smi_calls(self, node: str) -> int:
        """How many times the fake nvidia-smi ran on node since the last reset."""
        try:
            with open(self._p(f"nvidia-smi-calls.{node}")) as f:
                return sum(1 for _ in f)
        except FileNotFoundError:
            return 0

    def reset_nvidia_smi_calls(self) -> None:
        """Zero the fake nvidia-smi call counters of all nodes."""
        for n in self.node_names:
            with contextlib.suppress(FileNotFoundError):
                os.remove(self._p(f"nvidia-smi-calls.{n}"))

    @property
    def stop_grace(self) -> float:
        """Seconds between SIGTERM and SIGKILL for a client command the tests stop: srun waits
        up to KillWait + 2 s for its step, then gives the job back; killed sooner, it leaves
        its job allocated for ever, and every later job waits for its nodes."""
        return self.kill_wait + 5.0

    def leftovers(self) -> list[str]:
        """Returns 'PID command line' of what this cluster still runs besides its daemons:
        anything in its nodes' namespaces (tasks, slurmstepd) and any process whose
        environment names its slurm.conf (clients that run() started, such as mpiexec on the
        head, and what they started). Another cluster's processes are never listed."""
        left = []
        for pid in sorted(self._own_pids()):
            with contextlib.suppress(OSError):  # gone meanwhile
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    cmdline = f.read().replace(b"\0", b" ").decode(errors="replace")
                left.append(f"{pid} {cmdline}")
        return left

    def _own_pids(self) -> set[int]:
        """Returns the PIDs leftovers() describes (not the daemons, not this process)."""
        daemons = {pid for pid, _, _ in self.state["pids"]}
        pids = set(host_network.namespace_pids(self.state["netns"]))
        mark = f"\0SLURM_CONF={self._p('slurm.conf')}\0".encode()
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                with contextlib.suppress(OSError):
                    with open(f"/proc/{entry}/environ", "rb") as f:
                        if mark in b"\0" + f.read():
                            pids.add(int(entry))
        return pids - daemons - {os.getpid()}

    def run(self, args: Sequence[str], *, timeout: float, env: Mapping[str, str] | None = None,
            input: str | None = None, cwd: str | None = None,
            check: bool = False) -> subprocess.CompletedProcess[str]:
        """Run a client command (srun, sbatch, mpirun, ...) in the host namespace with self.env
        (this process's environment without Slurm's, MPI's and CUDA_VISIBLE_DEVICES) + env.

        Text mode, stdout/stderr captured. The command's process group is stopped (SIGTERM,
        then SIGKILL after ``stop_grace``) when it runs longer than ``timeout``
        (subprocess.TimeoutExpired is raised, with the output so far and, at the end of its
        stderr, what this cluster's processes were doing then: diagnose.report), and at once
        when its stderr shows a line of GARBLED (PmiGarbled is raised): such a step can never
        finish.
        """
        full = {**self.env, **(env or {})}
        p = subprocess.Popen(list(args), env=full, cwd=cwd, text=True, start_new_session=True,
                             stdin=subprocess.PIPE if input is not None else subprocess.DEVNULL,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        output = Output(p)
        if p.stdin is not None:
            with contextlib.suppress(BrokenPipeError):
                p.stdin.write(input or "")
            p.stdin.close()
        deadline = time.monotonic() + timeout
        done = output.wait(deadline)
        if done:  # its pipes closed: it exits, or is stopped at the deadline
            with contextlib.suppress(subprocess.TimeoutExpired):
                p.wait(max(0.1, deadline - time.monotonic()))
            done = p.returncode is not None
        seen = ""
        if not done:
            seen = diagnose.report(self._own_pids() | {p.pid})
            stop_group(p, self.stop_grace)
        out, err = output.text()
        err += seen
        if output.garbled is not None:
            raise PmiGarbled(list(args), output.garbled, out, err)
        if not done:
            raise subprocess.TimeoutExpired(list(args), timeout, out, err)
        cp = subprocess.CompletedProcess(list(args), p.returncode, out, err)
        if check and p.returncode != 0:
            raise ClusterError(f"{shlex.join(args)} exited {p.returncode}:\n{out}\n{err}")
        return cp

    # ----------------------------------------------------------------- start
    def start(self, timeout: float = 30.0) -> "SlurmCluster":
        """Start munged, slurmctld and the slurmds; wait until sinfo shows all nodes idle."""
        if os.geteuid() != 0:
            raise ClusterError("SlurmCluster needs root (network namespaces, slurmd)")
        for tool in ("slurmctld", "slurmd", "munged", "mungekey", "ip", "nsenter", "unshare",
                     "sinfo"):
            if not shutil.which(tool, path=os.environ.get("PATH", "") + ":/usr/sbin:/sbin"):
                raise ClusterError(f"{tool} not found: install slurm-wlm munge iproute2 util-linux")
        if os.path.exists(self._p(STATE_FILE)):
            raise ClusterError(f"{self._p(STATE_FILE)} exists: a cluster may be running from "
                               f"there; stop it first")
        atexit.register(self.stop)
        try:
            self._start(timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def _start(self, timeout: float) -> None:
        t0 = time.monotonic()
        for d in ("log", "state", "spool", "gpubin", "munge"):
            os.makedirs(self._p(d), exist_ok=True)
        os.chmod(self._p("munge"), 0o700)
        port = self.state["port"] = self._pick_port()
        self._save()
        self._network()
        self._write_files(port)
        sh(["mungekey", "--create", "--force", "--keyfile", self._p("munge", "munge.key")])
        self._spawn("munged", ["munged", "--foreground", "--force",
                               "--socket", self._p("munge", "munge.socket"),
                               "--key-file", self._p("munge", "munge.key"),
                               "--pid-file", self._p("munge", "munged.pid"),
                               "--seed-file", self._p("munge", "munged.seed"),
                               "--log-file", self._p("log", "munged.log")])
        self._wait_for(lambda: os.path.exists(self._p("munge", "munge.socket")), 10,
                       "munged socket")
        conf = self._p("slurm.conf")
        self._spawn("slurmctld", ["slurmctld", "-D", "-i", "-f", conf])
        for n in self.node_names:
            ns, nd = self._netns(n), self._p("nodes", n)
            script = "\n".join([
                "set -e",
                f"hostname {n}",
                f"mount --bind {shlex.quote(nd)}/spool {shlex.quote(self._p('spool'))}",
                f"mount --bind {shlex.quote(nd)}/gpubin {shlex.quote(self._p('gpubin'))}",
                f"mount --bind {shlex.quote(nd)}/hosts /etc/hosts",
                *(["mount -t tmpfs -o mode=1777 mpir-shm /dev/shm"] if self.private_shm
                  else []),
                f"exec slurmd -D -N {n} -f {shlex.quote(conf)}",
            ])
            self._slurmd_pid[n] = self._spawn(f"slurmd.{n}", [
                "nsenter", f"--net=/run/netns/{ns}", "unshare", "--uts", "--mount",
                "--propagation", "private", "sh", "-c", script])
        self._write_rsh_agent()
        self._save()
        self._wait_idle(timeout - (time.monotonic() - t0))
        self.state["started_in_s"] = round(time.monotonic() - t0, 3)
        self._save()

    def _pick_port(self) -> int:
        if self._port is not None:
            if not host_network.port_free(self._port):
                raise ClusterError(f"port {self._port} (slurmctld) is in use")
            return self._port
        rng = random.Random()
        for _ in range(50):
            p = rng.randrange(*PORT_RANGE)
            if host_network.port_free(p) and host_network.port_free(p + 1):
                return p
        raise ClusterError(f"no free port pair in {PORT_RANGE}")

    def _netns(self, node: str) -> str:
        return f"mpir-{self.tag}-{node}"

    def _network(self) -> None:
        """Bridge with .1 in the host namespace; one namespace per node with eth0 = .2, .3, ...
        (host_network); the nodes' and the head's names in /etc/hosts and in each node's own
        hosts file (without other clusters' lines)."""
        bridge = f"{self._ifbase}br"
        with host_network.locked():
            net = host_network.free_subnet()
            self.subnet = f"{net}.0/24"
            self.bridge_addr = f"{net}.1"
            self.state.update(subnet=self.subnet, bridge_addr=self.bridge_addr)
            self.state["links"].append(bridge)
            self._save()
            host_network.add_bridge(bridge, net)
        for i, n in enumerate(self.node_names):
            ns, veth = self._netns(n), f"{self._ifbase}v{i}"
            self._addr[n] = f"{net}.{i + 2}"
            self.state["netns"].append(ns)
            self.state["links"].append(veth)
            self._save()
            host_network.add_node(ns, veth, bridge, self._addr[n])
        marker = f"# mpir-harness {self.tag}"
        # nodeN-alias: a second name per node, as a site's high-speed network has (--address)
        entries = "".join(f"{self._addr[n]}\t{n} {n}-alias\t{marker}\n"
                          for n in self.node_names)
        entries += f"{self.bridge_addr}\t{self.head_name}\t{marker}\n"
        with host_network.locked():
            self.state["hosts_marker"] = marker
            self._save()
            old = host_network.add_hosts_lines(entries)
        for n in self.node_names:  # a private copy per node, ours first
            os.makedirs(self._p("nodes", n, "spool", "pmix"), exist_ok=True)
            os.makedirs(self._p("nodes", n, "gpubin"), exist_ok=True)
            with open(self._p("nodes", n, "hosts"), "w") as f:
                f.write(entries + "".join(line for line in old.splitlines(True)
                                          if "# mpir-harness" not in line))  # no other cluster's

    def _write_files(self, port: int) -> None:
        """slurm.conf, mpi.conf, cgroup.conf, plugstack.conf, gres.conf and the fake nvidia-smi
        (slurm_files); the clients' environment."""
        files = slurm_files.config_files(
            self.workdir, gres=self.gres, memory=self.memory_mb is not None,
            slurm_conf=slurm_files.slurm_conf(
                self.workdir, name=f"mpir{self.tag.replace('-', 'x')}",
                controller=(socket.gethostname().split(".")[0], self.bridge_addr), port=port,
                nodes=[(n, self._addr[n]) for n in self.node_names],
                cpus_per_node=self.cpus_per_node, gres=self.gres, kill_wait=self.kill_wait,
                slurmd_timeout=self.slurmd_timeout, memory_mb=self.memory_mb))
        for name, text in files.items():
            with open(self._p(name), "w") as f:
                f.write(text)
        for i, n in enumerate(self.node_names):
            if n in self.gpus:
                path = self._p("nodes", n, "gpubin", "nvidia-smi")
                with open(path, "w") as f:
                    f.write(slurm_files.fake_nvidia_smi(n, i, self.gpus[n],
                                                        self._p(f"nvidia-smi-calls.{n}")))
                os.chmod(path, 0o755)
        self.env = slurm_files.client_env(self._daemon_env(), self.workdir, self.subnet,
                                          self.rsh_agent)

    def _write_rsh_agent(self) -> None:
        """An ssh stand-in: `agent [ssh options] HOST command...` runs command on HOST."""
        with open(self.rsh_agent, "w") as f:
            f.write(slurm_files.rsh_agent(self.tag, {n: (self._addr[n], self._slurmd_pid[n])
                                                     for n in self.node_names}))
        os.chmod(self.rsh_agent, 0o755)

    @staticmethod
    def _wait_for(cond: Any, timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while not cond():
            if time.monotonic() > deadline:
                raise ClusterError(f"timed out after {timeout:.0f} s waiting for {what}")
            time.sleep(0.02)

    def _wait_idle(self, timeout: float) -> None:
        """Poll sinfo until every node is idle; on timeout raise with the logs' tails."""
        deadline = time.monotonic() + max(timeout, 1.0)
        states: dict[str, str] = {}
        while time.monotonic() < deadline:  # sinfo sleeps 1 s if slurmctld is not listening yet
            with contextlib.suppress(OSError), socket.create_connection(
                    (self.bridge_addr, self.state["port"]), timeout=0.2):
                break
            time.sleep(0.01)
        while time.monotonic() < deadline:
            for pid, _, name in self.state["pids"]:
                if not alive(pid):
                    raise ClusterError(f"{name} exited during start-up\n{self._log_tails()}")
            try:
                out = self.run(["sinfo", "-h", "-N", "-o", "%N %t"], timeout=5).stdout
            except subprocess.TimeoutExpired:
                out = ""
            states = dict(line.split() for line in out.splitlines() if len(line.split()) == 2)
            if all(states.get(n) == "idle" for n in self.node_names):
                return
            time.sleep(0.05)
        raise ClusterError(f"nodes not idle after {timeout:.0f} s: {states}\n{self._log_tails()}")

    def _log_tails(self, lines: int = 15) -> str:
        out = []
        for name in sorted(os.listdir(self._p("log"))):
            with open(self._p("log", name), errors="replace") as f:
                tail = f.readlines()[-lines:]
            out.append(f"--- {name}\n{''.join(tail)}")
        return "\n".join(out)

    # ----------------------------------------------------------------- stop
    def stop(self) -> None:
        """Stop everything start() started; idempotent and safe after a failed start."""
        atexit.unregister(self.stop)
        _stop_state(self.state)
        self._slurmd_pid.clear()

    def __enter__(self) -> "SlurmCluster":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _stop_state(state: dict[str, Any]) -> None:
    """Undo what a state record lists: processes, namespaces, links, hosts lines, temp dir."""
    pids = [pid for pid, st, _ in state.get("pids", []) if st is not None and starttime(pid) == st]
    # everything still running inside our namespaces
    pids += [p for p in host_network.namespace_pids(state.get("netns", [])) if p not in pids]
    kill_all(pids[::-1])
    host_network.remove(state.get("netns", []), state.get("links", []),
                        state.get("hosts_marker"))
    state["pids"], state["netns"], state["links"], state["hosts_marker"] = [], [], [], None
    wd = state.get("workdir")
    if wd and os.path.isdir(wd):
        if state.get("owns_workdir"):
            shutil.rmtree(wd, ignore_errors=True)
        else:
            with contextlib.suppress(FileNotFoundError):
                os.remove(os.path.join(wd, STATE_FILE))


def _counts(text: str, option: str) -> dict[str, int]:
    """Parse 'node1=4,node2=2' into {'node1': 4, 'node2': 2}."""
    out = {}
    for item in filter(None, text.split(",")):
        name, sep, count = item.partition("=")
        if not sep or not count.strip().isdigit():
            raise ValueError(f"{option}: expected NODE=COUNT[,NODE=COUNT...], got {text!r}")
        out[name.strip()] = int(count)
    return out


def _main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    st = sub.add_parser("start", help="start a cluster and print export lines for its clients")
    st.add_argument("--nodes", default="node1,node2")
    st.add_argument("--dir", required=True)
    st.add_argument("--cpus-per-node", type=int, default=8)
    st.add_argument("--gpus", default="", help="fake nvidia-smi GPUs, e.g. node1=2,node2=4")
    st.add_argument("--gres", default="", help="Slurm GRES GPUs, e.g. node1=4,node2=2")
    st.add_argument("--timeout", type=float, default=30.0)
    sp = sub.add_parser("stop", help="stop the cluster started with --dir DIR")
    sp.add_argument("--dir", required=True)
    a = ap.parse_args(argv)
    if a.cmd == "stop":
        path = os.path.join(a.dir, STATE_FILE)
        if not os.path.exists(path):
            print(f"no cluster state in {path}", file=sys.stderr)
            return 1
        with open(path) as f:
            _stop_state(json.load(f))
        return 0
    os.makedirs(a.dir, exist_ok=True)
    try:
        gpus, gres = _counts(a.gpus, "--gpus"), _counts(a.gres, "--gres")
        c = SlurmCluster(a.nodes.split(","), cpus_per_node=a.cpus_per_node, workdir=a.dir,
                         gpus=gpus, gres=gres)
    except ValueError as e:
        print(e, file=sys.stderr)
        return 2
    try:
        c.start(a.timeout)
    except ClusterError as e:
        print(e, file=sys.stderr)
        return 1
    atexit.unregister(c.stop)  # leave it running for the shell
    for k in sorted(set(os.environ) - set(c.env)):
        print(f"unset {k}")
    for k, v in sorted(c.env.items()):
        if os.environ.get(k) != v:
            print(f"export {k}={shlex.quote(v)}")
    print(f"export MPIR_HARNESS_DIR={shlex.quote(c.workdir)}")
    print(f"# nodes: {' '.join(f'{n}={c.address(n)}' for n in c.node_names)}; "
          f"head: {c.head_name}={c.bridge_addr}; "
          f"started in {c.state['started_in_s']} s; "
          f"stop: {sys.executable} {__file__} stop --dir {a.dir}")
    return 0


if __name__ == "__main__":
    sys.exit(_main())
