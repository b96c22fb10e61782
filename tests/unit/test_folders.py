"""The package's folders: one concern each, each saying what it owns and what it may import
(the import contract itself is lint-imports', tests/test_release.py), and tests/unit mirrors
them."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "mpi_resolver"
SUBPACKAGES = sorted(p.name for p in PACKAGE.iterdir() if (p / "__init__.py").exists())


def test_the_top_holds_the_folders_and_few_files():
    """The folders, the options every layer above reads, and the package's own files."""
    # Sources and data only: mutmut's copy (mutants/) keeps its notes beside each module.
    files = sorted(p.name for p in PACKAGE.iterdir()
                   if p.is_file() and p.suffix in (".py", ".typed"))
    assert files == ["__init__.py", "__main__.py", "options.py", "py.typed"], files
    assert SUBPACKAGES == ["cli", "core", "exchange", "gpus", "jax", "launch", "long_jobs",
                           "network", "placement", "rehearsal", "resolve",
                           "tensorflow"], SUBPACKAGES


@pytest.mark.parametrize("name", SUBPACKAGES)
def test_each_folder_says_what_it_owns_and_may_import(name):
    doc = ast.get_docstring(ast.parse((PACKAGE / name / "__init__.py").read_text())) or ""
    assert "May import" in doc or "may import" in doc, (name, doc)
    assert len(doc.split()) >= 40, (name, doc)


def test_tests_unit_mirrors_the_folders():
    folders = sorted(p.name for p in (ROOT / "tests" / "unit").iterdir()
                     if (p / "__init__.py").exists())
    assert folders == SUBPACKAGES


#: Modules without a test file of their own, and the test that covers each (the module's
#: name appears in it): edges run under mpirun, srun or TensorFlow, and small parts tested
#: with the part that uses them.
ELSEWHERE = {
    "cli/plot.py": "tests/unit/cli/test_report.py",
    "cli/story_args.py": "tests/unit/cli/test_report.py",
    "jax/start.py": "tests/jax/test_edge.py",
    "jax/detection.py": "tests/jax/test_gpus.py",
    "jax/long_jobs.py": "tests/jax/test_long_job_alone.py",
    "jax/coordinator.py": "tests/jax/test_long_jobs.py",
    "jax/state.py": "tests/jax/test_state.py",
    "jax/orbax_checkpoints.py": "tests/jax/test_long_job_alone.py",
    "jax/restoring.py": "tests/jax/test_long_job_alone.py",
    "jax/termination.py": "tests/jax/test_edge.py",
    "jax/keras_job.py": "tests/jax/test_long_job_alone.py",
    "jax/local_parts.py": "tests/jax/test_local_parts.py",
    "jax/tier_saves.py": "tests/jax/test_local_tier_alone.py",
    "rehearsal/jax_deep.py": "tests/jax/test_deep.py",
    "rehearsal/checkpoint_report.py": "tests/unit/rehearsal/test_checkpoint_check.py",
    "cli/args.py": "tests/unit/cli/test_main.py",
    "cli/step_run.py": "tests/unit/cli/test_supervise.py",
    "cli/supervise_requeue.py": "tests/unit/cli/test_supervise.py",
    "core/errors.py": "tests/unit/test_bad_input.py",
    "exchange/transport.py": "tests/unit/exchange/test_collectives.py",
    "exchange/part_link.py": "tests/test_part_link.py",
    "gpus/notes.py": "tests/unit/gpus/test_allocation.py",
    "network/address_lookup.py": "tests/unit/placement/test_addresses.py",
    "network/address_names.py": "tests/unit/placement/test_addresses.py",
    "network/host_addresses.py": "tests/unit/rehearsal/test_connect_probe.py",
    "long_jobs/disposition.py": "tests/unit/long_jobs/test_watcher.py",
    "long_jobs/backstop.py": "tests/unit/long_jobs/test_step_watchdog.py",
    "long_jobs/inbox.py": "tests/unit/long_jobs/test_local_saves.py",
    "tensorflow/keras_callback.py": "tests/tf/test_preemption.py",
    "tensorflow/checkpoints.py": "tests/tf/test_periodic.py",
    "tensorflow/termination_config.py": "tests/tf/test_preemption.py",
    "tensorflow/quirks.py": "tests/tf/test_tf_quirks.py",
    "tensorflow/watchdog_callback.py": "tests/tf/test_watchdog_callback.py",
    "tensorflow/coordinator.py": "tests/tf/test_periodic.py",
    "tensorflow/handler.py": "tests/tf/test_periodic.py",
    "tensorflow/handler_setup.py": "tests/tf/test_periodic.py",
    "tensorflow/saver.py": "tests/tf/test_background_saves.py",
    "tensorflow/snapshot.py": "tests/tf/test_snapshot.py",
    "tensorflow/local_parts.py": "tests/tf/test_local_parts.py",
    "tensorflow/tier.py": "tests/tf/test_tier.py",
    "rehearsal/checkpoint_files.py": "tests/unit/rehearsal/test_checkpoint_check.py",
    "rehearsal/checkpoint_probe.py": "tests/unit/rehearsal/test_checkpoint_check.py",
    "rehearsal/deep_tf.py": "tests/tf/test_deep.py",
    "resolve/tf_resolver.py": "tests/tf/test_early_cuda.py",
}


@pytest.mark.parametrize("name", SUBPACKAGES)
def test_each_module_has_its_test_file_or_the_test_that_covers_it_is_named(name):
    """``folder/x.py`` has ``tests/unit/folder/test_x.py``, or ELSEWHERE names the test that
    covers it (so that a module without tests is a decision, not an oversight)."""
    for module in sorted((PACKAGE / name).glob("*.py")):
        if module.name == "__init__.py":
            continue
        key = f"{name}/{module.name}"
        own = ROOT / "tests" / "unit" / name / f"test_{module.stem}.py"
        assert own.exists() != (key in ELSEWHERE), (key, "needs a test file or an ELSEWHERE "
                                                    "entry, not both")
        if key in ELSEWHERE:
            text = (ROOT / ELSEWHERE[key]).read_text()
            assert module.stem in text, (key, ELSEWHERE[key])


def test_every_module_named_elsewhere_exists():
    assert all((PACKAGE / key).exists() for key in ELSEWHERE), ELSEWHERE
