"""_cuda_state: whether CUDA's driver is loaded in this process (read from a maps file)."""

from __future__ import annotations

import pytest

from mpi_resolver.gpus.cuda_state import cuda_loaded, too_early
from mpi_resolver.core.errors import ResolutionError

pytestmark = pytest.mark.unit

LIBM = "7f1c2a000000-7f1c2a010000 r--p 00000000 08:01 1234 /usr/lib/x86_64-linux-gnu/libm.so.6\n"


@pytest.mark.parametrize("lines, loaded", [
    pytest.param([LIBM, LIBM.replace("libm.so.6", "libcuda.so.1")], True,
                 id="libcuda.so.1 mapped"),
    pytest.param([LIBM.replace("/usr/lib/x86_64-linux-gnu/libm.so.6", "/opt/nv/libcuda.so")],
                 True, id="libcuda.so anywhere"),
    pytest.param([LIBM, LIBM.replace("libm.so.6", "libcudart.so.12")], False,
                 id="the CUDA runtime alone is not the driver"),
    pytest.param([LIBM.replace("/usr/lib/x86_64-linux-gnu/libm.so.6", "libcuda.so.1")], False,
                 id="a name without a directory is not a mapped path"),
    pytest.param([], False, id="nothing mapped"),
    pytest.param([LIBM.replace("libm.so.6", "caf\udcff/libcuda.so.1")], True,
                 id="a path that is not UTF-8 is read as bytes"),
])
def test_cuda_loaded_reads_the_maps(tmp_path, lines, loaded):
    maps = tmp_path / "maps"
    maps.write_bytes("".join(lines).encode("utf-8", "surrogateescape"))
    assert cuda_loaded(str(maps)) is loaded


def test_cuda_loaded_is_false_where_maps_cannot_be_read(tmp_path):
    assert cuda_loaded(str(tmp_path / "missing")) is False


def test_cuda_loaded_reads_this_process_by_default():
    assert isinstance(cuda_loaded(), bool)


def test_too_early_names_what_started_cuda_the_value_and_the_fixes():
    error = too_early("TensorFlow already listed this process's devices", "2,3")
    assert isinstance(error, ResolutionError)
    text = str(error)
    assert text.startswith("TensorFlow already listed this process's devices before this "
                           "rank's GPUs were set (CUDA_VISIBLE_DEVICES='2,3')")
    for fix in ("Create MPIClusterResolver before anything lists or configures GPUs",
                "mpi-resolver exec -- python train.py", "OMPI_MCA_opal_cuda_support=0"):
        assert fix in text
