"""mpi_resolver.jax's edge in .venv-jax's Python, one process per case, no cluster: its refusals
(a bad argument, JAX started before it), the one-process start, the registration with JAX's
own cluster detection and its version pin, the timeout JAX's connection is bounded by, and that
the package and mpi_resolver.jax import no JAX."""

from __future__ import annotations

import os
import subprocess
import time
from typing import Dict

import pytest

from tests.docs.blocks import block
from tests.jax.conftest import JAX_ENV

_LAUNCHER_PREFIXES = ("SLURM_", "SLURMD_", "OMPI_", "PMIX_", "PMI_", "MPI_LOCAL", "HYDRA_",
                      "I_MPI_", "CUDA_VISIBLE_DEVICES", "JAX_")


def clean_env(**extra: str) -> Dict[str, str]:
    """Returns this environment without any launcher's or JAX's variables, plus ``extra``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(_LAUNCHER_PREFIXES)}
    return {**env, **JAX_ENV, **extra}


def run(python: str, code: str, timeout: float = 120, **extra: str):
    return subprocess.run([python, "-c", code], capture_output=True, text=True,
                          timeout=timeout, env=clean_env(**extra))


REFUSED = '''
import jax
from mpi_resolver import ResolutionError
from mpi_resolver.jax import initialize
{before}
try:
    initialize({args})
except ResolutionError as e:
    print("REFUSED", type(e).__name__, e, "| started:", jax.distributed.is_initialized())
'''


@pytest.mark.parametrize("before, args, says", [
    pytest.param("", "port_base='x'", "port_base='x': expected a port number", id="port_base"),
    pytest.param("", "rpc_layer='grpc+verbs'", "rpc_layer='grpc+verbs': JAX's coordination "
                 "service speaks gRPC only", id="rpc_layer"),
    pytest.param("", "auto_set_gpu='yes'", "auto_set_gpu='yes': expected True or False",
                 id="auto_set_gpu"),
    pytest.param("", "timeout=0", "timeout=0: expected a number of seconds > 0", id="timeout"),
    pytest.param("jax.devices()", "", "JAX already started its devices in this process",
                 id="JAX computed before"),
    pytest.param("initialize(port_base='auto')", "port_base='auto'",
                 "jax.distributed is already initialized in this process", id="twice"),
])
def test_refusals_before_jax_starts(jax_python: str, before: str, args: str, says: str) -> None:
    p = run(jax_python, REFUSED.format(before=before, args=args))
    assert p.returncode == 0 and "REFUSED ResolutionError" in p.stdout, p.stdout + p.stderr
    assert says in p.stdout, p.stdout
    started = "twice" in before or before.startswith("initialize")
    assert p.stdout.strip().endswith(f"started: {started}"), p.stdout


ONE_PROCESS = block("jax-two-lines") + '''
import jax, numpy as np
from jax.experimental import multihost_utils
from mpi_resolver.jax import JaxResolution
from mpi_resolver.resolve.resolution import Resolution
res = resolution
assert isinstance(res, JaxResolution) and isinstance(res, Resolution)
print(res.num_tasks, res.distributed.process_id, res.distributed.num_processes,
      res.distributed.coordinator_address == res.layout.addresses[0],
      jax.process_count(), jax.config.jax_cpu_collectives_implementation,
      multihost_utils.process_allgather(np.array([7])).tolist())
'''


def test_one_process_without_launcher(jax_python: str) -> None:
    """No Slurm, no mpirun: one JAX process, coordinator = its own address, gloo."""
    p = run(jax_python, ONE_PROCESS)
    assert p.returncode == 0, p.stderr
    assert p.stdout.split() == ["1", "0", "1", "True", "1", "gloo", "[[7]]"], p.stdout


# docs/jax.md's lines, register() asked twice (a second call changes nothing) and printed.
REGISTER = "import jax\n{version}\n" + block("jax-register").replace(
    'register(port_base="auto")',
    'print("registered:", register(port_base="auto"), register(port_base="auto"))') + \
    '\nprint("count:", jax.process_count(), "index:", jax.process_index())\n'


def test_register_on_the_tested_jax(jax_python: str) -> None:
    p = run(jax_python, REGISTER.format(version=""))
    assert p.returncode == 0, p.stderr
    assert "registered: True True" in p.stdout and "count: 1 index: 0" in p.stdout, p.stdout


def test_register_on_another_jax_says_so_once(jax_python: str) -> None:
    """A JAX version not in TESTED_JAX: register() returns False and logs one message naming
    the version and initialize(); JAX's own initialize then finds no such method."""
    p = run(jax_python, REGISTER.format(version="jax.__version__ = '0.9.9'"))
    assert "registered: False False" in p.stdout, p.stdout + p.stderr
    message = ("JAX 0.9.9 is not a version mpi_resolver's cluster detection was tested with "
               "(0.10.2)")
    assert p.stderr.count(message) == 1, p.stderr
    assert "call mpi_resolver.jax.initialize() instead" in p.stderr, p.stderr
    assert "mpi_resolver is not supported" in p.stderr and p.returncode != 0, p.stderr


