"""_mig: CUDA's rules for MIG devices, and how nvidia-smi lists them (pure)."""

from __future__ import annotations

import re

import pytest

from mpi_resolver.core.errors import ResolutionError
from mpi_resolver.gpus.mig import capped, check_request, is_mig, listed_devices, probed_list

pytestmark = pytest.mark.unit

GPU0 = "GPU 0: NVIDIA A100-SXM4-40GB (UUID: GPU-5d5ba0d6-d33d-2b2c-524d-9e3d8d2b8a77)"
GPU1 = "GPU 1: NVIDIA A100-SXM4-40GB (UUID: GPU-0b5ba0d6-d33d-2b2c-524d-9e3d8d2b8a78)"
MIG_A = "MIG-c6d4f1ef-42e4-5de3-91c7-45d71c87eb3f"
MIG_B = "MIG-cba663e8-9bed-5b25-b243-5985ef7c9beb"
OLD = "MIG-GPU-5d5ba0d6-d33d-2b2c-524d-9e3d8d2b8a77/7/0"  # drivers before R470


def mig_line(n: int, uuid: str) -> str:
    return f"  MIG 1g.5gb      Device  {n}: (UUID: {uuid})"


@pytest.mark.parametrize("lines, expected", [
    pytest.param([GPU0, GPU1], 2, id="no MIG: the count of GPU lines"),
    pytest.param([], 0, id="nothing listed: 0"),
    pytest.param([GPU0, mig_line(0, MIG_A), mig_line(1, MIG_B)], (MIG_A, MIG_B),
                 id="a GPU in MIG mode: its MIG devices' UUIDs, not the GPU"),
    pytest.param([GPU0, mig_line(0, MIG_A), GPU1], (MIG_A, GPU1[GPU1.index("GPU-"):-1]),
                 id="a GPU without MIG beside one with: named by its GPU- UUID"),
    pytest.param([GPU1, GPU0, mig_line(0, MIG_A)], (GPU1[GPU1.index("GPU-"):-1], MIG_A),
                 id="the order nvidia-smi lists them"),
    pytest.param([GPU0, "  MIG 3g.20gb Device 0: (UUID: " + OLD + ")"], (OLD,),
                 id="the old MIG-GPU-<uuid>/<gi>/<ci> names"),
])
def test_listed_devices(lines, expected):
    assert listed_devices(lines) == expected


@pytest.mark.parametrize("lines, shown", [
    pytest.param([GPU0, "  MIG 1g.5gb Device 0: no uuid"], "no uuid",
                 id="a MIG line without a UUID"),
    pytest.param(["GPU 0: A100", mig_line(0, MIG_A), "GPU 1: A100 (no id)"], "GPU 1: A100",
                 id="a GPU line without a UUID on a node with MIG devices"),
])
def test_listed_devices_without_a_uuid_is_an_error(lines, shown):
    with pytest.raises(ResolutionError, match="CUDA names by UUID only") as excinfo:
        listed_devices(lines)
    assert shown in str(excinfo.value)


@pytest.mark.parametrize("gpus, expected", [
    pytest.param((MIG_A,), True, id="a MIG UUID"),
    pytest.param(("0", OLD), True, id="an old MIG name among indices"),
    pytest.param(("0", "1"), False, id="indices"),
    pytest.param(("GPU-MIG-1",), False, id="a GPU UUID that contains MIG"),
    pytest.param((), False, id="no GPUs"),
])
def test_is_mig(gpus, expected):
    assert is_mig(gpus) is expected


@pytest.mark.parametrize("count, gpus, expected", [
    pytest.param(2, (MIG_A, MIG_B), 1, id="two MIG devices: one"),
    pytest.param(1, (MIG_A, MIG_B), 1, id="one MIG device: one"),
    pytest.param(0, (MIG_A,), 0, id="none stays none"),
    pytest.param(2, ("0", "1"), 2, id="plain GPUs: as many as asked"),
])
def test_capped(count, gpus, expected):
    assert capped(count, gpus) == expected


@pytest.mark.parametrize("per_task, gpus, refused", [
    pytest.param(2, (MIG_A, MIG_B), True, id="two MIG devices a task: refused"),
    pytest.param(1, (MIG_A, MIG_B), False, id="one a task: fine"),
    pytest.param(None, (MIG_A, MIG_B), False, id="not asked: fine (capped instead)"),
    pytest.param(2, ("0", "1"), False, id="two plain GPUs a task: fine"),
])
def test_check_request(per_task, gpus, refused):
    if refused:
        with pytest.raises(ResolutionError, match=re.escape(
                f"gpus_per_task=2, but the GPUs of node1 are MIG devices ({MIG_A}, {MIG_B}) "
                "and CUDA lets a process use 1; pass gpus_per_task=1")):
            check_request(per_task, gpus, "node1")
    else:
        check_request(per_task, gpus, "node1")


def test_check_request_shows_two_devices_then_dots():
    with pytest.raises(ResolutionError, match=re.escape(f"({MIG_A}, {MIG_B}, ...)")):
        check_request(2, (MIG_A, MIG_B, OLD), "node1")


@pytest.mark.parametrize("probed, expected", [
    pytest.param(3, ("0", "1", "2"), id="a count: indices"),
    pytest.param(0, (), id="0: none"),
    pytest.param((MIG_A, MIG_B), (MIG_A, MIG_B), id="names: as listed"),
    pytest.param([MIG_A], (MIG_A,), id="a JSON list: a tuple"),
])
def test_probed_list(probed, expected):
    assert probed_list(probed) == expected
