"""resolve_process, without TensorFlow: this process's resolution from Slurm's variables, and
CUDA_VISIBLE_DEVICES set to its GPUs (before MPI where Slurm gives them, and after), refused
where CUDA started already and the setting would change them; a second resolution in the same
process allocates from the list the launcher gave, not from the narrowed one."""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Dict, Optional
from unittest import mock

import pytest

from mpi_resolver.core.errors import ResolutionError
from mpi_resolver.options import make_options
from mpi_resolver.resolve import this_process

pytestmark = pytest.mark.unit

#: Rank 1 of 2 on one node with 4 GPUs (Slurm gave the node's list to both).
STEP = {"SLURM_PROCID": "1", "SLURM_STEP_NUM_TASKS": "2", "SLURM_STEP_NODELIST": "node1",
        "SLURM_STEP_TASKS_PER_NODE": "2", "SLURMD_NODENAME": "node1", "PATH": "/usr/bin:/bin"}


@pytest.fixture(autouse=True)
def _new_process(monkeypatch):
    """Each test is a new process: nothing narrowed before it."""
    monkeypatch.setattr(this_process, "_narrowed", {})


def resolve(env: Dict[str, str], started: Optional[str] = None, **kwargs):
    """Returns (the resolution, CUDA_VISIBLE_DEVICES after it) for ``env`` as this process's
    environment; ``started``: what says CUDA started already (None: it has not)."""
    opts = make_options(source="slurm", verify=False, port_base=8888, env=env)
    with mock.patch.dict(os.environ, env, clear=True):
        res = this_process.resolve_process(opts, started=lambda: started, **kwargs)
        return res, os.environ.get("CUDA_VISIBLE_DEVICES")


@pytest.mark.parametrize("given, set_gpu, visible", [
    pytest.param("0,1,2,3", True, "2,3", id="the node's 4 GPUs: rank 1 takes the second half"),
    pytest.param("4,5,6,7", True, "6,7", id="Slurm's numbers kept"),
    pytest.param("0,1,2,3", False, "0,1,2,3", id="auto_set_gpu=False: left as launched"),
    pytest.param(None, True, "", id="no GPUs: none, written"),
])
def test_this_rank_s_gpus_are_set(given: Optional[str], set_gpu: bool, visible: str) -> None:
    env = dict(STEP, **({"CUDA_VISIBLE_DEVICES": given} if given is not None else {}),
               **({} if given is not None else {"MPI_RESOLVER_GPUS_PER_NODE": "0"}))
    res, cvd = resolve(env, auto_set_gpu=set_gpu)
    assert (res.rank, res.source) == (1, "slurm")
    assert cvd == visible


ALONE = dict(STEP, SLURM_PROCID="0", SLURM_STEP_NUM_TASKS="1", SLURM_STEP_TASKS_PER_NODE="1")


@pytest.mark.parametrize("env, why, visible", [
    pytest.param(STEP, "CUDA is already loaded", None,
                 id="CUDA started, the setting changes its GPUs: refused, saying why"),
    pytest.param(STEP, None, "2,3", id="CUDA not started: set"),
    pytest.param(ALONE, "CUDA is already loaded", "0,1,2,3",
                 id="CUDA started, a task alone on its node keeps all: no error"),
    pytest.param(dict(ALONE, MPI_RESOLVER_GPUS_PER_NODE="4"), "CUDA is already loaded",
                 "0,1,2,3", id="unset, so all the node's GPUs; the task keeps all: no error"),
])
def test_a_narrowing_after_cuda_started_is_refused(env: Dict[str, str], why: Optional[str],
                                                   visible: Optional[str]) -> None:
    if "MPI_RESOLVER_GPUS_PER_NODE" not in env:
        env = dict(env, CUDA_VISIBLE_DEVICES="0,1,2,3")
    if visible is None:
        with pytest.raises(ResolutionError, match=f"{why} .*CUDA_VISIBLE_DEVICES='2,3'"):
            resolve(env, started=why)
    else:
        assert resolve(env, started=why)[1] == visible


@pytest.mark.parametrize("started, expected", [
    (None, "1,2"),                       # CUDA not started: set before MPI_Init
    ("libcuda loaded", "0,1,2,3"),       # left as CUDA saw it, so that the check compares
])
def test_gpus_are_set_before_mpi_only_where_cuda_has_not_started(started, expected) -> None:
    with mock.patch.dict(os.environ, {"CUDA_VISIBLE_DEVICES": "0,1,2,3"}):
        this_process._set_before_mpi(("1", "2"), started=lambda: started)
        assert os.environ["CUDA_VISIBLE_DEVICES"] == expected


