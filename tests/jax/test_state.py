"""mpi_resolver.jax.state in .venv-jax's Python, one process, no cluster: the earlier format's
named arrays put back into a training state (a pytree of JAX arrays, NumPy arrays and Python
numbers) with the same values, types and placement, and each way a checkpoint may not fit the
state refused with the leaf and the fix named: by the earlier format's reader (restored) and
by the rule set before Orbax reads a checkpoint (misfit, on Orbax's own metadata). A state
sharded across processes, saved and restored: tests/jax/test_long_jobs.py."""

from __future__ import annotations

import json

import pytest

from tests.jax.test_edge import run

pytestmark = pytest.mark.jax

ROUND_TRIP = '''
import json
import jax, jax.numpy as jnp, numpy as np
from mpi_resolver.jax.state import PATHS_KEY, restored
state = {"params": {"w": jnp.arange(6.0).reshape(2, 3), "b": jnp.zeros(3, jnp.int32)},
         "opt": (np.ones(2, np.float16), 7, 0.5)}
def named_arrays(tree):  # as the earlier release wrote them
    flat, _ = jax.tree_util.tree_flatten_with_path(tree)
    arrays = {f"s{i}": np.asarray(leaf) for i, (_, leaf) in enumerate(flat)}
    arrays[PATHS_KEY] = np.array([jax.tree_util.keystr(p) for p, _ in flat], dtype=np.str_)
    return arrays
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
import os, sys, tempfile
import jax, jax.numpy as jnp, numpy as np
from mpi_resolver import ResolutionError
from mpi_resolver.jax.orbax_checkpoints import OrbaxCheckpoints, serialized
from mpi_resolver.jax.state import PATHS_KEY, misfit, restored
saved = {"w": jnp.zeros((2, 3)), "b": jnp.zeros(3), "n": 7}
template = {template}
flat, _ = jax.tree_util.tree_flatten_with_path(saved)  # the earlier format, as it was written
arrays = {f"s{i}": np.asarray(leaf) for i, (_, leaf) in enumerate(flat)}
arrays[PATHS_KEY] = np.array([jax.tree_util.keystr(p) for p, _ in flat], dtype=np.str_)
try:
    restored(template, arrays, "ck/9")
    print("EARLIER RESTORED")
except ResolutionError as e:
    print("EARLIER REFUSED", e)
files = OrbaxCheckpoints(tempfile.mkdtemp(), keep=1, background=False)
files.open()
files.start(9, saved)
files.wait()
why = misfit(files.saved_tree(9), serialized(template), "ck/9")
print("ORBAX", "RESTORED" if why is None else f"REFUSED {why}")
'''


@pytest.mark.parametrize("template, says", [
    pytest.param('{"w": jnp.zeros((2, 3)), "b": jnp.zeros(3), "n": 0}', "RESTORED", id="fits"),
    pytest.param('{"w": jnp.zeros((2, 3)), "b": np.zeros(3, np.float32), "n": 0}', "RESTORED",
                 id="NumPy where JAX was: fits"),
    pytest.param('{"w": jnp.zeros((3, 3)), "b": jnp.zeros(3), "n": 0}',
                 "(['w'] is float32[2, 3] there, float32[3, 3] here)", id="another shape"),
    pytest.param('{"w": jnp.zeros((2, 3)), "b": jnp.zeros(3, jnp.int32), "n": 0}',
                 "(['b'] is float32[3] there, int32[3] here)", id="another type"),
    pytest.param('{"w": jnp.zeros((2, 3)), "b": jnp.zeros(3), "n": jnp.zeros(2)}',
                 "(['n'] is int64[] there, float32[2] here)", id="an array where a number was"),
    pytest.param('{"w": jnp.zeros((2, 3)), "b": jnp.zeros(3), "c": jnp.zeros(1), "n": 0}',
                 "the checkpoint has ['n'] where this state has ['c']", id="a leaf more"),
    pytest.param('{"w": jnp.zeros((2, 3)), "n": 0}',
                 "the checkpoint has ['b'] where this state has ['n']", id="a leaf fewer"),
    pytest.param('{"w": jnp.zeros((2, 3)), "b": jnp.zeros(3), "n": 0, "x": jnp.zeros(1)}',
                 "the checkpoint has 3 leaves, this state 4", id="a leaf more at the end"),
])
def test_a_checkpoint_that_does_not_fit_is_refused(jax_python: str, template: str,
                                                   says: str) -> None:
    """The same table through both rules: the earlier format's reader and Orbax's metadata
    (Orbax itself would cast another type silently)."""
    p = run(jax_python, MISFIT.replace("{template}", template))
    assert p.returncode == 0, p.stderr[-3000:]
    lines = [x for x in p.stdout.splitlines() if x.startswith(("EARLIER", "ORBAX"))]
    assert len(lines) == 2, p.stdout
    for line in lines:
        assert says in line, (line, says)
        if says != "RESTORED":
            assert " REFUSED ck/9 does not fit this training state" in line and \
                "another model or optimizer" in line, line
