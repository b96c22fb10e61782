"""The throw-away cluster's files (test harness): slurm.conf and the files beside it, a node's
fake nvidia-smi, the ssh stand-in for mpirun, and the clients' environment (pure text and
dictionaries; slurm_cluster.py writes them)."""
from __future__ import annotations

import shlex
from typing import Mapping, Optional, Sequence, Tuple

#: Variables of the machine's proxies, left out of the clients' environment.
_PROXIES = ("grpc_proxy", "https_proxy", "http_proxy", "no_grpc_proxy", "no_proxy")


def message_timeout(kill_wait: int) -> int:
    """Returns the MessageTimeout for a cluster of this KillWait: Slurm's default, 10 s, where
    KillWait leaves 5 s of it (KillWait <= 5), else KillWait + 10 s.

    srun --kill-on-bad-exit has its step signalled with SIG_TERM_KILL, and each node's
    slurmstepd answers that RPC only after SIGTERM, KillWait seconds and SIGKILL. Past
    MessageTimeout slurmctld counts the node as not answering and resends the signal 60 s
    later (RPC_RETRY_INTERVAL) to the step of that number, which, in a requeued job started
    early (`scontrol update StartTime=now`, as the tests do), is the new run's: its task is
    killed by SIGTERM about 70 s after the last run's bad exit (three suite runs lost a long
    job so; traced: the new run's slurmstepd sent it; tests/cluster/test_stale_signal.py).
    Slurm's own hold of a requeued job (121 s) outlasts it. Clusters of KillWait <= 5 keep
    Slurm's default (their lost-node and hang timings were measured with it; 5 s is margin
    enough for a stepd that answers right after its SIGKILL); the 10 s of margin above is
    for KillWait's own slack under load.
    """
    return 10 if kill_wait <= 5 else kill_wait + 10


def slurm_conf(w: str, *, name: str, controller: Tuple[str, str], port: int,
               nodes: Sequence[Tuple[str, str]], cpus_per_node: int, gres: Mapping[str, int],
               kill_wait: int, slurmd_timeout: Optional[int],
               memory_mb: Optional[int] = None) -> str:
    """Returns slurm.conf of a cluster whose files are in ``w``: ``controller`` is (host name,
    address), ``nodes`` (name, address) in Slurm's order, slurmd on ``port`` + 1; with
    ``memory_mb`` each node's memory, allocated and enforced by task/cgroup."""
    memory = "" if memory_mb is None else f" RealMemory={memory_mb}"
    lines = "\n".join(f"NodeName={n} NodeHostname={n} NodeAddr={addr} CPUs={cpus_per_node}"
                      + memory + (f" Gres=gpu:{gres[n]}" if n in gres else "")
                      + " State=UNKNOWN" for n, addr in nodes)
    task, select = ("task/none", "CR_CPU") if memory_mb is None else ("task/cgroup",
                                                                       "CR_CPU_Memory")
    timeout = "" if slurmd_timeout is None else f"SlurmdTimeout={slurmd_timeout}\n"
    return f"""\
ClusterName={name}
SlurmctldHost={controller[0]}({controller[1]})
SlurmUser=root
SlurmdUser=root
SlurmctldPort={port}
SlurmdPort={port + 1}
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={w}/munge/munge.socket
StateSaveLocation={w}/state
SlurmdSpoolDir={w}/spool
SlurmctldPidFile={w}/state/slurmctld.pid
SlurmdPidFile={w}/spool/slurmd.pid
SlurmctldLogFile={w}/log/slurmctld.log
SlurmdLogFile={w}/log/slurmd.%n.log
SlurmctldDebug=info
SlurmdDebug=info
PlugStackConfig={w}/plugstack.conf
ProctrackType=proctrack/linuxproc
TaskPlugin={task}
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/filetxt
JobCompLoc={w}/log/jobcomp.txt
SelectType=select/cons_tres
SelectTypeParameters={select}
SlurmdParameters=config_overrides
SwitchType=switch/none
MpiDefault=none
ReturnToService=2
InactiveLimit=0
KillWait={kill_wait}
MessageTimeout={message_timeout(kill_wait)}
{timeout}MinJobAge=60
MailProg=/bin/true
{"GresTypes=gpu" if gres else "# no GresTypes: no GRES"}
{lines}
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
"""


