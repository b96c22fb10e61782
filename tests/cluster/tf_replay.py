"""TensorFlow's own SlurmClusterResolver, replayed in the test's process from what a rank of a
real launch recorded: its Slurm step variables and CUDA_VISIBLE_DEVICES as launched. TensorFlow's
resolver reads nothing else (os.environ's SLURM_PROCID, SLURM_STEP_NUM_TASKS,
SLURM_STEP_NODELIST, SLURM_STEP_TASKS_PER_NODE and CUDA_VISIBLE_DEVICES) but nvidia-smi where
CUDA_VISIBLE_DEVICES is unset, which a fake with the node's GPU count stands in for. So the ranks
need not import TensorFlow (6-7 s of CPU each) for their answer to be compared with its."""

from __future__ import annotations

import os
import tempfile
from typing import Any, Dict
from unittest import mock

from tests.cluster import probe
from tests.harness.slurm_files import fake_nvidia_smi


def tensorflow_view(line: Dict[str, Any], gpus_per_node: int) -> Dict[str, Any]:
    """Returns what TensorFlow's resolver, with the line's resolver arguments, says in the rank
    that wrote ``line`` (probe.describe's fields, or {"error": ...}); its node has
    ``gpus_per_node`` GPUs as nvidia-smi lists them."""
    env = {k: v for k, v in line["slurm"].items() if v is not None}
    if line["original_cvd"] is not None:
        env[probe.CVD] = line["original_cvd"]
    with tempfile.TemporaryDirectory() as bin_dir:
        smi = os.path.join(bin_dir, "nvidia-smi")
        with open(smi, "w") as f:
            f.write(fake_nvidia_smi(line["host"], 0, gpus_per_node, os.devnull))
        os.chmod(smi, 0o755)
        env["PATH"] = f"{bin_dir}:/usr/bin:/bin"
        with mock.patch.dict(os.environ, env, clear=True):
            return probe.tensorflow_view(line["kwargs"], original=line["original_cvd"])