@pytest.mark.parametrize("now, original, seen", [
    pytest.param("2,3", "0,1,2,3", "0,1,2,3", id="as narrowed: the launcher's list"),
    pytest.param("2,3", None, None, id="narrowed from unset: unset"),
    pytest.param("5", "0,1,2,3", "5", id="set by the user since: theirs"),
])
def test_a_second_resolution_reads_the_list_as_launched(now, original, seen) -> None:
    this_process._narrowed.update(original=original, written="2,3")
    with mock.patch.dict(os.environ, {"CUDA_VISIBLE_DEVICES": now}, clear=True):
        assert this_process.environment().get("CUDA_VISIBLE_DEVICES") == seen
    assert bool(this_process._narrowed) is (now == "2,3")


def test_twice_in_one_process_gives_the_same_gpus() -> None:
    env = dict(STEP, CUDA_VISIBLE_DEVICES="0,1,2,3")
    opts = make_options(source="slurm", verify=False, port_base=8888, env=env)
    with mock.patch.dict(os.environ, env, clear=True):
        first = this_process.resolve_process(opts).visible_devices
        second = this_process.resolve_process(opts).visible_devices
        assert (first, second, os.environ["CUDA_VISIBLE_DEVICES"]) == ("2,3", "2,3", "2,3")


@pytest.mark.parametrize("loaded, said", [(True, "CUDA is already loaded"), (False, None)])
def test_cuda_started_says_libcuda_is_loaded(monkeypatch, loaded: bool, said) -> None:
    monkeypatch.setattr(this_process, "cuda_loaded", lambda: loaded)
    why = this_process.cuda_started()
    assert (why is None) if said is None else said in why


def test_resolving_imports_neither_tensorflow_nor_mpi4py() -> None:
    """In a new process: source='slurm' resolves without TensorFlow and without mpi4py."""
    code = ("import os, sys\n"
            "from mpi_resolver.options import make_options\n"
            "from mpi_resolver.resolve.this_process import resolve_process\n"
            "opts = make_options(source='slurm', verify=False, env=os.environ)\n"
            "print(resolve_process(opts).visible_devices,\n"
            "      [m for m in ('tensorflow', 'mpi4py') if m in sys.modules])\n")
    env = dict(STEP, CUDA_VISIBLE_DEVICES="0,1,2,3", PYTHONPATH=str(
        __import__("pathlib").Path(__file__).resolve().parents[3]))
    p = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                       timeout=60)
    assert p.returncode == 0, p.stderr
    assert p.stdout.split("\n")[0] == "2,3 []"


class _Stop(Exception):
    pass


@pytest.mark.parametrize("comm, set_gpu", [(None, True), ("a communicator", False)])
def test_the_resolution_is_given_this_process_s_mpi(monkeypatch, comm, set_gpu) -> None:
    """resolve_job gets MPI's library, whether MPI runs, the communicator (COMM_WORLD where
    none is given) with the timeout, and the setting of the GPUs before MPI_Init, which asks
    ``started`` first."""
    seen: Dict[str, object] = {}

    def resolve_job(opts, env, **kwargs):
        seen.update(kwargs, env=env)
        raise _Stop

    monkeypatch.setattr(this_process, "resolve_job", resolve_job)
    monkeypatch.setattr(this_process, "mpi_initialized", lambda: "MPI runs?")
    monkeypatch.setattr(this_process, "world", lambda c: (("world of", c), 0, 1))
    monkeypatch.setattr(this_process, "MpiTransport", lambda c, timeout: ("transport", c, timeout))
    opts = make_options(source="slurm", verify=False, port_base=8888, timeout=7.5, env=STEP)
    with mock.patch.dict(os.environ, dict(STEP, CUDA_VISIBLE_DEVICES="0,1"), clear=True):
        with pytest.raises(_Stop):
            this_process.resolve_process(opts, comm=comm, auto_set_gpu=set_gpu,
                                         started=lambda: None)
        assert seen["env"]["CUDA_VISIBLE_DEVICES"] == "0,1"
        assert (seen["library"], seen["have_comm"], seen["mpi_running"], seen["warn"]) == (
            this_process.mpi_library, comm is not None, "MPI runs?", this_process.log_each)
        assert seen["transport"]() == ("transport", ("world of", comm), 7.5)
        if not set_gpu:
            assert seen["before_mpi"] is None
            return
        seen["before_mpi"](("1",))
        assert os.environ["CUDA_VISIBLE_DEVICES"] == "1"


def test_gpus_set_before_a_cuda_aware_mpi_init_are_not_refused_after_it() -> None:
    """MPI_Init loaded libcuda after the GPUs were set before it: CUDA saw this rank's own
    GPUs already, so narrowing changes nothing and is no error (the node has more)."""
    res, _ = resolve(dict(STEP, CUDA_VISIBLE_DEVICES="0,1,2,3"), auto_set_gpu=False)
    with mock.patch.dict(os.environ, {"CUDA_VISIBLE_DEVICES": "2,3"}):
        this_process.narrow(res, started=lambda: "MPI_Init loaded libcuda")
        assert os.environ["CUDA_VISIBLE_DEVICES"] == "2,3"
