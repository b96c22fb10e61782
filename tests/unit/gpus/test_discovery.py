"""GPU discovery: CUDA_VISIBLE_DEVICES parsing, the choice of entries, and a fake nvidia-smi."""

from __future__ import annotations

import os
import signal
import stat

import pytest

from mpi_resolver.core.errors import ResolutionError
from mpi_resolver.gpus.discovery import list_nvidia_smi, probe_gpus

pytestmark = pytest.mark.unit


# --------------------------------------------------------------------------------------------
# parse_visible_devices
# --------------------------------------------------------------------------------------------


# --------------------------------------------------------------------------------------------
# list_nvidia_smi with a fake nvidia-smi on PATH
# --------------------------------------------------------------------------------------------

def _fake_nvidia_smi(tmp_path, monkeypatch, body):
    """Puts an executable ``nvidia-smi`` running ``body`` (sh) first on PATH."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    script = bin_dir / "nvidia-smi"
    script.write_text("#!/bin/sh\n" + body)
    script.chmod(script.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}")
    return bin_dir


MIG = """\
echo 'GPU 0: NVIDIA A100-SXM4-40GB (UUID: GPU-8932f937-d72c-4106-c12f-20bd9faed9f6)'
echo '  MIG 1g.5gb      Device  0: (UUID: MIG-c6d4f1ef-42e4-5de3-91c7-45d71c87eb3f)'
echo '  MIG 1g.5gb      Device  1: (UUID: MIG-cba663e8-9bed-5b25-b243-5985ef7c9beb)'
"""

NORMAL = """\
echo 'GPU 0: NVIDIA A100-SXM4-40GB (UUID: GPU-8932f937-d72c-4106-c12f-20bd9faed9f6)'
echo 'GPU 1: NVIDIA A100-SXM4-40GB (UUID: GPU-2c6ad7e4-3a4b-4c16-9e8f-1f2d3c4b5a69)'
echo 'GPU 2: NVIDIA A100-SXM4-40GB (UUID: GPU-0a1b2c3d-3a4b-4c16-9e8f-1f2d3c4b5a69)'
"""


@pytest.mark.parametrize("body, expected", [
    pytest.param(NORMAL, 3, id="three GPU lines count 3"),
    pytest.param(NORMAL + "echo\n", 3, id="a trailing blank line is ignored"),
    pytest.param("echo 'GPU 0: Tesla T4 (UUID: GPU-1)'\n", 1, id="one GPU line counts 1"),
    pytest.param("echo 'No devices were found'\nexit 6\n", 0,
                 id="No devices were found (exit 6, as the real one) counts 0"),
    pytest.param("echo 'No devices were found'\n", 0, id="No devices were found on exit 0"),
    pytest.param("echo 'No devices were found' >&2\nexit 6\n", 0,
                 id="No devices were found on stderr counts 0"),
    pytest.param("test \"$1\" = --list-gpus || exit 9\n" + NORMAL, 3,
                 id="it asks for --list-gpus"),
    pytest.param(MIG, ("MIG-c6d4f1ef-42e4-5de3-91c7-45d71c87eb3f",
                       "MIG-cba663e8-9bed-5b25-b243-5985ef7c9beb"),
                 id="a GPU in MIG mode: its MIG devices by UUID"),
])
def test_list_nvidia_smi(tmp_path, monkeypatch, body, expected):
    _fake_nvidia_smi(tmp_path, monkeypatch, body)
    assert list_nvidia_smi() == expected


@pytest.mark.parametrize("body, fragment", [
    pytest.param("echo 'NVIDIA-SMI has failed because it could not communicate' >&2\nexit 9\n",
                 "exit 9", id="a non-zero exit is an error that shows the code"),
    pytest.param("exit 1\n", "exit 1", id="a silent failure is an error"),
    pytest.param("echo 'Segmentation fault'\n", "Segmentation fault",
                 id="garbage output is an error that shows the line"),
    pytest.param(NORMAL + "echo 'WARNING: infoROM is corrupted'\n", "infoROM",
                 id="a GPU list with a garbage line is an error"),
])
def test_list_nvidia_smi_failures_are_resolution_errors(tmp_path, monkeypatch, body, fragment):
    _fake_nvidia_smi(tmp_path, monkeypatch, body)
    with pytest.raises(ResolutionError, match="gpus_per_node") as excinfo:
        list_nvidia_smi()
    assert fragment in str(excinfo.value)
    assert "nvidia-smi" in str(excinfo.value)


def test_list_nvidia_smi_missing_binary_is_a_resolution_error(tmp_path, monkeypatch):
    empty = tmp_path / "empty"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    with pytest.raises(ResolutionError, match="gpus_per_node") as excinfo:
        list_nvidia_smi()
    assert "not found" in str(excinfo.value)
    assert not isinstance(excinfo.value, FileNotFoundError)


def test_list_nvidia_smi_not_executable_is_a_resolution_error(tmp_path, monkeypatch):
    bin_dir = _fake_nvidia_smi(tmp_path, monkeypatch, NORMAL)
    (bin_dir / "nvidia-smi").chmod(0o644)
    monkeypatch.setenv("PATH", str(bin_dir))
    with pytest.raises(ResolutionError, match="gpus_per_node"):
        list_nvidia_smi()


def test_list_nvidia_smi_gives_up_after_the_timeout(tmp_path, monkeypatch):
    # The sleep is a grandchild that keeps the output pipe open: the probe must not wait for it.
    # That it returned while the sleep still ran shows it did not (no clock needed). The 2 s
    # give the shell time to start the sleep and write its pid, even on a loaded machine.
    pid_file = tmp_path / "sleep.pid"
    _fake_nvidia_smi(tmp_path, monkeypatch, f"sleep 120 &\necho $! > '{pid_file}'\nwait\n")
    try:
        with pytest.raises(ResolutionError, match="gpus_per_node") as excinfo:
            list_nvidia_smi(timeout=2)
        assert pid_file.exists(), "the fake nvidia-smi did not start its sleep within 2 s"
        sleeping = _running(int(pid_file.read_text()))
    finally:
        if pid_file.exists():
            try:
                os.kill(int(pid_file.read_text()), signal.SIGTERM)
            except (ProcessLookupError, ValueError):
                pass
    assert "within 2 s" in str(excinfo.value)
    assert sleeping, "the probe waited for nvidia-smi's grandchild to end"


def _running(pid: int) -> bool:
    """Returns True while ``pid`` runs (not a zombie)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except OSError:
        return False


