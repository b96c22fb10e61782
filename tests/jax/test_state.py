"""mpi_resolver.jax.state in .venv-jax's Python, one process, no cluster: a training state
(a pytree of JAX arrays, NumPy arrays and Python numbers) to named arrays and back with the
same values, types and placement, and each way a checkpoint may not fit the state refused
with the leaf and the fix named."""

from __future__ import annotations

import json

import pytest

from tests.jax.test_edge import run

pytestmark = pytest.mark.jax

ROUND_TRIP = '''
import json
import jax, jax.numpy as jnp, numpy as np
from mpi_resolver.jax.state import PATHS_KEY, named_arrays, restored
state = {"params": {"w": jnp.arange(6.0).reshape(2, 3), "b": jnp.zeros(3, jnp.int32)},
         "opt": (np.ones(2, np.float16), 7, 0.5)}
arrays = named_arrays(state)
zero = jax.tree_util.tree_map(lambda x: x * 0, state)
back = restored(zero, arrays, "ckpt")
print(json.dumps({
    "names": sorted(arrays), "paths": arrays[PATHS_KEY].tolist(),
    "w": np.asarray(back["params"]["w"]).tolist(), "b_dtype": str(back["params"]["b"].dtype),
    "b_jax": isinstance(back["params"]["b"], jax.Array),
    "same_sharding": back["params"]["w"].sharding == state["params"]["w"].sharding,
    "opt": [type(back["opt"][0]).__name__, str(back["opt"][0].dtype), back["opt"][1],
            type(back["opt"][1]).__name__, back["opt"][2]]}))
'''


def test_a_state_round_trips(jax_python: str) -> None:
    p = run(jax_python, ROUND_TRIP)
    assert p.returncode == 0, p.stderr[-3000:]
    got = json.loads(p.stdout.strip().splitlines()[-1])
    assert got["names"] == ["__paths__", "s0", "s1", "s2", "s3", "s4"]
    assert got["paths"] == ["['opt'][0]", "['opt'][1]", "['opt'][2]", "['params']['b']",
                            "['params']['w']"]
    assert got["w"] == [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]]
    assert got["b_dtype"] == "int32" and got["b_jax"] and got["same_sharding"]
    assert got["opt"] == ["ndarray", "float16", 7, "int", 0.5]


MISFIT = '''
import jax.numpy as jnp, numpy as np
from mpi_resolver import ResolutionError
from mpi_resolver.jax.state import named_arrays, restored
saved = named_arrays({"w": jnp.zeros((2, 3)), "b": jnp.zeros(3)})
try:
    restored({template}, saved, "ck/ckpt-00000009.npz")
    print("RESTORED")
except ResolutionError as e:
    print("REFUSED", e)
'''


@pytest.mark.parametrize("template, says", [
    pytest.param('{"w": jnp.zeros((2, 3)), "b": jnp.zeros(3)}', "RESTORED", id="fits"),
    pytest.param('{"w": jnp.zeros((3, 3)), "b": jnp.zeros(3)}',
                 "(['w'] is float32[2, 3] there, float32[3, 3] here)", id="another shape"),
    pytest.param('{"w": jnp.zeros((2, 3)), "b": jnp.zeros(3, jnp.int32)}',
                 "(['b'] is float32[3] there, int32[3] here)", id="another type"),
    pytest.param('{"w": jnp.zeros((2, 3)), "b": jnp.zeros(3), "c": jnp.zeros(1)}',
                 "the checkpoint has ['w'] where this state has ['c']", id="a leaf more"),
    pytest.param('{"w": jnp.zeros((2, 3))}',
                 "the checkpoint has ['b'] where this state has ['w']", id="a leaf fewer"),
    pytest.param('{"w": jnp.zeros((2, 3)), "b": jnp.zeros(3), "x": jnp.zeros(1)}',
                 "the checkpoint has 2 leaves, this state 3", id="a leaf more at the end"),
])
def test_a_checkpoint_that_does_not_fit_is_refused(jax_python: str, template: str,
                                                   says: str) -> None:
    p = run(jax_python, MISFIT.replace("{template}", template))
    assert p.returncode == 0, p.stderr[-3000:]
    assert says in p.stdout, p.stdout
    if says != "RESTORED":
        assert p.stdout.startswith("REFUSED ck/ckpt-00000009.npz does not fit this training "
                                   "state") and "another model or optimizer" in p.stdout


ACROSS = '''
import numpy as np
from mpi_resolver import ResolutionError
from mpi_resolver.jax.state import named_arrays

class AcrossProcesses:  # a jax.Array of which this process holds a part only
    is_fully_addressable = False
    sharding = "NamedSharding(mesh, P('data'))"
    def __init__(self, replicated):
        self.is_fully_replicated = replicated
    def addressable_data(self, index):
        return np.full(2, 7.0)

print("replicated:", named_arrays({"w": AcrossProcesses(True)})["s0"].tolist())
try:
    named_arrays({"w": AcrossProcesses(False)})
except ResolutionError as e:
    print("REFUSED", e)
'''


def test_state_across_processes_replicated_is_copied_sharded_is_refused(jax_python: str
                                                                        ) -> None:
    """A leaf no process holds whole: replicated (data parallelism), this process's copy is
    saved; sharded across processes, refused with the leaf and what to use instead."""
    p = run(jax_python, ACROSS)
    assert p.returncode == 0, p.stderr[-3000:]
    lines = p.stdout.splitlines()
    assert lines[0] == "replicated: [7.0, 7.0]", p.stdout
    assert lines[1].startswith("REFUSED state ['w'] is sharded across processes "
                               "(NamedSharding(mesh, P('data'))): mpi_resolver.jax saves "
                               "replicated state") and "Orbax" in lines[1], p.stdout
