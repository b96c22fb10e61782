"""Bad input: every case gives a ResolutionError that names the variable or argument.

Never a bare IndexError/KeyError/TypeError/AssertionError/ZeroDivisionError, never a wrong
ClusterSpec. Runs the pure resolution (what MPIClusterResolver and the command line run).
"""

from __future__ import annotations

import re
from typing import Any, Dict

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from mpi_resolver.core.errors import FormatError, MismatchError, ResolutionError
from mpi_resolver.options import make_options
from mpi_resolver.resolve.resolution import resolve_job
from tests.unit.jobs import run_world

pytestmark = pytest.mark.unit

GOOD = {"SLURM_PROCID": "1", "SLURM_STEP_NUM_TASKS": "4", "SLURM_STEP_NODELIST": "n[1-2]",
        "SLURM_STEP_TASKS_PER_NODE": "2(x2)", "CUDA_VISIBLE_DEVICES": "0,1"}
DROP = object()


def resolve_slurm(env: Dict[str, str], **kwargs: Any):
    opts = make_options(source="slurm", **kwargs)
    return resolve_job(opts, env, probe=lambda: (2, False))


def env_with(**changes: Any) -> Dict[str, str]:
    env = dict(GOOD)
    for key, value in changes.items():
        if value is DROP:
            env.pop(key, None)
        else:
            env[key] = value
    return env


ENV_CASES = [
    # (what is wrong, env, error type, words the message must hold)
    ("SLURM_PROCID missing", env_with(SLURM_PROCID=DROP), ResolutionError, "SLURM_PROCID"),
    ("SLURM_PROCID empty", env_with(SLURM_PROCID=""), FormatError, "SLURM_PROCID"),
    ("SLURM_PROCID not a number", env_with(SLURM_PROCID="abc"), FormatError, "SLURM_PROCID"),
    ("SLURM_PROCID negative", env_with(SLURM_PROCID="-1"), FormatError, "SLURM_PROCID"),
    ("SLURM_PROCID out of range", env_with(SLURM_PROCID="4"), ResolutionError,
     "SLURM_PROCID=4 is outside"),
    ("SLURM_STEP_NUM_TASKS missing", env_with(SLURM_STEP_NUM_TASKS=DROP), ResolutionError,
     "SLURM_STEP_NUM_TASKS"),
    ("SLURM_STEP_NUM_TASKS zero", env_with(SLURM_STEP_NUM_TASKS="0"), FormatError,
     "SLURM_STEP_NUM_TASKS"),
    ("SLURM_STEP_NUM_TASKS malformed", env_with(SLURM_STEP_NUM_TASKS="4x"), FormatError,
     "SLURM_STEP_NUM_TASKS"),
    ("task counts do not add up", env_with(SLURM_STEP_NUM_TASKS="5"), FormatError,
     "SLURM_STEP_TASKS_PER_NODE"),
    ("SLURM_STEP_NODELIST missing", env_with(SLURM_STEP_NODELIST=DROP), ResolutionError,
     "SLURM_STEP_NODELIST"),
    ("SLURM_STEP_NODELIST empty", env_with(SLURM_STEP_NODELIST=""), FormatError,
     "SLURM_STEP_NODELIST"),
    ("reversed range", env_with(SLURM_STEP_NODELIST="n[2-1]"), FormatError, "reversed"),
    ("unbalanced bracket", env_with(SLURM_STEP_NODELIST="n[1-2"), FormatError,
     "SLURM_STEP_NODELIST"),
    ("stray closing bracket", env_with(SLURM_STEP_NODELIST="n1-2]"), FormatError,
     "SLURM_STEP_NODELIST"),
    ("huge range", env_with(SLURM_STEP_NODELIST="n[0-99999999999]"), FormatError,
     "MAX_HOSTS"),
    ("node listed twice", env_with(SLURM_STEP_NODELIST="n1,n1"), FormatError, "twice"),
    ("nodelist and tasks-per-node of different lengths",
     env_with(SLURM_STEP_NODELIST="n[1-3]"), FormatError, "3 nodes"),
    ("SLURM_STEP_TASKS_PER_NODE missing", env_with(SLURM_STEP_TASKS_PER_NODE=DROP),
     ResolutionError, "SLURM_STEP_TASKS_PER_NODE"),
    ("SLURM_STEP_TASKS_PER_NODE malformed", env_with(SLURM_STEP_TASKS_PER_NODE="2(x)"),
     FormatError, "SLURM_STEP_TASKS_PER_NODE"),
    ("a node with 0 tasks", env_with(SLURM_STEP_TASKS_PER_NODE="0,4"), FormatError,
     "SLURM_STEP_TASKS_PER_NODE"),
    ("CUDA_VISIBLE_DEVICES malformed", env_with(CUDA_VISIBLE_DEVICES="zero,one"),
     FormatError, "CUDA_VISIBLE_DEVICES"),
    ("CUDA_VISIBLE_DEVICES repeats a GPU", env_with(CUDA_VISIBLE_DEVICES="1,1"),
     FormatError, "CUDA_VISIBLE_DEVICES"),
    ("SLURM_GTIDS malformed", env_with(SLURMD_NODENAME="n1", SLURM_GTIDS="0,x"),
     FormatError, "SLURM_GTIDS"),
    ("SLURMD_NODENAME contradicts the layout", env_with(SLURMD_NODENAME="n2"),
     MismatchError, "SLURMD_NODENAME=n2"),
    ("SLURM_GTIDS contradicts the layout",
     env_with(SLURMD_NODENAME="n1", SLURM_GTIDS="0,2"), MismatchError, "SLURM_GTIDS"),
    ("plane distribution cannot be placed from variables",
     env_with(SLURM_DISTRIBUTION="plane=2"), MismatchError, "SLURM_DISTRIBUTION"),
    # was a list of 999,999,999 GPU names built, and the rank stuck for minutes
    ("SLURM_GPUS_ON_NODE more than a node has",
     env_with(CUDA_VISIBLE_DEVICES=DROP, SLURM_GPUS_ON_NODE="999999999"), FormatError,
     "SLURM_GPUS_ON_NODE='999999999': more GPUs than a node can have"),
]