# --------------------------------------------------------------------------------------------
# probe_gpus: CPU-only nodes are 0 GPUs, not an error
# --------------------------------------------------------------------------------------------

def _path_without_nvidia_smi(tmp_path, monkeypatch):
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))


@pytest.mark.parametrize("device_files, expected", [
    pytest.param([], (0, True), id="no nvidia-smi and no device files: CPU-only, 0 GPUs"),
    pytest.param(["nvidiactl"], (0, True),
                 id="nvidiactl alone is not a GPU device: still CPU-only"),
])
def test_probe_gpus_cpu_only_node(tmp_path, monkeypatch, device_files, expected):
    _path_without_nvidia_smi(tmp_path, monkeypatch)
    dev = tmp_path / "dev"
    dev.mkdir()
    for name in device_files:
        (dev / name).write_text("")
    assert probe_gpus(devices=str(dev / "nvidia[0-9]*")) == expected


def test_probe_gpus_device_files_without_nvidia_smi_is_an_error(tmp_path, monkeypatch):
    _path_without_nvidia_smi(tmp_path, monkeypatch)
    dev = tmp_path / "dev"
    dev.mkdir()
    (dev / "nvidia0").write_text("")
    with pytest.raises(ResolutionError, match="nvidia0") as excinfo:
        probe_gpus(devices=str(dev / "nvidia[0-9]*"))
    assert "nvidia-smi was not found" in str(excinfo.value)
    assert "gpus_per_node" in str(excinfo.value)


def test_probe_gpus_counts_with_nvidia_smi_when_it_is_there(tmp_path, monkeypatch):
    _fake_nvidia_smi(tmp_path, monkeypatch, NORMAL)
    assert probe_gpus(devices=str(tmp_path / "no-such-dir" / "nvidia[0-9]*")) == (3, False)
