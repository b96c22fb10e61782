"""Which job's checkpoints a directory holds: a small manifest the chief writes beside them
(the job, its cluster, the step, the run's settings), and the rule for a directory another
job wrote: taken over with a warning once that job has ended (also where this cluster's Slurm
has forgotten it), refused while it runs, where scontrol cannot say, or where it may be
another cluster's (pure, but for ``read_manifest``, ``write_manifest`` and
``remove_manifest``, the file edge)."""

from __future__ import annotations

import json
import os
import socket
import time
from typing import Any, Callable, Dict, Mapping, Optional, Tuple

from mpi_resolver.core.errors import ConfigurationError, ResolutionError
from mpi_resolver.core.logs import log_once
from mpi_resolver.long_jobs.durable import sync_directory
from mpi_resolver.long_jobs.requeue import FORGOTTEN, job_state, requeue_target

__all__ = ["MANIFEST", "this_job", "this_cluster", "manifest_for", "read_manifest",
           "write_manifest", "foreign_warning", "remove_manifest", "check_directory_together",
           "claim_directory", "ours", "completed_for", "completed", "finished_together",
           "unreadable", "read_checked", "settings_of"]

MANIFEST = "mpi_resolver.json"
#: Slurm's job states of a job that has not ended yet (COMPLETING: its tasks may still be
#: saving after SIGTERM; STOPPED: stopped by SIGSTOP, its tasks still there).
_LIVE = {"RUNNING", "PENDING", "SUSPENDED", "REQUEUED", "CONFIGURING", "RESIZING",
         "REQUEUE_HOLD", "REQUEUE_FED", "SIGNALING", "STAGE_OUT", "COMPLETING", "STOPPED",
         "RESV_DEL_HOLD"}


def this_job(env: Mapping[str, str]) -> Optional[str]:
    """Returns this job as scontrol names it ('12', or '10_3' for an array task), None
    outside a Slurm job."""
    try:
        return requeue_target(env)
    except ResolutionError:
        return None


def this_cluster(env: Mapping[str, str]) -> Optional[str]:
    """Returns this job's cluster as Slurm names it (SLURM_CLUSTER_NAME), None where unset."""
    return env.get("SLURM_CLUSTER_NAME", "").strip() or None


def manifest_for(job: Optional[str], step: int, settings: Mapping[str, Any],
                 clock: Callable[[], float] = time.time) -> Dict[str, Any]:
    """Returns the manifest of a checkpoint at ``step`` written by ``job`` (of this_cluster)."""
    return {"job": job, "cluster": this_cluster(os.environ), "step": int(step),
            "host": socket.gethostname(),
            "written": time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(clock())),
            "settings": dict(settings)}


def settings_of(every: Any, keep: int, background: bool, policy: Any) -> Dict[str, Any]:
    """Returns the settings a long job's manifest records: the periodic saves' rule
    (``every``: an Every; None: on the signal only), ``keep``, whether they are written in
    the ``background``, and ``policy``'s signal and requeue choices, which supervise reads
    there."""
    return {"checkpoint_every": every.describe() if every else None, "keep": keep,
            "checkpoint_async": background, **policy.settings()}


def read_manifest(directory: str) -> Optional[Dict[str, Any]]:
    """Returns the manifest in ``directory``, None where there is none or it is not JSON."""
    return read_object(os.path.join(directory, MANIFEST))


def read_object(path: str) -> Optional[Dict[str, Any]]:
    """Returns the JSON object in file ``path`` (the manifest, worker 0's progress file),
    None where there is none, or it is not one JSON object."""
    try:
        with open(path, encoding="utf-8") as f:
            found = json.load(f)
    except (OSError, ValueError):
        return None
    return found if isinstance(found, dict) else None


def read_checked(directory: str) -> Tuple[Optional[Dict[str, Any]], Optional[str]]:
    """Returns (``directory``'s manifest, None); (None, None) where there is none (nor the
    directory: its own check says it); (None, why it cannot be read: not JSON, not an object,
    a read error such as a directory in its place)."""
    path = os.path.join(directory, MANIFEST)
    try:
        with open(path, encoding="utf-8") as f:
            found = json.load(f)
    except (FileNotFoundError, NotADirectoryError):
        return None, None
    except (OSError, ValueError) as e:
        return None, getattr(e, "strerror", None) or " ".join(str(e).split())
    if isinstance(found, dict):
        return found, None
    return None, f"a JSON {type(found).__name__}, not an object"


