"""Parity cases: TensorFlow's own SlurmClusterResolver test cases and seeded generated ones.

A case is the Slurm step variables one rank sees plus the resolver's arguments. ``observe``
runs a resolver class on a case and returns everything the parity promise covers.
"""

from __future__ import annotations

import os
import random
import sys
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional
from unittest import mock

# TensorFlow's slurm_cluster_resolver_test.py, case by case: (name, env, kwargs).
TF_TEST_CASES = [
    ("testSimpleRetrievalFromEnv",
     {"SLURM_PROCID": "0", "SLURM_STEP_NUM_TASKS": "3", "SLURM_STEP_TASKS_PER_NODE": "1(x3)",
      "SLURM_STEP_NODELIST": "t02n13,t02n41,t02n43", "CUDA_VISIBLE_DEVICES": "0"}, {}),
    ("testSimpleSuccessfulRetrieval",
     {"SLURM_PROCID": "0", "SLURM_STEP_NUM_TASKS": "3",
      "SLURM_STEP_NODELIST": "t02n13,t02n41,t02n43"},
     dict(jobs={"ps": 1, "worker": 2}, port_base=8888, tasks_per_node=1, gpus_per_node=1,
          gpus_per_task=1, auto_set_gpu=False)),
    ("testSimpleMasterRetrieval",
     {"SLURM_PROCID": "0", "SLURM_STEP_NUM_TASKS": "3",
      "SLURM_STEP_NODELIST": "t02n13,t02n41,t02n43"},
     dict(jobs={"ps": 1, "worker": 2}, port_base=8888, tasks_per_node=1, gpus_per_node=1,
          gpus_per_task=1, auto_set_gpu=False)),
    ("testTaskPerNodeNotSetRetrieval",
     {"SLURM_PROCID": "0", "SLURM_STEP_NUM_TASKS": "3", "SLURM_STEP_TASKS_PER_NODE": "1(x3)",
      "SLURM_STEP_NODELIST": "t02n13,t02n41,t02n43"},
     dict(jobs={"ps": 1, "worker": 2}, port_base=8888, gpus_per_node=1, gpus_per_task=1,
          auto_set_gpu=False)),
    ("testMultiTaskPerNodeRetrieval",
     {"SLURM_PROCID": "1", "SLURM_STEP_NUM_TASKS": "5", "SLURM_STEP_TASKS_PER_NODE": "2(x2),1",
      "SLURM_STEP_NODELIST": "t02n13,t02n41,t02n43", "CUDA_VISIBLE_DEVICES": ""},
     dict(jobs={"ps": 1, "worker": 4}, port_base=8888, gpus_per_node=2, gpus_per_task=1,
          auto_set_gpu=True)),
    ("testMultipleGpusPerTaskRetrieval",
     {"SLURM_PROCID": "1", "SLURM_STEP_NUM_TASKS": "5", "SLURM_STEP_TASKS_PER_NODE": "2(x2),1",
      "SLURM_STEP_NODELIST": "t02n13,t02n41,t02n43", "CUDA_VISIBLE_DEVICES": ""},
     dict(jobs={"ps": 1, "worker": 4}, port_base=8888, gpus_per_node=4, gpus_per_task=2,
          auto_set_gpu=True)),
]


@dataclass
class Case:
    """One rank's view of one generated job."""

    name: str
    env: Dict[str, str]
    kwargs: Dict[str, Any]
    hosts: List[str]               # SLURM_STEP_NODELIST order (Slurm's rank order for block)
    counts: List[int]
    rank: int
    smi_gpus: Optional[int] = None  # GPUs a fake nvidia-smi reports; None: no nvidia-smi
    tf_right: bool = True           # TensorFlow's layout and GPU allocation are right here
    why: List[str] = field(default_factory=list)


def _compress_counts(counts: List[int]) -> str:
    """[3, 3, 2, 1] -> '3(x2),2,1', as Slurm writes SLURM_STEP_TASKS_PER_NODE."""
    out, i = [], 0
    while i < len(counts):
        j = i
        while j < len(counts) and counts[j] == counts[i]:
            j += 1
        out.append(f"{counts[i]}(x{j - i})" if j - i > 1 else str(counts[i]))
        i = j
    return ",".join(out)


def _hostlist(prefix_groups: List[tuple]) -> str:
    """[('n', 1, 4, 2)] -> 'n[01-04]': one bracket group per part (TensorFlow's grammar)."""
    parts = []
    for prefix, lo, hi, width in prefix_groups:
        if lo == hi:
            parts.append(f"{prefix}{str(lo).zfill(width)}")
        else:
            parts.append(f"{prefix}[{str(lo).zfill(width)}-{str(hi).zfill(width)}]")
    return ",".join(parts)


