"""Shared fixtures: a fake nvidia-smi, a clean resolver state, and the throw-away cluster."""

from __future__ import annotations

import stat
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def write_fake_nvidia_smi(directory: Path, gpus: int) -> str:
    """Writes an nvidia-smi that lists ``gpus`` GPUs into ``directory``; returns the dir."""
    directory.mkdir(parents=True, exist_ok=True)
    script = directory / "nvidia-smi"
    lines = "".join(f"echo 'GPU {i}: Fake GPU (UUID: GPU-{i:08d}-0000-0000-0000-000000000000)'\n"
                    for i in range(gpus))
    script.write_text("#!/bin/sh\n" + lines)
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return str(directory)


@pytest.fixture(autouse=True)
def _fresh_resolver_state():
    """Forgets what earlier tests' resolvers wrote to CUDA_VISIBLE_DEVICES."""
    module = sys.modules.get("mpi_resolver.resolver")
    if module is not None:
        module._narrowed.clear()
    yield
    if module is not None:
        module._narrowed.clear()
