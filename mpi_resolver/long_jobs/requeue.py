"""Requeueing the job (worker 0 in the step, or supervise in the batch step): which job (an
array task by its own name), scontrol's answer read into one line with its fix, and whether
SIGTERM came from the time limit (pure, but for ``run_scontrol``, the subprocess edge)."""

from __future__ import annotations

import signal
import subprocess
from dataclasses import dataclass
from typing import Callable, Dict, Mapping, Optional, Sequence

from mpi_resolver.core.errors import ResolutionError

__all__ = ["RequeueOutcome", "requeue_target", "requeue", "read_requeue", "job_fields",
           "job_ending", "job_state", "TIME_LIMIT", "RUNNING", "ENDING", "run_scontrol",
           "missing_scontrol", "SCONTROL_TIMEOUT", "FORGOTTEN"]

#: Seconds scontrol may take (it retries an unreachable controller for MessageTimeout).
SCONTROL_TIMEOUT = 30.0
_FALLBACK = ("or run the step under `mpi-resolver supervise` (the templates do), which "
             "requeues the job from the batch step when the step exits {code}")


def _then(code: int, fallback: bool) -> str:
    """Returns the fallback's words (after '; '), or '' where the caller is the fallback."""
    return "; " + _FALLBACK.format(code=code) if fallback else ""


@dataclass(frozen=True)
class RequeueOutcome:
    """What worker 0's requeue did: ``done`` (the job will run again) and one line that says
    what happened, with the fix where it failed."""

    done: bool
    message: str


def requeue_target(env: Mapping[str, str]) -> str:
    """Returns the job to requeue: '<array job id>_<task id>' for a task of an array job,
    else SLURM_JOB_ID.

    Raises:
      ResolutionError: not in a Slurm job (SLURM_JOB_ID unset or not a number).
    """
    job = env.get("SLURM_JOB_ID", "").strip()
    if not job.isdigit():
        raise ResolutionError(
            f"SLURM_JOB_ID={env.get('SLURM_JOB_ID')!r}: not in a Slurm job, so there is no "
            "job to requeue; run the training with srun inside sbatch, or pass requeue=False.")
    array, task = (env.get(v, "").strip() for v in ("SLURM_ARRAY_JOB_ID", "SLURM_ARRAY_TASK_ID"))
    if array.isdigit() and task.isdigit():
        return f"{array}_{task}"
    return job


def read_requeue(target: str, returncode: int, output: str, code: int, *,
                 fallback: bool = True) -> RequeueOutcome:
    """Returns what ``scontrol requeue target`` answering ``returncode`` and ``output``
    means; ``code`` is the step's exit code, named in supervise's fallback (said where
    ``fallback``: worker 0 requeues, not supervise)."""
    command = f"scontrol requeue {target}"
    text = " ".join(output.split())
    if returncode == 0:
        return RequeueOutcome(True, f"requeued job {target} ({command})")
    if "pending execution" in text:
        return RequeueOutcome(True, f"job {target} is requeued already (by scontrol requeue "
                                    f"or Slurm's preemption): {command}: {text}")
    if "already completing or completed" in text or "already finished" in text:
        return RequeueOutcome(False, f"job {target} is ending or has ended (scancel, or Slurm "
                                     f"ended it first): not requeued: {command}: {text}")
    if "presently disabled" in text:
        return RequeueOutcome(False, (
            f"job {target} cannot be requeued ({command}: {text}): submit it with "
            "'#SBATCH --requeue' (this cluster's JobRequeue is 0)"))
    return RequeueOutcome(False, (
        f"{command} failed (exit {returncode}: {text or 'no output'})"
        + _then(code, fallback)))


def missing_scontrol(target: str, host: str, code: int, *, fallback: bool) -> RequeueOutcome:
    """Returns the outcome where scontrol is not on this node (a container without Slurm's
    commands)."""
    return RequeueOutcome(False, (
        f"job {target} was not requeued: scontrol is not on {host}'s PATH (inside a container "
        "without Slurm's commands?): make scontrol, slurm.conf and munge's socket available "
        "there" + _then(code, fallback)))


