"""long_jobs.manifest: which job wrote a checkpoint directory, and the rule for another
job's: taken over with a warning once it ended, refused while it runs."""

from __future__ import annotations

import json

import pytest

from mpi_resolver.core.errors import ResolutionError
from mpi_resolver.long_jobs.manifest import (MANIFEST, foreign_warning, manifest_for,
                                              read_manifest, remove_manifest, settings_of,
                                              this_cluster, this_job, write_manifest)
from mpi_resolver.long_jobs.interval import parse_every
from mpi_resolver.long_jobs.requeue import FORGOTTEN
from mpi_resolver.long_jobs.signals import parse_signal
from mpi_resolver.long_jobs.termination import Policy

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("env, job", [
    ({"SLURM_JOB_ID": "12"}, "12"),
    ({"SLURM_JOB_ID": "12", "SLURM_ARRAY_JOB_ID": "10", "SLURM_ARRAY_TASK_ID": "3"}, "10_3"),
    ({"SLURM_JOB_ID": "12", "SLURM_ARRAY_JOB_ID": "10"}, "12"),
    ({"SLURM_JOB_ID": " 12 "}, "12"),
    ({"SLURM_JOB_ID": "x"}, None),
    ({}, None),
])
def test_this_job(env, job):
    assert this_job(env) == job


def test_a_manifest_is_written_whole_and_read_back(tmp_path):
    m = manifest_for("12", 40, {"keep": 2}, clock=lambda: 0.0)
    write_manifest(str(tmp_path), m)
    assert read_manifest(str(tmp_path)) == m
    assert m["job"] == "12" and m["step"] == 40 and m["settings"] == {"keep": 2}
    assert [p.name for p in tmp_path.iterdir()] == [MANIFEST]


@pytest.mark.parametrize("text", [None, "not json", "[1, 2]"])
def test_no_manifest_or_a_broken_one_is_none(tmp_path, text):
    if text is not None:
        (tmp_path / MANIFEST).write_text(text)
    assert read_manifest(str(tmp_path)) is None


def test_the_manifest_goes_with_the_checkpoints(tmp_path):
    write_manifest(str(tmp_path / "new"), {"job": "3"})  # the directory made where missing
    remove_manifest(str(tmp_path / "new"))
    remove_manifest(str(tmp_path / "new"))  # gone already: nothing to do
    assert list((tmp_path / "new").iterdir()) == []


OTHER = {"job": "11", "step": 300, "written": "2026-11-26T10:00:00", "host": "node1"}
WHERE = "/ckpt holds the checkpoint of job 11 (step 300, written 2026-11-26T10:00:00 on node1)"


@pytest.mark.parametrize("manifest, job", [
    (None, "12"), ({"job": "12"}, "12"), ({"job": None}, "12"), (OTHER, None),
])
def test_no_word_for_this_job_s_own_or_none(manifest, job):
    asked = []
    assert foreign_warning("/ckpt", manifest, job, asked.append) is None
    assert asked == []


@pytest.mark.parametrize("state, said", [
    ("COMPLETED", "COMPLETED"), ("FAILED", "FAILED"), ("CANCELLED", "CANCELLED"),
    ("TIMEOUT", "TIMEOUT"), ("NODE_FAIL", "NODE_FAIL"), ("PREEMPTED", "PREEMPTED"),
])
def test_an_ended_job_s_directory_is_taken_over_with_a_warning(state, said):
    assert foreign_warning("/ckpt", OTHER, "12", lambda job: state) == (
        f"{WHERE}; job 12 resumes from it and takes the directory over (job 11 is {said}). "
        "Give each job its own directory to start afresh.")


@pytest.mark.parametrize("completed, said", [
    (True, f"{WHERE}: job 11's training completed; job 12 starts afresh and takes the "
           "directory over (job 11 is COMPLETED)"),
    (False, f"{WHERE}; job 12 resumes from it and takes the directory over (job 11 is "
            "COMPLETED). Give each job its own directory to start afresh."),
    ("yes", f"{WHERE}; job 12 resumes from it and takes the directory over (job 11 is "
            "COMPLETED). Give each job its own directory to start afresh."),  # True alone
])
def test_a_completed_job_s_directory_is_started_afresh(completed, said):
    manifest = {**OTHER, "completed": completed}
    assert foreign_warning("/ckpt", manifest, "12", lambda job: "COMPLETED") == said