def generate(n: int = 400, seed: int = 20261122) -> List[Case]:
    """Returns ``n`` seeded cases: 1-64 hosts, padding or not, several prefixes (the names
    users have: dotted ``hpc.n1``, IP-like ``10.0.0.7``, dashes, long zero-padded ``nid000001``),
    even and uneven tasks per node, typical jobs, port bases, GPUs given or discovered; each
    task also sees SLURMD_NODENAME and SLURM_GTIDS, as every real srun sets them."""
    rng = random.Random(seed)
    cases = []
    for i in range(n):
        groups, hosts = [], []
        for prefix in rng.sample(["n", "gpu", "t02n", "cpu-", "a", "hpc.n", "10.0.0.",
                                  "rack1-n", "nid"], rng.randint(1, 3)):
            count = rng.choice([1, 1, 2, 3, 5, 8, 16, 30])
            width = rng.choice([0, 2, 3]) if rng.random() < 0.6 else 0
            width = 6 if prefix == "nid" else 0 if prefix == "10.0.0." else width
            lo = rng.choice([0, 1, 7, 9, 95])
            hi = lo + count - 1
            width = max(width, 0)
            groups.append((prefix, lo, hi, width))
            hosts += [f"{prefix}{str(v).zfill(width)}" for v in range(lo, hi + 1)]
            if len(hosts) >= 64:
                break
        hosts = hosts[:64]
        if rng.random() < 0.7:
            hosts.sort()  # Slurm's order is also string order here: TensorFlow is right
        # Rebuild the groups so the list covers exactly `hosts` (truncation above).
        groups = [(p, int(h[len(p):]), int(h[len(p):]), len(h) - len(p) if w else 0)
                  for h in hosts for (p, _, _, w) in [_prefix_of(h, groups)]]
        nodelist = ",".join(_hostlist([g]) for g in groups)
        if rng.random() < 0.5:
            counts = [rng.choice([1, 2, 4])] * len(hosts)
        else:
            counts = [rng.randint(1, 4) for _ in hosts]
        total = sum(counts)
        rank = rng.randrange(total)
        placement = [h for h, k in zip(hosts, counts, strict=False) for _ in range(k)]
        env = {"SLURM_PROCID": str(rank), "SLURM_STEP_NUM_TASKS": str(total),
               "SLURM_STEP_NODELIST": nodelist,
               "SLURM_STEP_TASKS_PER_NODE": _compress_counts(counts),
               "SLURMD_NODENAME": placement[rank],
               "SLURM_GTIDS": ",".join(str(r) for r, h in enumerate(placement)
                                       if h == placement[rank])}
        kwargs: Dict[str, Any] = {}
        job_kind = rng.choice(["none", "worker", "ps", "chief"])
        if job_kind == "worker":
            kwargs["jobs"] = {"worker": total}
        elif job_kind == "ps" and total >= 2:
            kwargs["jobs"] = {"ps": 1, "worker": total - 1}
        elif job_kind == "chief" and total >= 3:
            kwargs["jobs"] = {"chief": 1, "worker": total - 2, "evaluator": 1}
        if rng.random() < 0.4:
            kwargs["port_base"] = rng.choice([2222, 8888, 30000, 50000])
        max_tasks = max(counts)
        gpus = rng.choice([max_tasks, 2 * max_tasks, 4 * max_tasks, 8])
        gpus = max(gpus, max_tasks)
        smi = None
        mode = rng.choice(["given", "env", "smi"])
        if mode == "given":
            kwargs["gpus_per_node"] = gpus
            if rng.random() < 0.5:
                kwargs["gpus_per_task"] = rng.randint(1, gpus // max_tasks)
        elif mode == "env":
            env["CUDA_VISIBLE_DEVICES"] = ",".join(str(g) for g in range(gpus))
        else:
            smi = gpus
        if rng.random() < 0.2:
            kwargs["auto_set_gpu"] = False
        case = Case(f"gen{i:03d}", env, kwargs, hosts, counts, rank, smi)
        if sorted(hosts) != hosts:
            case.tf_right = False
            case.why.append("host names do not sort as strings in Slurm's order")
        cases.append(case)
    return cases


def generate_gpu_requests(n: int = 300, seed: int = 20261124) -> List[Case]:
    """Returns ``n`` seeded cases of explicit gpus_per_task and gpus_per_node against every GPU
    source (gpus_per_node, CUDA_VISIBLE_DEVICES, empty too, nvidia-smi), with GPU counts from
    none to twice the busiest node's tasks. ``tf_right`` is False where TensorFlow's answer is
    wrong: it counts an empty CUDA_VISIBLE_DEVICES as one GPU, refuses (or crashes on) a
    CUDA_VISIBLE_DEVICES list that Slurm gave fewer GPUs than tasks, and crashes where its
    GPUs per task come to 0 (range() with step 0)."""
    rng = random.Random(seed)
    cases = []
    for i in range(n):
        hosts = [f"n{h}" for h in range(1, rng.randint(1, 3) + 1)]
        counts = [rng.randint(1, 3) for _ in hosts]
        total, max_tasks = sum(counts), max(counts)
        rank = rng.randrange(total)
        placement = [h for h, k in zip(hosts, counts, strict=True) for _ in range(k)]
        env = {"SLURM_PROCID": str(rank), "SLURM_STEP_NUM_TASKS": str(total),
               "SLURM_STEP_NODELIST": ",".join(hosts),
               "SLURM_STEP_TASKS_PER_NODE": _compress_counts(counts),
               "SLURMD_NODENAME": placement[rank],
               "SLURM_GTIDS": ",".join(str(r) for r, h in enumerate(placement)
                                       if h == placement[rank])}
        gpus = rng.randint(0, 2 * max_tasks)
        source = rng.choice(["gpus_per_node", "CUDA_VISIBLE_DEVICES", "nvidia-smi"])
        kwargs: Dict[str, Any] = {}
        smi = None
        if source == "gpus_per_node":
            kwargs["gpus_per_node"] = gpus
        elif source == "CUDA_VISIBLE_DEVICES":
            env["CUDA_VISIBLE_DEVICES"] = ",".join(str(g) for g in range(gpus))
        else:
            smi = gpus
        if rng.random() < 0.8:
            kwargs["gpus_per_task"] = rng.randint(0, 3)
        case = Case(f"gpu{i:03d}", env, kwargs, hosts, counts, rank, smi)
        counted = 1 if source == "CUDA_VISIBLE_DEVICES" and gpus == 0 else gpus
        per_task = kwargs.get("gpus_per_task", counted // max_tasks)
        if source == "CUDA_VISIBLE_DEVICES" and gpus == 0:
            case.why.append("TensorFlow counts an empty CUDA_VISIBLE_DEVICES as one GPU")
        if source == "CUDA_VISIBLE_DEVICES" and 0 < gpus < max_tasks:
            case.why.append("Slurm gave fewer GPUs than tasks: they share them")
        if per_task == 0:
            case.why.append("TensorFlow's GPUs per task come to 0: range() with step 0")
        case.tf_right = not case.why
        cases.append(case)
    return cases


def _prefix_of(host: str, groups: List[tuple]) -> tuple:
    for g in groups:
        if host.startswith(g[0]) and host[len(g[0]):].isdigit():
            return g
    raise AssertionError(host)


def observe(cls, env: Dict[str, str], kwargs: Dict[str, Any], smi_path: Optional[str] = None,
            with_notes: bool = False):
    """Returns what a resolver of ``cls`` gives for ``env``/``kwargs``: spec, task, GPUs (and
    mpi_resolver's notes, ``with_notes``); or, where it refuses with a RuntimeError (as both
    resolvers do), {'error': 'RuntimeError', 'message': its message}."""
    # Each case stands for a new process: forget what earlier cases' resolvers narrowed.
    narrowed = getattr(sys.modules.get("mpi_resolver.resolve.this_process"), "_narrowed", {})
    narrowed.clear()
    full = dict(env)
    full["PATH"] = (smi_path + os.pathsep if smi_path else "") + "/usr/bin:/bin"
    with mock.patch.dict(os.environ, full, clear=True):
        try:
            resolver = cls(**kwargs)
            spec = resolver.cluster_spec().as_dict()
        except RuntimeError as e:  # TensorFlow's and mpi_resolver's refusals alike
            return {"error": "RuntimeError", "message": str(e)}
        visible = os.environ.get("CUDA_VISIBLE_DEVICES")
        return {
            "cluster_spec": spec,
            "task": (resolver.task_type, resolver.task_id),
            "task_info": resolver.get_task_info(),
            "CUDA_VISIBLE_DEVICES": visible,
            "master": resolver.master(),
            "master_rpc": resolver.master(rpc_layer="test"),
            "master_ps": resolver.master("worker", 0) if "worker" in spec else None,
            "num_accelerators": resolver.num_accelerators(),
            **({"notes": list(resolver.resolution.notes)} if with_notes else {}),
        }
