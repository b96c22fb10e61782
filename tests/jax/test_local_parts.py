"""mpi_resolver.jax.local_parts in .venv-jax's Python, one process with four CPU devices: a
state (an array sharded over the devices, one replicated, NumPy arrays, Python numbers) to
this process's part and back, each region once, the same values, types and shardings; the
part packed straight into a file, the same bytes (one not finished removed); a part
that does not fit the state, or is no whole part, refused, naming the leaf. Parts across
processes and nodes: tests/jax/test_local_tier.py."""

from __future__ import annotations

import json

import pytest

from tests.jax.test_edge import run

pytestmark = pytest.mark.jax

FOUR = {"XLA_FLAGS": "--xla_force_host_platform_device_count=4"}

ROUND_TRIP = '''
import json
import jax, jax.numpy as jnp, numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
from mpi_resolver.jax.local_parts import from_part, part_bytes
mesh = Mesh(np.array(jax.devices()).reshape(2, 2), ("a", "b"))
rows = NamedSharding(mesh, P("a"))  # 2 regions, each on 2 devices
w = jax.device_put(jnp.arange(12.0).reshape(4, 3), rows)
state = {"w": w, "r": jnp.ones(3, jnp.int32), "opt": (np.full(2, 3, np.float16), 7, 0.5, True)}
blob = part_bytes(state)
zero = {"w": w * 0, "r": state["r"] * 0, "opt": (np.zeros(2, np.float16), 0, 0.0, False)}
back = from_part(blob, zero)
from mpi_resolver.jax.local_parts import packed_file, part_snapshot, unpacked
import os, sys, tempfile
import mpi_resolver.jax.local_parts as parts
names = sorted(unpacked(blob))
where = tempfile.mkdtemp()
made = packed_file(part_snapshot(state), os.path.join(where, "p.part"))
same = open(made.path, "rb").read() == bytes(blob)
try:
    packed_file(part_snapshot(state), os.path.join(where, "missing", "p.part"))
except OSError:
    pass
def full(data):
    raise OSError(28, "No space left on device")
parts._flat = full  # the header written, then the disk full
try:
    packed_file(part_snapshot(state), os.path.join(where, "q.part"))
except OSError as e:
    said = str(e)
left = sorted(os.listdir(where))
print(json.dumps({
    "names": names, "w": np.asarray(back["w"]).tolist(),
    "w_sharding": back["w"].sharding == rows, "r": np.asarray(back["r"]).tolist(),
    "r_dtype": str(back["r"].dtype),
    "opt": [type(x).__name__ for x in back["opt"]], "values": [back["opt"][0].tolist(),
                                                             *back["opt"][1:]],
    "file": [made.path == os.path.join(where, "p.part"), same, said, left]}))
'''


def test_a_state_round_trips_each_region_once(jax_python: str) -> None:
    p = run(jax_python, ROUND_TRIP, **FOUR)
    assert p.returncode == 0, p.stderr[-3000:]
    got = json.loads(p.stdout.strip().splitlines()[-1])
    # leaves in order: opt's four, r, w; w's two regions once each, r's one region once
    assert got["names"] == ["0", "1", "2", "3", "4.0", "5.0", "5.1", "index"]
    assert got["w"] == [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0], [6.0, 7.0, 8.0], [9.0, 10.0, 11.0]]
    assert got["w_sharding"] and got["r"] == [1, 1, 1] and got["r_dtype"] == "int32"
    assert got["opt"] == ["ndarray", "int", "float", "bool"]
    assert got["values"] == [[3.0, 3.0], 7, 0.5, True]
    # packed straight into a file: the same bytes; a file not finished is removed
    assert got["file"] == [True, True, "[Errno 28] No space left on device", ["p.part"]]


MISFIT = '''
import jax, jax.numpy as jnp, numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
from mpi_resolver.jax.local_parts import PartMisfit, from_part, part_bytes
mesh = Mesh(np.array(jax.devices()), ("a",))
saved = {"w": jnp.zeros((4, 3)), "n": 7, "v": np.zeros(2)}
blob = part_bytes(saved)
for name, state in [
    ("fewer", {"w": jnp.zeros((4, 3)), "n": 7}),
    ("shape", {"w": jnp.zeros((4, 2)), "n": 7, "v": np.zeros(2)}),
    ("dtype", {"w": jnp.zeros((4, 3), jnp.int32), "n": 7, "v": np.zeros(2)}),
    ("array", {"w": jnp.zeros((4, 3)), "n": jnp.zeros(()), "v": np.zeros(2)}),
    ("number", {"w": jnp.zeros((4, 3)), "n": 7, "v": np.zeros(3)}),
    ("shards", {"w": jax.device_put(jnp.zeros((4, 3)), NamedSharding(mesh, P("a"))),
                "n": 7, "v": np.zeros(2)}),
]:
    try:
        from_part(blob, state)
        print(name, "restored")
    except PartMisfit as e:
        print(name, "|", e)
for name, bad in [("torn", b"torn"), ("cut", blob[:-1]), ("header", blob[:40])]:
    try:
        from_part(bad, saved)
        print(name, "restored")
    except PartMisfit as e:
        print(name, "|", str(e).split(" (")[0])
back = from_part(blob, saved)
back["v"][0] = 1.0  # the caller's own array: writable
print("whole |", float(back["v"].sum()), back["n"])
'''


def test_a_part_that_does_not_fit_is_refused_naming_the_leaf(jax_python: str) -> None:
    p = run(jax_python, MISFIT, **FOUR)
    assert p.returncode == 0, p.stderr[-3000:]
    assert p.stdout.splitlines() == [
        "fewer | it holds 3 arrays and numbers, the state 2",
        "shape | ['w'] is (4, 3) float32 there, (4, 2) float32 in the state",
        "dtype | ['w'] is (4, 3) float32 there, (4, 3) int32 in the state",
        "array | ['n'] is not an array there, () float32 in the state",
        "number | ['v'] differs in the state",
        "shards | ['w'] was held in other shards by this process",
        "torn | it is not a part of mpi_resolver's node-local tier",
        "cut | it is not whole",
        "header | it is not whole",
        "whole | 1.0 7",
    ], p.stderr[-3000:]