# Rank 1 of a 2-task Slurm step whose task 0 never comes (source='slurm': no MPI exchange).
LONELY = dict(SLURM_JOB_ID="7", SLURM_STEP_ID="0", SLURM_PROCID="1", SLURM_LOCALID="0",
              SLURM_NTASKS="2", SLURM_STEP_NUM_TASKS="2", SLURM_STEP_NODELIST="localhost,vm2",
              SLURM_STEP_TASKS_PER_NODE="1(x2)", SLURM_NODELIST="localhost,vm2",
              SLURM_STEP_NUM_NODES="2", SLURMD_NODENAME="vm2", SLURM_NNODES="2")


def test_a_coordinator_that_never_comes_ends_within_timeout(jax_python: str) -> None:
    """timeout= bounds JAX's connection too (initialization_timeout; JAX's default is 300 s):
    the lonely rank ends (JAX aborts it) with DEADLINE_EXCEEDED instead of waiting."""
    code = ("import time; from mpi_resolver.jax import initialize\n"
            "t = time.monotonic()\n"
            "initialize(source='slurm', timeout=2, port_base=24999, gpus_per_node=0)\n")
    start = time.monotonic()
    p = run(jax_python, code, timeout=100, **LONELY)
    assert p.returncode != 0 and "DEADLINE_EXCEEDED" in p.stderr, p.stderr[-3000:]
    assert "RegisterTask" in p.stderr, p.stderr[-3000:]
    assert time.monotonic() - start < 60  # JAX's default (300 s) would pass 100: killed


def test_the_pure_part_imports_no_jax(jax_python: str) -> None:
    """mpi_resolver.jax and its arguments import neither JAX nor mpi4py nor TensorFlow nor
    Keras, in .venv-jax's Python where JAX, Keras and mpi4py are installed."""
    code = ("import sys, mpi_resolver, mpi_resolver.jax, mpi_resolver.jax.arguments\n"
            "print(sorted(m for m in ('jax', 'mpi4py', 'tensorflow', 'keras') "
            "if m in sys.modules))")
    p = subprocess.run([jax_python, "-c", code], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0 and p.stdout.strip() == "[]", p.stderr


LONG_JOB = '''
import os, signal
from mpi_resolver import ResolutionError
from mpi_resolver.jax import initialize
from mpi_resolver.jax.termination import JaxTermination
initialize(port_base='auto')
for bad in ({"check_every": 0}, {"check_every": True}, {"signal": "B:USR1"}):
    try:
        JaxTermination(**bad)
    except ResolutionError as e:
        print("REFUSED", type(e).__name__, str(e).split(":")[0])
t = JaxTermination("USR1", check_every=2)
print("before:", t.should_stop(), t.should_stop())
os.kill(os.getpid(), signal.SIGUSR1)
print("after:", t.should_stop(), t.should_stop())
code, what = t.finish(4)
print("exit:", code, "|", what)
print("ignored after the finish:", signal.getsignal(signal.SIGUSR1) == signal.SIG_IGN)
t.disarm()
print("handler back:", signal.getsignal(signal.SIGUSR1) == signal.SIG_DFL)
'''


def test_long_job_agreement_alone_and_its_refusals(jax_python: str) -> None:
    """One process: bad arguments refused naming them; the signal noted by the flag-only
    handler and seen at the next agreement (every check_every=2 calls), the finish's code
    (75 after the warning signal) and line, the signals ignored from then on (more come: the
    requeue's SIGTERM), the handlers put back by disarm()."""
    p = run(jax_python, LONG_JOB)
    assert p.returncode == 0, p.stderr[-3000:]
    lines = p.stdout.splitlines()
    assert lines[:3] == ["REFUSED FormatError check_every=0",
                         "REFUSED FormatError check_every=True",
                         "REFUSED FormatError signal='B"], p.stdout  # cut at ':'
    assert lines[3:5] == ["before: False False", "after: False True"], p.stdout
    assert lines[5].startswith("exit: 75 | checkpoint saved on SIGUSR1; ") and \
        "not in a Slurm job" in lines[5], p.stdout
    assert lines[6:] == ["ignored after the finish: True", "handler back: True"], p.stdout


SPEAKS_FIRST = '''
import socket
from jax._src.lib import _jax
from mpi_resolver.jax.start import coordinator_answers
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(); port = s.getsockname()[1]
print("silent socket:", coordinator_answers("127.0.0.1", port, 0.5))
s.close()
print("nothing there:", coordinator_answers("127.0.0.1", port, 0.5))
service = _jax.get_distributed_runtime_service(f"127.0.0.1:{port}", 2)
print("coordinator:", coordinator_answers("127.0.0.1", port, 2.0))
service.shutdown()
'''


def test_the_coordinator_probe_tells_jax_s_coordinator_from_a_port_holder(
        jax_python: str) -> None:
    """start.coordinator_answers, which tasks other than 0 wait on (gRPC's 1-s reconnect
    backoff avoided), on the installed JAX: its coordinator sends its HTTP/2 SETTINGS frame
    first; a socket that only holds the port (the exchange's under 'auto') is silent, and a
    closed port refuses."""
    p = run(jax_python, SPEAKS_FIRST, timeout=100)
    assert p.returncode == 0, p.stderr[-3000:]
    assert p.stdout.splitlines()[-3:] == ["silent socket: False", "nothing there: False",
                                         "coordinator: True"], p.stdout
