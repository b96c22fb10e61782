"""GPU discovery: CUDA_VISIBLE_DEVICES first, ``nvidia-smi --list-gpus`` as the fallback."""

from __future__ import annotations

import glob
import re
import shutil
import subprocess
from typing import Optional, Tuple

from ._errors import FormatError, ResolutionError

__all__ = ["parse_visible_devices", "count_nvidia_smi", "probe_gpus", "NVIDIA_SMI_TIMEOUT",
           "NVIDIA_DEVICES"]

#: Seconds nvidia-smi may take before the probe gives up with a ResolutionError.
NVIDIA_SMI_TIMEOUT = 20.0
#: The device files of NVIDIA GPUs; a node without them and without nvidia-smi is CPU-only.
NVIDIA_DEVICES = "/dev/nvidia[0-9]*"

_ENTRY = re.compile(r"[0-9]+|(?:GPU|MIG)-[A-Za-z0-9/-]+")
_FIX = ("Set gpus_per_node (0 on CPU-only nodes) or CUDA_VISIBLE_DEVICES, or pass "
        "--gpus-per-node to mpi-resolver.")


def parse_visible_devices(value: Optional[str]) -> Optional[Tuple[str, ...]]:
    """Returns the entries of CUDA_VISIBLE_DEVICES, or None when it is not set.

    ``''`` and ``'NoDevFiles'`` (Slurm's word for "no GPU allocated") mean no GPUs: ``()``.
    As CUDA does, a negative index ends the list (``'-1'`` hides every GPU). Entries are
    indices (``2,3``) or UUIDs (``GPU-...``, ``MIG-...``).

    Raises:
      FormatError: an entry that is neither, or the same entry twice.
    """
    if value is None:
        return None
    text = value.strip()
    if text in ("", "NoDevFiles"):
        return ()
    entries = []
    for raw in text.split(","):
        entry = raw.strip()
        if entry.startswith("-") and entry[1:].isdigit():
            break
        if _ENTRY.fullmatch(entry) is None:
            raise FormatError(
                f"CUDA_VISIBLE_DEVICES={value!r}: entry {entry!r} is neither a GPU index nor a "
                "GPU-/MIG- UUID; expected e.g. '0,1' or 'GPU-<uuid>,GPU-<uuid>'.")
        if entry in entries:
            raise FormatError(f"CUDA_VISIBLE_DEVICES={value!r} lists {entry!r} twice.")
        entries.append(entry)
    return tuple(entries)


def count_nvidia_smi(timeout: float = NVIDIA_SMI_TIMEOUT) -> int:
    """Returns the number of GPUs ``nvidia-smi --list-gpus`` reports (0 for "No devices").

    Raises:
      ResolutionError: nvidia-smi is missing, fails, exceeds ``timeout`` seconds, or prints
        lines that are not GPU lines.
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
    return sum(line.startswith("GPU ") for line in lines)


def probe_gpus(*, timeout: float = NVIDIA_SMI_TIMEOUT,
               devices: str = NVIDIA_DEVICES) -> Tuple[int, bool]:
    """Returns (GPUs on this node, True when the node is CPU-only).

    CPU-only: no nvidia-smi on PATH and no NVIDIA device files (``devices``): 0 GPUs, no error.
    Otherwise nvidia-smi's count.

    Raises:
      ResolutionError: as count_nvidia_smi, also where device files exist but nvidia-smi
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
    return count_nvidia_smi(timeout), False