Runner = Callable[[Sequence[str], float], "subprocess.CompletedProcess[str]"]


def run_scontrol(args: Sequence[str],
                 timeout: float = SCONTROL_TIMEOUT) -> "subprocess.CompletedProcess[str]":
    """Runs ``scontrol ARGS`` (text, output captured, bounded by ``timeout`` seconds), with
    SIGTERM blocked in it: scontrol runs inside the job's step, and the SIGTERM that its own
    `requeue` makes Slurm send to every process of the job would otherwise kill it before it
    answers (seen: exit -15 for a requeue that was done). The block is the calling thread's,
    which the child inherits; the process's other threads still take the signal.

    Raises:
      FileNotFoundError: no scontrol on PATH. subprocess.TimeoutExpired: no answer.
    """
    before = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
    try:
        return subprocess.run(["scontrol", *args], capture_output=True, text=True,
                              stdin=subprocess.DEVNULL, timeout=timeout)
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, before)


def requeue(target: str, host: str, code: int, run: Runner = run_scontrol,
            timeout: float = SCONTROL_TIMEOUT, *, fallback: bool = True) -> RequeueOutcome:
    """Requeues job ``target`` with scontrol within ``timeout`` seconds; returns the outcome
    (never raises). ``fallback``: name supervise's requeue in the fixes (worker 0's)."""
    try:
        done = run(["requeue", target], timeout)
    except FileNotFoundError:
        return missing_scontrol(target, host, code, fallback=fallback)
    except (OSError, subprocess.SubprocessError) as e:
        return RequeueOutcome(False, f"scontrol requeue {target} could not run ({e})"
                                     + _then(code, fallback))
    return read_requeue(target, done.returncode, done.stdout + done.stderr, code,
                        fallback=fallback)


def job_fields(text: str) -> Dict[str, str]:
    """Returns the KEY=VALUE fields of ``scontrol show job -o`` (one line per job)."""
    fields: Dict[str, str] = {}
    for word in text.split():
        key, sep, value = word.partition("=")
        if sep and key not in fields:
            fields[key] = value
    return fields


#: job_ending's answers: Slurm ends the job for its time limit; the job runs on (a signal
#: alone: scancel --signal, --signal=TERM@N); Slurm ends it otherwise (scancel, requeue,
#: preemption).
TIME_LIMIT, RUNNING, ENDING = "time limit", "running", "ending"
#: job_state's answer for a job slurmctld does not know ("Invalid job id specified").
FORGOTTEN = "FORGOTTEN"


def job_state(target: str, run: Runner = run_scontrol,
              timeout: float = SCONTROL_TIMEOUT) -> Optional[str]:
    """Returns job ``target``'s JobState ('RUNNING', 'COMPLETED', ...), FORGOTTEN where
    slurmctld answers that it knows no such job (its record purged MinJobAge after its end,
    or another cluster's), None where scontrol cannot say within ``timeout`` seconds."""
    try:
        shown = run(["show", "job", "-o", target], timeout)
    except (OSError, subprocess.SubprocessError):
        return None
    if shown.returncode != 0:
        return FORGOTTEN if "invalid job id" in shown.stderr.lower() else None
    return job_fields(shown.stdout).get("JobState")


def job_ending(target: str, run: Runner = run_scontrol,
               timeout: float = SCONTROL_TIMEOUT) -> Optional[str]:
    """Returns why job ``target``'s tasks got SIGTERM, as the job shows it then: TIME_LIMIT
    (Reason=TimeLimit), RUNNING (JobState=RUNNING: a signal, not an end) or ENDING; None
    where scontrol cannot tell within ``timeout`` seconds."""
    try:
        shown = run(["show", "job", "-o", target], timeout)
    except (OSError, subprocess.SubprocessError):
        return None
    fields = job_fields(shown.stdout)
    if shown.returncode != 0 or "JobState" not in fields:
        return None
    if fields.get("Reason") == "TimeLimit":
        return TIME_LIMIT
    return RUNNING if fields["JobState"] == "RUNNING" else ENDING
