"""long_jobs.resume: Slurm's restart count, and the warning where a restarted job has no
checkpoint to resume from."""

from __future__ import annotations

import pytest

from mpi_resolver.long_jobs.resume import missing_checkpoint, restart_count, restore_newest

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("value, count", [(None, 0), ("0", 0), ("1", 1), (" 3 ", 3),
                                          ("x", 0), ("-1", 0)])
def test_restart_count(value, count):
    env = {} if value is None else {"SLURM_RESTART_COUNT": value}
    assert restart_count(env) == count


@pytest.mark.parametrize("restarts, found, warned", [
    pytest.param(None, None, False, id="a first run: nothing to resume"),
    pytest.param("0", None, False, id="restart count 0"),
    pytest.param("1", "/ckpt/chief/ckpt-1", False, id="restarted, a checkpoint found"),
    pytest.param("1", None, True, id="restarted, none found"),
])
def test_missing_checkpoint(restarts, found, warned):
    env = {"SLURM_JOB_ID": "12"}
    if restarts is not None:
        env["SLURM_RESTART_COUNT"] = restarts
    assert (missing_checkpoint(env, "/ckpt/chief", found) is not None) == warned


@pytest.mark.parametrize("restarts, ordinal", [("1", "2nd"), ("2", "3rd"), ("3", "4th"),
                                               ("10", "11th"), ("11", "12th"), ("12", "13th"),
                                               ("19", "20th"), ("20", "21st"), ("21", "22nd"),
                                               ("100", "101st"), ("110", "111th"),
                                               ("111", "112th"), ("112", "113th"),
                                               ("113", "114th"), ("130", "131st"),
                                               ("9", "10th"), ("8", "9th")])
def test_the_warning_says_which_run_it_is(restarts, ordinal):
    env = {"SLURM_JOB_ID": "12", "SLURM_RESTART_COUNT": restarts}
    assert missing_checkpoint(env, "/ckpt/chief", None) == (
        f"job 12 runs for the {ordinal} time (SLURM_RESTART_COUNT={restarts}), but /ckpt/chief "
        "holds no checkpoint: training starts from step 0. Was the directory removed, or does "
        "this run name another one than the first (a node-local path such as /tmp, a path "
        "with the job's step or run in it)?")


def test_the_warning_without_a_job_id():
    assert missing_checkpoint({"SLURM_RESTART_COUNT": "1"}, "d", None).startswith(
        "job ? runs for the 2nd time")


def test_an_array_task_is_named_as_slurm_names_it():
    env = {"SLURM_JOB_ID": "13", "SLURM_ARRAY_JOB_ID": "12", "SLURM_ARRAY_TASK_ID": "1",
           "SLURM_RESTART_COUNT": "1"}
    assert missing_checkpoint(env, "d", None).startswith("job 12_1 runs for the 2nd time")
    del env["SLURM_ARRAY_TASK_ID"]
    assert missing_checkpoint(env, "d", None).startswith("job 13 runs")


class Reader:
    """Stands for restoring a checkpoint: the prefixes in ``torn`` raise, the others restore;
    records what was tried."""

    def __init__(self, *torn: str) -> None:
        self.torn, self.tried = set(torn), []

    def __call__(self, prefix: str) -> None:
        self.tried.append(prefix)
        if prefix in self.torn:
            raise ValueError(f"Data loss: truncated record at 1024 in {prefix}.data\nmore")


D = "/ckpt/chief"


@pytest.mark.parametrize("prefixes, torn, restored, tried, warnings", [
    pytest.param([], (), None, [], [], id="nothing to restore: step 0, no word"),
    pytest.param([f"{D}/ckpt-6", f"{D}/ckpt-7"], (), f"{D}/ckpt-7", [f"{D}/ckpt-7"], [],
                 id="the newest"),
    pytest.param([f"{D}/ckpt-6", f"{D}/ckpt-7"], (f"{D}/ckpt-7",), f"{D}/ckpt-6",
                 [f"{D}/ckpt-7", f"{D}/ckpt-6"],
                 [f"checkpoint ckpt-7 in {D} does not restore (Data loss: truncated record at "
                  f"1024 in {D}/ckpt-7.data): skipped; resuming from ckpt-6"],
                 id="the newest torn: the one before, one warning naming it"),
    pytest.param([f"{D}/ckpt-6", f"{D}/ckpt-7"], (f"{D}/ckpt-7", f"{D}/ckpt-6"), None,
                 [f"{D}/ckpt-7", f"{D}/ckpt-6"],
                 [f"no checkpoint in {D} restores (ckpt-7: Data loss: truncated record at 1024 "
                  f"in {D}/ckpt-7.data; ckpt-6: Data loss: truncated record at 1024 in "
                  f"{D}/ckpt-6.data): training starts from step 0"],
                 id="none restores: step 0, one warning naming each"),
])
def test_restore_newest(prefixes, torn, restored, tried, warnings):
    reader = Reader(*torn)
    assert restore_newest(prefixes, reader, D) == (restored, warnings)
    assert reader.tried == tried


def test_an_error_without_words_is_named_by_its_type():
    def fail(prefix):
        raise OSError()

    assert restore_newest(["/c/ckpt-1"], fail, "/c")[1] == [
        "no checkpoint in /c restores (ckpt-1: OSError): training starts from step 0"]


def test_a_long_error_is_cut_to_200_characters():
    def fail(prefix):
        raise OSError("x" * 300 + "\nsecond line")

    warning = restore_newest(["/c/ckpt-1"], fail, "/c")[1][0]
    assert warning == f"no checkpoint in /c restores (ckpt-1: {'x' * 200}): training starts " \
                      "from step 0"


class DoesNotFit(ValueError):
    """Stands for a checkpoint that is whole but written for another state."""


@pytest.mark.parametrize("raised, fatal, escapes", [
    pytest.param(DoesNotFit("another model"), (DoesNotFit,), True, id="fatal: never skipped"),
    pytest.param(DoesNotFit("another model"), (), False, id="not fatal: skipped as torn"),
    pytest.param(ValueError("torn"), (DoesNotFit,), False, id="another error: skipped"),
])
def test_a_fatal_error_is_raised_not_skipped(raised, fatal, escapes):
    tried = []

    def read(prefix):
        tried.append(prefix)
        if prefix == "/c/ckpt-2":
            raise raised

    if escapes:
        with pytest.raises(DoesNotFit, match="another model"):
            restore_newest(["/c/ckpt-1", "/c/ckpt-2"], read, "/c", fatal=fatal)
        assert tried == ["/c/ckpt-2"]  # the older one never tried
    else:
        assert restore_newest(["/c/ckpt-1", "/c/ckpt-2"], read, "/c", fatal=fatal)[0] == \
            "/c/ckpt-1"