def unreadable(directory: str) -> Optional[str]:
    """Returns why ``directory``'s manifest, which is there, cannot be read (not JSON, not an
    object, a read error), with the way out; None where it reads or is not there."""
    return _unreadable_line(directory, read_checked(directory)[1])


def _unreadable_line(directory: str, why: Optional[str]) -> Optional[str]:
    """Returns unreadable's line for a manifest that cannot be read for ``why`` (None: it
    reads, or is not there)."""
    if why is None:
        return None
    path = os.path.join(directory, MANIFEST)
    return (f"{path} cannot be read ({why}): it names the job whose checkpoints are beside it, "
            "so the directory is not used blindly. If no job uses the directory any more, "
            "remove that file (the checkpoints stay, and this job takes them over), or give "
            "this job a directory of its own.")


def write_manifest(directory: str, manifest: Mapping[str, Any]) -> None:
    """Writes ``manifest`` into ``directory`` whole or not at all, and on disk before it
    returns (a file beside it, fsynced, renamed over the old one, the directory fsynced)."""
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, MANIFEST)
    part = f"{path}.{os.getpid()}.part"
    with open(part, "w", encoding="utf-8") as f:
        json.dump(dict(manifest), f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(part, path)
    sync_directory(directory)


def claim_directory(directory: str, manifest: Mapping[str, Any]) -> None:
    """Writes the run's first manifest (the directory is this job's from now on).

    Raises:
      ConfigurationError: the directory cannot be written (no save could be either), naming
        it and the check that finds it before the job runs.
    """
    try:
        write_manifest(directory, manifest)
    except OSError as e:
        raise ConfigurationError(
            f"the checkpoint directory {directory} cannot be written ({e.strerror or e}): no "
            "checkpoint could be saved there. Give a directory every node may write (`srun "
            f"mpi-resolver check --checkpoint-dir {directory}` checks it from every node).") \
            from e


def ours(manifest: Optional[Mapping[str, Any]], job: Optional[str]) -> bool:
    """Returns whether ``manifest`` is ``job``'s (not None: outside Slurm no run knows
    another's)."""
    return bool(manifest and job is not None and manifest.get("job") == job)


def completed_for(manifest: Optional[Mapping[str, Any]], job: Optional[str]) -> bool:
    """Returns whether ``manifest`` says the training of ``job`` (not None: outside Slurm
    the same command run again starts afresh) completed."""
    return ours(manifest, job) and manifest is not None and manifest.get("completed") is True


def completed(manifest: Mapping[str, Any], step: int) -> Dict[str, Any]:
    """Returns ``manifest`` at the training's last ``step``, marked completed (the second
    phase of the completion: every task said its training ended)."""
    return {**manifest, "step": int(step), "completed": True}


def finished_together(coord: Any, key: str, directory: str, job: Optional[str]) -> Optional[str]:
    """Worker 0 reads whether ``directory`` says this job's training completed and tells the
    others over ``coord`` (``chief``, ``agree``, ``leave``); returns the one line to say and
    end with 0, on every worker alike (worker 0 once the others have read it), or None where
    training is to run."""
    line = ""
    if coord.chief:
        manifest = read_manifest(directory)
        if completed_for(manifest, job):
            assert manifest is not None  # completed_for says so
            line = (f"job {job}'s training completed at step {manifest.get('step')} (the "
                    f"manifest in {directory}): nothing to train again; exit 0")
    told = coord.agree(f"{key}_completed", line, "whether the job's training completed")
    if told:  # every worker ends: worker 0 last (agreement.leave_last)
        coord.leave(f"{key}_completed_left")
    return told or None


def remove_manifest(directory: str) -> None:
    """Removes ``directory``'s manifest, if any (its checkpoints were removed)."""
    try:
        os.remove(os.path.join(directory, MANIFEST))
    except FileNotFoundError:
        pass


def foreign_warning(directory: str, manifest: Optional[Mapping[str, Any]],
                    job: Optional[str], state: Callable[[str], Optional[str]],
                    cluster: Optional[str] = None) -> Optional[str]:
    """Returns the warning where ``directory``'s checkpoints were written by another job that
    has ended (this job goes on from them), None where they are this job's or there are none.
    ``state(job)`` is the other job's JobState (FORGOTTEN where slurmctld knows no such job,
    None where scontrol cannot say); ``cluster`` is this job's cluster: a job of the same
    cluster that slurmctld has forgotten has ended (its record is purged after its end).

    Raises:
      ConfigurationError: the other job has not ended, or its end cannot be confirmed: two jobs
        must not share a directory.
    """
    other = None if manifest is None else manifest.get("job")
    if manifest is None or other == job or other is None or job is None:
        return None
    where = (f"{directory} holds the checkpoint of job {other} (step {manifest.get('step')}, "
             f"written {manifest.get('written')} on {manifest.get('host')})")
    now = state(str(other))
    ours = cluster is not None and manifest.get("cluster") == cluster
    if now == FORGOTTEN and ours:
        now = "no longer known to Slurm: it ended over MinJobAge ago"
    elif now is None or now in _LIVE or now == FORGOTTEN:
        raise ConfigurationError(
            f"{where}, {_unconfirmed(now, directory, manifest, cluster)}: two jobs must not "
            "share a checkpoint directory (each would resume from, and delete, the other's "
            "files). Give each job its own, e.g. --checkpoint-dir checkpoints/$SLURM_JOB_ID, "
            "as the templates do.")
    if manifest.get("completed") is True:
        return (f"{where}: job {other}'s training completed; job {job} starts afresh and takes "
                f"the directory over (job {other} is {now})")
    return (f"{where}; job {job} resumes from it and takes the directory over (job {other} "
            f"is {now}). Give each job its own directory to start afresh.")


def _unconfirmed(now: Optional[str], directory: str, manifest: Mapping[str, Any],
                 cluster: Optional[str]) -> str:
    """Returns why another job's end is not confirmed: its live state, or what scontrol said,
    with the way out."""
    if now not in (None, FORGOTTEN):
        return f"which is {now}"
    path = os.path.join(directory, MANIFEST)
    if now is None:
        return f"and scontrol cannot say whether that job has ended (if it has, remove {path})"
    ours = f"is {cluster}" if cluster else "is not set"
    return (f"which this cluster's Slurm does not know (the manifest names cluster "
            f"{manifest.get('cluster') or 'none'}, this job's SLURM_CLUSTER_NAME {ours}: a job "
            f"of another cluster may still run; if that job has ended, remove {path})")


def check_directory_together(coord: Any, key: str, directory: str, job: Optional[str]) -> None:
    """Worker 0 decides whether ``directory`` may be used (foreign_warning: its warning said
    once, or its refusal) and tells the others over ``coord`` (the framework's meeting point:
    ``chief``, ``agree``, ``leave``), so that every worker goes on or every worker raises (worker
    0 once the others have read its verdict).

    Raises:
      ConfigurationError: another job that has not ended, or whose end scontrol cannot
        confirm, wrote the directory, or its manifest cannot be read (a restart would meet
        it again: exit 78 if uncaught).
    """
    verdict = ""
    if coord.chief:
        manifest, why = read_checked(directory)  # read once
        verdict = _unreadable_line(directory, why) or ""
    if coord.chief and not verdict:
        try:
            warning = foreign_warning(directory, manifest, job,
                                      lambda j: job_state(j, timeout=10.0),
                                      this_cluster(os.environ))
            if warning:
                log_once(warning)
        except ResolutionError as e:
            verdict = str(e)
    verdict = coord.agree(f"{key}_directory", verdict,
                          "whether the checkpoint directory may be used")
    if verdict:
        coord.leave(f"{key}_directory_left")  # every worker raises: worker 0 last
        raise ConfigurationError(verdict)