@pytest.mark.parametrize("state", ["RUNNING", "PENDING", "SUSPENDED", "REQUEUED",
                                   "CONFIGURING", "REQUEUE_HOLD", "SIGNALING", "STAGE_OUT",
                                   "RESIZING", "REQUEUE_FED", "COMPLETING", "STOPPED",
                                   "RESV_DEL_HOLD"])
def test_a_live_job_s_directory_is_refused(state):
    with pytest.raises(ResolutionError) as e:
        foreign_warning("/ckpt", OTHER, "12", lambda job: state)
    assert str(e.value) == (
        f"{WHERE}, which is {state}: two jobs must not share a checkpoint directory (each "
        "would resume from, and delete, the other's files). Give each job its own, e.g. "
        "--checkpoint-dir checkpoints/$SLURM_JOB_ID, as the templates do.")


def test_a_job_scontrol_cannot_place_is_refused_with_the_way_out():
    """No scontrol (a container), the controller busy, the job forgotten: the other job may
    still run, and taking its directory over would delete its files."""
    with pytest.raises(ResolutionError) as e:
        foreign_warning("/ckpt", OTHER, "12", lambda job: None)
    assert str(e.value) == (
        f"{WHERE}, and scontrol cannot say whether that job has ended (if it has, remove "
        "/ckpt/mpi_resolver.json): two jobs must not share a checkpoint directory (each would "
        "resume from, and delete, the other's files). Give each job its own, e.g. "
        "--checkpoint-dir checkpoints/$SLURM_JOB_ID, as the templates do.")


def test_the_state_is_asked_of_the_other_job():
    asked = []
    foreign_warning("/ckpt", OTHER, "12", lambda job: asked.append(job) or "COMPLETED")
    assert asked == ["11"]


def test_the_file_is_json(tmp_path):
    write_manifest(str(tmp_path), {"job": "3", "step": 1})
    assert json.loads((tmp_path / MANIFEST).read_text()) == {"job": "3", "step": 1}


@pytest.mark.parametrize("env, cluster", [
    ({"SLURM_CLUSTER_NAME": "hpc"}, "hpc"), ({"SLURM_CLUSTER_NAME": " hpc "}, "hpc"),
    ({"SLURM_CLUSTER_NAME": ""}, None), ({}, None),
])
def test_this_cluster(env, cluster):
    assert this_cluster(env) == cluster


