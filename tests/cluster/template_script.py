"""A user's own script, as the templates run it (tests/cluster/test_templates.py): it takes
--greeting and nothing else (argparse refuses any other flag), and prints, from every task,
what it got and what the package sees in its environment."""

from __future__ import annotations

import argparse
import json
import os
import subprocess

from mpi_resolver import MPIClusterResolver, SlurmTerminationConfig


def step_cpus() -> str:
    """Returns the step's CPUs as scontrol shows them ('CPUs=6')."""
    shown = subprocess.run(["scontrol", "show", "step",
                            f"{os.environ['SLURM_JOB_ID']}.{os.environ['SLURM_STEP_ID']}"],
                           capture_output=True, text=True, check=False).stdout
    return next((w for w in shown.split() if w.startswith("CPUs=")), "CPUs=?")


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--greeting", required=True)
    args = p.parse_args()
    resolver = MPIClusterResolver(gpus_per_node=0)
    config = SlurmTerminationConfig(resolver)
    policy = config.policy
    cluster = resolver.cluster_spec().as_dict()
    print("OWN SCRIPT " + json.dumps({
        "rank": resolver.task_id, "greeting": args.greeting, "cluster": cluster,
        "signal": policy.warning.full_name, "grace": policy.grace_period,
        "every": config.every.describe(), "checkpoint_dir":
            os.environ.get("MPI_RESOLVER_CHECKPOINT_DIR"),
        "srun_cpus_per_task": os.environ.get("SRUN_CPUS_PER_TASK"), "step": step_cpus()},
        sort_keys=True), flush=True)
    config.disarm()


if __name__ == "__main__":
    main()