def config_files(w: str, *, gres: Mapping[str, int], slurm_conf: str,
                 memory: bool = False) -> dict[str, str]:
    """Returns {file name: text} of slurm.conf and the files beside it, where Slurm looks for
    them (slurm.conf's directory: -f / SLURM_CONF). GRES GPUs are existing device files
    (/dev/tty0..N-1): Slurm 22.05 numbers them by their position in File. ``memory``: the
    job's memory enforced (cgroup v1, as this machine mounts it; no swap beyond it)."""
    cgroup = ("CgroupPlugin=cgroup/v1\nIgnoreSystemd=yes\nConstrainRAMSpace=yes\n"
              "ConstrainSwapSpace=yes\nAllowedSwapSpace=0\n" if memory else
              "CgroupPlugin=autodetect\nIgnoreSystemd=yes\n")
    return {
        "slurm.conf": slurm_conf,
        "mpi.conf": f"PMIxCliTmpDirBase={w}/spool/pmix\nPMIxEnv=PMIX_SECURITY_MODE=native\n",
        "cgroup.conf": cgroup,
        "plugstack.conf": "",
        "gres.conf": "AutoDetect=off\n" + "".join(
            f"NodeName={n} Name=gpu File=/dev/tty[0-{k - 1}]\n" if k > 1 else
            f"NodeName={n} Name=gpu File=/dev/tty0\n" for n, k in gres.items()),
    }


def fake_nvidia_smi(node: str, index: int, count: int, calls: str) -> str:
    """Returns the script of node number ``index``'s fake nvidia-smi: ``count`` GPUs (UUIDs
    unique over the nodes), each call noted in the file ``calls``."""
    uuids = " ".join(f"GPU-{index:08x}-0000-0000-0000-{g:012x}" for g in range(count))
    return f"""#!/bin/sh
# fake nvidia-smi of {node}: {count} GPUs
echo "$$ $*" >> {shlex.quote(calls)}
i=0
for u in {uuids}; do
  case "$*" in
    *--query-gpu*) echo "$i, $u" ;;
    *) echo "GPU $i: Fake GPU (UUID: $u)" ;;
  esac
  i=$((i + 1))
done
"""


def rsh_agent(tag: str, nodes: Mapping[str, Tuple[str, int]]) -> str:
    """Returns the ssh stand-in's script: `agent [ssh options] HOST command...` runs command
    on HOST (a node's name or address: ``nodes`` maps a name to (address, its slurmd's PID),
    whose namespaces the command enters)."""
    cases = "\n".join(f"  {n}|{addr}) pid={pid} ;;" for n, (addr, pid) in nodes.items())
    return f"""#!/bin/sh
# ssh stand-in for the throw-away Slurm cluster {tag}
while [ $# -gt 0 ]; do
  case "$1" in
    -[bcDEeFIiJLlmOopQRSWw]) shift 2 ;;
    -*) shift ;;
    *) break ;;
  esac
done
host=${{1#*@}}
shift
case "$host" in
{cases}
  *) echo "rsh-agent: unknown host $host" >&2; exit 255 ;;
esac
exec nsenter -t "$pid" -n -u -m -- sh -c "$*"
"""


def client_env(daemon_env: Mapping[str, str], w: str, subnet: str,
               agent: str) -> dict[str, str]:
    """Returns the clients' environment (srun, sbatch, mpirun): the daemons' (no Slurm, MPI
    or CUDA_VISIBLE_DEVICES: a task sees the GPUs the cluster gives it), without the machine's
    proxies (the nodes' bridge is private: a proxy, as CI's, would capture the workers' gRPC
    traffic and hang them; tests that want one pass it; mpi_resolver.network.proxies' names,
    repeated as this harness runs without the package), with this cluster's slurm.conf, the
    fake nvidia-smi first on PATH, and Open MPI kept to the bridge and the ssh stand-in."""
    env = {k: v for k, v in daemon_env.items()
           if k != "CUDA_VISIBLE_DEVICES" and k.lower() not in _PROXIES}
    env.update({
        "SLURM_CONF": f"{w}/slurm.conf",
        "PATH": f"{w}/gpubin:{env.get('PATH', '/usr/bin:/bin')}",
        "OMPI_ALLOW_RUN_AS_ROOT": "1",
        "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
        "OMPI_MCA_rmaps_base_oversubscribe": "1",
        "OMPI_MCA_hwloc_base_binding_policy": "none",
        "OMPI_MCA_btl_tcp_if_include": subnet,
        "OMPI_MCA_oob_tcp_if_include": subnet,
        "OMPI_MCA_plm_rsh_agent": agent,
        "OMPI_MCA_plm_rsh_no_tree_spawn": "1",
    })
    return env