@pytest.mark.parametrize("what,env,error,words", ENV_CASES, ids=[c[0] for c in ENV_CASES])
def test_bad_slurm_variables(what, env, error, words):
    with pytest.raises(error) as info:
        resolve_slurm(env)
    assert words in str(info.value)
    assert isinstance(info.value, ResolutionError) and isinstance(info.value, RuntimeError)


ARG_CASES = [
    ("jobs do not add up", {"jobs": {"worker": 3}}, "jobs"),
    ("jobs empty", {"jobs": {}}, "jobs"),
    ("jobs with zero tasks", {"jobs": {"ps": 0, "worker": 4}}, "jobs['ps']"),
    ("jobs with a negative count", {"jobs": {"worker": -4}}, "jobs['worker']"),
    ("jobs with a fractional count", {"jobs": {"worker": 4.0}}, "jobs['worker']"),
    ("jobs with a bad name", {"jobs": {"my job": 4}}, "job name"),
    ("jobs not a dict", {"jobs": ["worker"]}, "jobs"),
    ("tasks_per_node names an unknown host", {"tasks_per_node": {"n1": 2, "n7": 2}},
     "tasks_per_node"),
    ("tasks_per_node zero", {"tasks_per_node": 0}, "tasks_per_node"),
    ("tasks_per_node not an int", {"tasks_per_node": "2"}, "tasks_per_node"),
    ("port above 65535", {"port_base": 65535}, "port_base"),
    ("port_base not an int", {"port_base": "8888"}, "port_base"),
    ("port_base zero", {"port_base": 0}, "port_base"),
    ("more GPUs per task than the node has", {"gpus_per_task": 2}, "gpus_per_task"),
    ("gpus_per_node negative", {"gpus_per_node": -1}, "gpus_per_node"),
    ("gpus_per_node not an int", {"gpus_per_node": "2"}, "gpus_per_node"),
    ("gpus_per_task not an int", {"gpus_per_task": 1.5}, "gpus_per_task"),
    ("timeout zero", {"timeout": 0}, "timeout"),
]


@pytest.mark.parametrize("what,kwargs,words", ARG_CASES, ids=[c[0] for c in ARG_CASES])
def test_bad_arguments(what, kwargs, words):
    with pytest.raises(ResolutionError) as info:
        resolve_slurm(dict(GOOD), **kwargs)
    assert words in str(info.value)


@pytest.mark.parametrize("host", ["", "bad host", "node1:8888", "n\x01", "nöde"])
def test_host_names_that_cannot_be_in_an_address(host):
    envs = [{"OMPI_COMM_WORLD_RANK": str(r), "OMPI_COMM_WORLD_SIZE": "2"} for r in range(2)]
    results = run_world(envs, ["good", host], source="mpi", gpus_per_node=0)
    for result in results:  # every rank says so
        assert isinstance(result, FormatError) and "host name of MPI rank 1" in str(result)


SLURM_VALUE = st.one_of(st.text(max_size=12),
                        st.text(alphabet="n[]0123456789-,()x", max_size=14))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@example(procid="0", tasks="60000", nodes="0", per_node="60000", visible=None)  # ports run out
@given(procid=SLURM_VALUE, tasks=SLURM_VALUE, nodes=SLURM_VALUE, per_node=SLURM_VALUE,
       visible=st.one_of(st.none(), SLURM_VALUE))
def test_random_slurm_variables_give_a_sound_spec_or_an_error_naming_the_variable(
        procid, tasks, nodes, per_node, visible):
    env = {"SLURM_PROCID": procid, "SLURM_STEP_NUM_TASKS": tasks,
           "SLURM_STEP_NODELIST": nodes, "SLURM_STEP_TASKS_PER_NODE": per_node}
    if visible is not None:
        env["CUDA_VISIBLE_DEVICES"] = visible
    try:
        res = resolve_slurm(env)
    except ResolutionError as e:
        text = str(e)
        if re.match(r"port_base=8888 with \d+ tasks on one node needs port \d+, above 65535",
                    text):
            return  # so many tasks on a node (SLURM_STEP_TASKS_PER_NODE) need a lower port
        assert any(f"{name}=" in text or f"{name}:" in text for name in env), text
        # Malformed values are FormatErrors; the one other error is a rank outside the step.
        assert isinstance(e, FormatError) or re.match(
            r"SLURM_PROCID=\d+ is outside the step's \d+ tasks", text), (type(e), text)
        return
    addresses = res.layout.addresses
    assert len(addresses) == int(tasks) and len(set(addresses)) == len(addresses)
    assert 0 <= res.rank < len(addresses)
