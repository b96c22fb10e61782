"""mpi_resolver.jax.npz_checkpoints, the earlier format's files read back (a job started before
Orbax resumes from them once), as tables: the names, the steps on disk among other files, a
file read whole, one that says another step or is not the package's refused, an unreadable
directory named, and the removal. NumPy only: runs in the suite's .venv."""

from __future__ import annotations

import os
import re
from pathlib import Path

import numpy as np
import pytest

from mpi_resolver.core.errors import ResolutionError
from mpi_resolver.jax.npz_checkpoints import STEP_KEY, NpzCheckpoints, checkpoint_name, step_of
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


def arrays(value: float) -> dict:
    return {"s0": np.full((2, 3), value, dtype=np.float32), "s1": np.arange(4)}


def earlier_save(directory: Path, step: int, entries: dict) -> str:
    """Writes the checkpoint at ``step`` as the earlier release did; returns its path."""
    directory.mkdir(parents=True, exist_ok=True)
    path = str(directory / checkpoint_name(step))
    with open(path, "wb") as f:
        np.savez(f, **{STEP_KEY: np.int64(step), **entries})
    return path


def test_the_steps_among_other_files_and_a_file_read_back(tmp_path: Path) -> None:
    files = NpzCheckpoints(str(tmp_path / "ck"))
    assert files.steps() == []  # no directory yet
    for step in (9, 3, 6):
        earlier_save(tmp_path / "ck", step, arrays(step))
    (tmp_path / "ck" / "ckpt-00000004.npz.12345.part").write_bytes(b"cut short")
    (tmp_path / "ck" / "12").mkdir()  # an Orbax checkpoint beside them
    assert files.steps() == [3, 6, 9]
    assert files.path(9) == str(tmp_path / "ck" / "ckpt-00000009.npz")
    loaded = files.load(9)
    assert STEP_KEY not in loaded and sorted(loaded) == ["s0", "s1"]
    assert np.array_equal(loaded["s0"], arrays(9)["s0"])
    assert np.array_equal(loaded["s1"], np.arange(4))


def test_a_file_cut_short_does_not_load(tmp_path: Path) -> None:
    path = Path(earlier_save(tmp_path, 3, arrays(3)))
    path.write_bytes(path.read_bytes()[:100])
    with pytest.raises(Exception):  # noqa: B017 - NumPy's or zipfile's: torn
        NpzCheckpoints(str(tmp_path)).load(3)


def test_a_file_renamed_to_another_step_is_refused(tmp_path: Path) -> None:
    files = NpzCheckpoints(str(tmp_path))
    os.rename(earlier_save(tmp_path, 4, arrays(4)), files.path(8))
    with pytest.raises(ResolutionError, match="ckpt-00000008.npz says step 4, not 8"):
        files.load(8)


def test_remove_takes_the_checkpoints_only(tmp_path: Path) -> None:
    """Training completed: the checkpoints go; the manifest (which says so) and the user's
    files stay."""
    files = NpzCheckpoints(str(tmp_path))
    earlier_save(tmp_path, 1, arrays(1))
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
    files = NpzCheckpoints(str(tmp_path))
    with open(files.path(3), "wb") as f:
        np.savez(f, **entries)
    with pytest.raises((ValueError, ResolutionError), match=re.escape(says)):
        files.load(3)


def test_an_unreadable_directory_is_named(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("not a directory")
    with pytest.raises(ResolutionError, match=re.escape(
            f"checkpoint directory {tmp_path / 'file' / 'ck'} cannot be read (Not a directory): "
            "give a directory every node can read and write")):
        NpzCheckpoints(str(tmp_path / "file" / "ck")).steps()
