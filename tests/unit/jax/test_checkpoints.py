"""mpi_resolver.jax.checkpoints, the long JAX job's files, as tables: the names, which go when
``keep`` are kept, a save written whole (no part file left, an older writer's part removed),
the newest that reads whole found again (torn ones skipped with a warning naming them), and
the removal. NumPy only: runs in the suite's .venv."""

from __future__ import annotations

import os
import re
from pathlib import Path

import numpy as np
import pytest

from mpi_resolver.core.errors import ResolutionError
from mpi_resolver.jax.checkpoints import (STEP_KEY, StepCheckpoints, checkpoint_name, step_of,
                                          to_remove)
from mpi_resolver.long_jobs.manifest import MANIFEST, manifest_for, write_manifest

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("name, step", [
    ("ckpt-00000500.npz", 500),
    ("ckpt-0.npz", 0),
    ("ckpt-123456789.npz", 123456789),
    ("ckpt-00000500.npz.77.part", None),
    ("ckpt-.npz", None),
    ("ckpt-12.npy", None),
    ("xckpt-12.npz", None),
    (MANIFEST, None),
])
def test_step_of(name: str, step: object) -> None:
    assert step_of(name) == step


def test_checkpoint_name_round_trips() -> None:
    assert checkpoint_name(500) == "ckpt-00000500.npz"
    assert step_of(checkpoint_name(7)) == 7


@pytest.mark.parametrize("steps, keep, gone", [
    ([], 2, []),
    ([5], 2, []),
    ([5, 10], 2, []),
    ([5, 10, 15], 2, [5]),
    ([15, 5, 10, 20], 2, [5, 10]),
    ([5, 10, 15], 1, [5, 10]),
    ([5, 10, 15], 3, []),
    ([5, 10, 15], 4, []),
    ([5, 10, 15], 0, [5, 10, 15]),
])
def test_to_remove_keeps_the_newest(steps: list, keep: int, gone: list) -> None:
    assert to_remove(steps, keep) == gone


def arrays(value: float) -> dict:
    return {"s0": np.full((2, 3), value, dtype=np.float32), "s1": np.arange(4)}


def test_save_keeps_the_last_k_and_reads_back(tmp_path: Path) -> None:
    files = StepCheckpoints(str(tmp_path / "ck"), keep=2)
    for step in (3, 6, 9):
        assert 0.0 <= files.save(step, arrays(step)) < 30.0  # its own seconds
    assert files.steps() == [6, 9]
    assert sorted(os.listdir(tmp_path / "ck")) == ["ckpt-00000006.npz", "ckpt-00000009.npz"]
    loaded = files.load(9)
    assert STEP_KEY not in loaded and sorted(loaded) == ["s0", "s1"]
    assert np.array_equal(loaded["s0"], arrays(9)["s0"])
    assert np.array_equal(loaded["s1"], np.arange(4))


def test_an_older_writers_part_file_goes_at_the_next_save(tmp_path: Path) -> None:
    files = StepCheckpoints(str(tmp_path), keep=2)
    (tmp_path / "ckpt-00000004.npz.12345.part").write_bytes(b"cut short")
    (tmp_path / "notes.txt").write_text("the user's")
    files.save(5, arrays(5))
    assert sorted(os.listdir(tmp_path)) == ["ckpt-00000005.npz", "notes.txt"]


def truncate(path: Path, keep_bytes: int) -> None:
    path.write_bytes(path.read_bytes()[:keep_bytes])


@pytest.mark.parametrize("damage, expected_step, says", [
    pytest.param({}, 9, [], id="all whole: the newest"),
    pytest.param({9: 100}, 6, ["checkpoint ckpt-00000009.npz in", "does not restore",
                               "resuming from ckpt-00000006.npz"], id="newest cut short"),
    pytest.param({9: 0}, 6, ["ckpt-00000009.npz"], id="newest empty"),
    pytest.param({9: 100, 6: 50}, 3, ["ckpt-00000009.npz", "ckpt-00000006.npz"],
                 id="two torn"),
    pytest.param({9: 100, 6: 50, 3: 10}, None, ["no checkpoint in", "restores",
                                                "training starts from step 0"],
                 id="none whole"),
])
def test_restore_newest_skips_torn_ones(tmp_path: Path, damage: dict, expected_step: object,
                                        says: list) -> None:
    files = StepCheckpoints(str(tmp_path), keep=3)
    for step in (3, 6, 9):
        files.save(step, arrays(step))
    for step, size in damage.items():
        truncate(Path(files.path(step)), size)
    step, found, warnings = files.restore_newest()
    assert step == expected_step
    text = " | ".join(warnings)
    assert all(f" in {tmp_path}" in w for w in warnings), warnings
    assert all(s in text for s in says), text
    assert len(warnings) == (1 if expected_step is None and damage else len(damage))
    if expected_step is None:
        assert found is None
    else:
        assert found is not None and float(found["s0"][0, 0]) == expected_step


def test_restore_newest_of_nothing(tmp_path: Path) -> None:
    assert StepCheckpoints(str(tmp_path / "none"), 2).restore_newest() == (None, None, [])


def test_a_file_renamed_to_another_step_is_refused(tmp_path: Path) -> None:
    files = StepCheckpoints(str(tmp_path), keep=2)
    files.save(4, arrays(4))
    os.rename(files.path(4), files.path(8))
    with pytest.raises(ResolutionError, match="ckpt-00000008.npz says step 4, not 8"):
        files.load(8)
    step, _, warnings = files.restore_newest()
    assert step is None and "says step 4" in warnings[0]


def test_remove_takes_the_checkpoints_only(tmp_path: Path) -> None:
    """Training completed: the checkpoints go; the manifest (which says so) and the user's
    files stay."""
    files = StepCheckpoints(str(tmp_path), keep=2)
    files.save(1, arrays(1))
    write_manifest(str(tmp_path), manifest_for("12", 1, {}))
    (tmp_path / "notes.txt").write_text("the user's")
    files.remove()
    assert sorted(os.listdir(tmp_path)) == ["mpi_resolver.json", "notes.txt"]
    files.remove()  # again: nothing there, no error


@pytest.mark.parametrize("entries, says", [
    pytest.param({"s0": np.array([{"a": 1}], dtype=object)}, "Object arrays cannot be loaded",
                 id="a pickled object: never unpickled"),
    pytest.param({"s0": np.ones(2)}, "ckpt-00000003.npz says step None, not 3",
                 id="no step inside"),
])
def test_a_file_that_is_not_the_package_s_checkpoint_is_refused(tmp_path: Path, entries: dict,
                                                                says: str) -> None:
    files = StepCheckpoints(str(tmp_path), keep=2)
    with open(files.path(3), "wb") as f:
        np.savez(f, **entries)
    with pytest.raises((ValueError, ResolutionError), match=re.escape(says)):
        files.load(3)
    assert files.restore_newest()[0] is None


def test_an_unreadable_directory_is_named(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("not a directory")
    with pytest.raises(ResolutionError, match=re.escape(
            f"checkpoint directory {tmp_path / 'file' / 'ck'} cannot be read (Not a directory): "
            "give a directory every node can read and write")):
        StepCheckpoints(str(tmp_path / "file" / "ck"), 2).steps()
