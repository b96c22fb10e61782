"""GPU discovery on this node where nothing else says: ``nvidia-smi --list-gpus``, and the
NVIDIA device files (the edge: a subprocess with a timeout, a glob)."""

from __future__ import annotations

import glob
import shutil
import subprocess
from typing import Tuple

from mpi_resolver.core.errors import ResolutionError
from mpi_resolver.gpus.mig import Probed, listed_devices


#: Seconds nvidia-smi may take before the probe gives up with a ResolutionError.
NVIDIA_SMI_TIMEOUT = 20.0
#: The device files of NVIDIA GPUs; a node without them and without nvidia-smi is CPU-only.
NVIDIA_DEVICES = "/dev/nvidia[0-9]*"

_FIX = ("Set gpus_per_node (0 on CPU-only nodes) or CUDA_VISIBLE_DEVICES, or pass "
        "--gpus-per-node to mpi-resolver.")


def list_nvidia_smi(timeout: float = NVIDIA_SMI_TIMEOUT) -> Probed:
    """Returns what ``nvidia-smi --list-gpus`` reports: the number of GPUs (0 for "No
    devices"), or the devices' UUIDs where it lists MIG devices (_mig.listed_devices).

    Raises:
      ResolutionError: nvidia-smi is missing, fails, exceeds ``timeout`` seconds, or prints
        lines that are not GPU lines (or MIG lines without a UUID).
    """
    try:
        proc = subprocess.run(["nvidia-smi", "--list-gpus"], capture_output=True, text=True,
                              timeout=timeout, check=False)
    except FileNotFoundError:
        raise ResolutionError(
            "nvidia-smi was not found on PATH, and CUDA_VISIBLE_DEVICES is not set, so the "
            f"number of GPUs on this node is unknown. {_FIX}") from None
    except subprocess.TimeoutExpired:
        raise ResolutionError(
            f"nvidia-smi --list-gpus did not answer within {timeout:g} s. {_FIX}") from None
    except OSError as e:
        raise ResolutionError(f"nvidia-smi could not be run: {e}. {_FIX}") from e
    out = (proc.stdout or "") + (proc.stderr or "")
    if "No devices were found" in out:
        return 0
    if proc.returncode != 0:
        raise ResolutionError(
            f"nvidia-smi --list-gpus failed (exit {proc.returncode}): {out.strip()[:300]!r}. "
            f"{_FIX}")
    lines = [line for line in proc.stdout.splitlines() if line.strip()]
    # GPU lines count (as TensorFlow counts them); indented MIG lines list their partitions.
    bad = [line for line in lines
           if not line.startswith("GPU ") and not line.lstrip().startswith("MIG ")]
    if bad:
        raise ResolutionError(
            f"nvidia-smi --list-gpus printed {bad[0][:120]!r}, expected lines such as "
            f"'GPU 0: <name> (UUID: GPU-...)'. {_FIX}")
    return listed_devices(lines)


def probe_gpus(*, timeout: float = NVIDIA_SMI_TIMEOUT,
               devices: str = NVIDIA_DEVICES) -> Tuple[Probed, bool]:
    """Returns (this node's GPUs: a count or MIG names, see list_nvidia_smi; True when the
    node is CPU-only).

    CPU-only: no nvidia-smi on PATH and no NVIDIA device files (``devices``): 0 GPUs, no error.
    Otherwise nvidia-smi's answer.

    Raises:
      ResolutionError: as list_nvidia_smi, also where device files exist but nvidia-smi
        is missing.
    """
    if shutil.which("nvidia-smi") is None:
        found = sorted(glob.glob(devices))
        if not found:
            return 0, True
        raise ResolutionError(
            f"this node has NVIDIA device files ({found[0]}) but nvidia-smi was not found on "
            "PATH, and CUDA_VISIBLE_DEVICES is not set, so the number of GPUs on this node is "
            f"unknown. {_FIX}")
    return list_nvidia_smi(timeout), False