@pytest.mark.parametrize("env, cluster", [({"SLURM_CLUSTER_NAME": "hpc"}, "hpc"), ({}, None)])
def test_the_manifest_s_fields(monkeypatch, env, cluster):
    import datetime
    import socket

    monkeypatch.delenv("SLURM_CLUSTER_NAME", raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    m = manifest_for("10_3", 7, {"keep": 2}, clock=lambda: 1e9)
    assert m == {"job": "10_3", "cluster": cluster, "step": 7, "host": socket.gethostname(),
                 "written": datetime.datetime.fromtimestamp(1e9).isoformat(timespec="seconds"),
                 "settings": {"keep": 2}}


REFUSAL = (": two jobs must not share a checkpoint directory (each would resume from, and "
           "delete, the other's files). Give each job its own, e.g. --checkpoint-dir "
           "checkpoints/$SLURM_JOB_ID, as the templates do.")


@pytest.mark.parametrize("written_on, this_cluster, said", [
    pytest.param("hpc", "hpc", None, id="this cluster's job, purged: it has ended"),
    pytest.param("hpc", "gpu", "the manifest names cluster hpc, this job's SLURM_CLUSTER_NAME "
                 "is gpu", id="another cluster's job"),
    pytest.param(None, "hpc", "the manifest names cluster none, this job's SLURM_CLUSTER_NAME "
                 "is hpc", id="a manifest of no cluster"),
    pytest.param(None, None, "the manifest names cluster none, this job's SLURM_CLUSTER_NAME "
                 "is not set", id="no cluster either side"),
    pytest.param("hpc", None, "the manifest names cluster hpc, this job's SLURM_CLUSTER_NAME "
                 "is not set", id="this job of no cluster"),
])
def test_a_job_slurm_has_forgotten(written_on, this_cluster, said):
    """slurmctld purges a job's record MinJobAge (300 s by default) after its end: a job of
    this cluster it does not know has ended; one of another cluster (a shared file system) may
    still run there."""
    manifest = {**OTHER, "cluster": written_on}
    if said is None:
        assert foreign_warning("/ckpt", manifest, "12", lambda job: FORGOTTEN, this_cluster) == (
            f"{WHERE}; job 12 resumes from it and takes the directory over (job 11 is no "
            "longer known to Slurm: it ended over MinJobAge ago). Give each job its own "
            "directory to start afresh.")
        return
    with pytest.raises(ResolutionError) as e:
        foreign_warning("/ckpt", manifest, "12", lambda job: FORGOTTEN, this_cluster)
    assert str(e.value) == (
        f"{WHERE}, which this cluster's Slurm does not know ({said}: a job of another cluster "
        f"may still run; if that job has ended, remove /ckpt/mpi_resolver.json){REFUSAL}")


class Meeting:
    """A coordinator as check_directory_together sees it: ``chief``, ``agree`` that returns
    the chief's value (its own as chief, ``told`` otherwise), and ``leave``, noting each call
    (``left``: the keys left under)."""

    def __init__(self, chief: bool, told: str = "") -> None:
        self.chief, self.told, self.calls, self.left = chief, told, [], []

    def agree(self, key: str, value: str, what: str) -> str:
        self.calls.append((key, value, what))
        return value if self.chief else self.told

    def leave(self, key: str) -> None:
        self.left.append(key)


WHAT = "whether the checkpoint directory may be used"


@pytest.mark.parametrize("chief, other, state, told, refused, warned", [
    pytest.param(True, None, None, "", False, False, id="chief, no manifest"),
    pytest.param(True, "11", "RUNNING", "", True, False, id="chief, a running job's"),
    pytest.param(True, "11", "COMPLETED", "", False, True, id="chief, an ended job's"),
    pytest.param(True, "12", "RUNNING", "", False, False, id="chief, this job's own"),
    pytest.param(True, "11", FORGOTTEN, "", False, True,
                 id="chief, a job of this cluster Slurm has forgotten"),
    pytest.param(False, "11", "RUNNING", "", False, False, id="worker, the chief says go on"),
    pytest.param(False, None, None, "refused by worker 0", True, False,
                 id="worker, the chief refused"),
])
def test_check_directory_together(tmp_path, monkeypatch, caplog, chief, other, state, told,
                                  refused, warned):
    from mpi_resolver.core import logs
    from mpi_resolver.core.errors import ResolutionError
    from mpi_resolver.long_jobs import manifest as m

    asked = []
    monkeypatch.setattr(m, "job_state", lambda job, timeout: asked.append((job, timeout))
                        or state)
    monkeypatch.setattr(logs, "_logged", set())
    monkeypatch.setenv("SLURM_CLUSTER_NAME", "hpc")  # the manifest's and this job's
    if other is not None:
        m.write_manifest(str(tmp_path), m.manifest_for(other, 5, {}))
    coord = Meeting(chief, told)
    if refused:
        with pytest.raises(ResolutionError) as e:
            m.check_directory_together(coord, "k", str(tmp_path), "12")
        said = str(e.value)
        assert said == (told or coord.calls[0][1]) and ("which is RUNNING" in said or told)
        assert told or f"{tmp_path} holds the checkpoint of job 11" in said
    else:
        m.check_directory_together(coord, "k", str(tmp_path), "12")
    (key, value, what), = coord.calls
    assert (key, what) == ("k_directory", WHAT)
    assert coord.left == (["k_directory_left"] if refused else [])  # worker 0 ends last
    assert (value == "") == (not refused or not chief)
    assert asked == ([("11", 10.0)] if chief and other == "11" else [])
    warnings = [r.getMessage() for r in caplog.records if "takes the directory over" in
                r.getMessage()]
    assert len(warnings) == (1 if warned else 0)
    assert all(f"{tmp_path} holds the checkpoint of job 11" in w for w in warnings)


@pytest.mark.parametrize("content, why", [
    ('{"job": "11", "step"', "Expecting ':' delimiter: line 1 column 21 (char 20)"),
    ("[1, 2]", "a JSON list, not an object"),
    ("", "Expecting value: line 1 column 1 (char 0)"),
    (None, "Is a directory"),  # a directory of that name
])
def test_a_manifest_that_cannot_be_read_is_refused_naming_it_and_nothing_deleted(
        tmp_path, content, why):
    from mpi_resolver.core.errors import ConfigurationError
    from mpi_resolver.long_jobs import manifest as m

    path = tmp_path / m.MANIFEST
    if content is None:
        path.mkdir()
    else:
        path.write_text(content)
    (tmp_path / "ckpt-1.index").write_text("kept")
    assert m.read_checked(str(tmp_path)) == (None, why)  # supervise's read: no manifest, why
    said = m.unreadable(str(tmp_path))
    assert said == (f"{path} cannot be read ({why}): it names the job whose checkpoints are "
                    "beside it, so the directory is not used blindly. If no job uses the "
                    "directory any more, remove that file (the checkpoints stay, and this job "
                    "takes them over), or give this job a directory of its own.")
    coord = Meeting(True)
    with pytest.raises(ConfigurationError) as e:
        m.check_directory_together(coord, "k", str(tmp_path), "12")
    assert str(e.value) == said and coord.calls == [("k_directory", said, WHAT)]
    assert coord.left == ["k_directory_left"]
    assert path.exists() and (tmp_path / "ckpt-1.index").read_text() == "kept"


def test_a_readable_or_absent_manifest_is_no_problem(tmp_path):
    from mpi_resolver.long_jobs import manifest as m

    assert m.unreadable(str(tmp_path)) is None
    assert m.read_checked(str(tmp_path)) == (None, None)
    m.write_manifest(str(tmp_path), {"job": "12", "step": 3})
    assert m.unreadable(str(tmp_path)) is None
    assert m.read_checked(str(tmp_path)) == ({"job": "12", "step": 3}, None)
    (tmp_path / "file").write_text("")
    for missing in ("nowhere", "nowhere/ck", "file/ck"):  # the directory's own check says it
        assert m.unreadable(str(tmp_path / missing)) is None
        assert m.read_checked(str(tmp_path / missing)) == (None, None)


@pytest.mark.parametrize("manifest, job, done", [
    ({"job": "12", "completed": True}, "12", True),
    ({"job": "12", "completed": True}, "13", False),  # another job's: it starts afresh
    ({"job": "12", "completed": "yes"}, "12", False),
    ({"job": "12"}, "12", False),
    ({"job": None, "completed": True}, None, False),  # no Slurm job: the command runs again
    (None, "12", False),
])
def test_completed_for(manifest, job, done):
    from mpi_resolver.long_jobs.manifest import completed_for

    assert completed_for(manifest, job) is done


def test_completed_marks_the_final_step():
    from mpi_resolver.long_jobs.manifest import completed

    assert completed({"job": "12", "step": 40, "host": "n1"}, 200) == {
        "job": "12", "step": 200, "host": "n1", "completed": True}


@pytest.mark.parametrize("chief, manifest, told, line", [
    (True, {"job": "12", "step": 200, "completed": True}, "",
     "job 12's training completed at step 200 (the manifest in DIR): nothing to train again; "
     "exit 0"),
    (True, {"job": "11", "step": 200, "completed": True}, "", None),
    (True, None, "", None),
    (False, None, "job 12's training completed ...", "job 12's training completed ..."),
    (False, None, "", None),
])
def test_finished_together(tmp_path, chief, manifest, told, line):
    from mpi_resolver.long_jobs import manifest as m

    if manifest is not None:
        m.write_manifest(str(tmp_path), manifest)
    coord = Meeting(chief, told)
    said = m.finished_together(coord, "k", str(tmp_path), "12")
    assert said == (line.replace("DIR", str(tmp_path)) if line else None)
    sent = said if chief and said else ""  # the key-value store takes text: '' for nothing
    assert coord.calls == [("k_completed", sent, "whether the job's training completed")]
    assert coord.left == (["k_completed_left"] if said else [])  # every worker ends: 0 last


def test_claim_directory_refuses_one_that_cannot_be_written(tmp_path):
    from mpi_resolver.core.errors import ConfigurationError
    from mpi_resolver.long_jobs.manifest import MANIFEST, claim_directory

    (tmp_path / "file").write_text("not a directory")
    with pytest.raises(ConfigurationError) as e:
        claim_directory(str(tmp_path / "file"), {"job": "12"})
    assert str(e.value).startswith(f"the checkpoint directory {tmp_path / 'file'} cannot be "
                                   "written (")
    assert str(e.value).endswith(f"(`srun mpi-resolver check --checkpoint-dir {tmp_path / 'file'}"
                                 "` checks it from every node).")
    claim_directory(str(tmp_path / "new"), {"job": "12"})
    assert (tmp_path / "new" / MANIFEST).exists()


@pytest.mark.parametrize("every, keep, background, settings", [
    (None, 2, True, {"checkpoint_every": None, "keep": 2, "checkpoint_async": True}),
    (parse_every("30m"), 3, False, {"checkpoint_every": "1800 s", "keep": 3,
                                    "checkpoint_async": False}),
])
def test_settings_of(every, keep: int, background: bool, settings: dict) -> None:
    policy = Policy(parse_signal("USR2@90"), 90.0, False, True)
    assert settings_of(every, keep, background, policy) == {
        **settings, "signal": "USR2", "requeue": False, "requeue_on_time_limit": True}
