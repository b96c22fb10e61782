"""Fake jobs for the unit tables: every rank's variables as srun gives them, and the pure
resolution of one rank with the records the real MPI exchange would deliver."""

from __future__ import annotations

from typing import Dict, List, Optional

from mpi_resolver.launchers import detect_mpi_launch
from mpi_resolver.options import make_options
from mpi_resolver.resolution import local_record, plan, resolve


def srun_env(rank: int, hosts: List[str], counts: List[int], placement: List[str],
             mpi: str = "pmix", **extra: str) -> Dict[str, str]:
    """The variables `srun --mpi=<mpi>` gives task ``rank`` placed on placement[rank]."""
    node = placement[rank]
    env = {"SLURM_PROCID": str(rank), "SLURM_STEP_NUM_TASKS": str(len(placement)),
           "SLURM_STEP_NODELIST": ",".join(hosts),
           "SLURM_STEP_TASKS_PER_NODE": ",".join(map(str, counts)),
           "SLURMD_NODENAME": node, "SLURM_JOB_ID": "42", "SLURM_STEP_ID": "0",
           "SLURM_LOCALID": str(placement[:rank].count(node)),
           "SLURM_GTIDS": ",".join(str(r) for r, h in enumerate(placement) if h == node)}
    if mpi == "pmix":
        env["PMIX_RANK"] = str(rank)
    elif mpi == "pmi2":
        env.update(PMI_RANK=str(rank), PMI_SIZE=str(len(placement)))
    env.update(extra)
    return env


def run_job(envs: List[Dict[str, str]], hosts_by_rank: List[str], rank: int,
            mpi_size: Optional[int] = None, smi: int = 4, probe=None, **kwargs):
    """Resolves rank ``rank`` of a job whose ranks see ``envs`` and run on ``hosts_by_rank``;
    ``probe`` stands for nvidia-smi (default: ``smi`` GPUs)."""
    opts = make_options(**kwargs)
    probe = probe or (lambda: (smi, False))
    if mpi_size == 1:  # every task started its own MPI: each sees a world of one
        env = envs[rank]
        records = [local_record(opts, env, detect_mpi_launch(env), 0, 1, hosts_by_rank[rank],
                                probe=probe)]
        mine = 0
    else:
        records = [local_record(opts, env, detect_mpi_launch(env), r, len(envs),
                                hosts_by_rank[r], probe=probe)
                   for r, env in enumerate(envs)]
        mine = rank
    the_plan = plan(opts, envs[rank])
    return resolve(opts, envs[rank], the_plan=the_plan, exchange=lambda: (mine, records),
                   probe=probe)
