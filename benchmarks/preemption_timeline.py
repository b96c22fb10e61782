"""benchmarks/preemption.py's timeline: the events the batch script and the chief append to
it (``name time fields...``), split into the job's runs, and the figures and checks read from
them (pure: no cluster, no TensorFlow)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Dict, List, NamedTuple, Optional, Sequence

from tests.harness.requeue import slurm_time

__all__ = ["Event", "read_timeline", "runs_of", "first", "phases", "exit_line",
           "steps_figures", "task_ends", "checks", "requeue_said", "slurm_wait"]


class Event(NamedTuple):
    """A timeline line: ``name time fields...``."""

    name: str
    at: float
    fields: List[str]


def read_timeline(path: Path) -> List[Event]:
    """Returns the timeline's events (the batch script's and the chief's), in file order."""
    if not path.exists():
        return []
    events = []
    for line in path.read_text().splitlines():
        words = line.split()
        if len(words) >= 2:
            events.append(Event(words[0], float(words[1]), words[2:]))
    return events


def runs_of(events: Sequence[Event]) -> List[List[Event]]:
    """Returns the events split into the job's runs, each from its batch line on."""
    runs: List[List[Event]] = []
    for e in events:
        if e.name == "batch":
            runs.append([])
        if runs:
            runs[-1].append(e)
    return runs


def first(events: Sequence[Event], name: str) -> Optional[Event]:
    """Returns the first event called ``name``, or None."""
    return next((e for e in events if e.name == name), None)


def phases(run: Sequence[Event]) -> Dict[str, float]:
    """Returns a run's start to its first step, and its parts (seconds): launch (batch line
    to the trainer's first line), setup (to the strategy built: imports, the resolver, every
    worker started), model (built), handler (built, restored), first_step (to the first step
    done)."""
    names = ("batch", "start", "strategy", "variables", "restored", "step")
    marks = {name: first(run, name) for name in names}
    missing = [name for name, mark in marks.items() if mark is None]
    if missing:
        raise RuntimeError(f"a run's timeline lacks {missing}")
    at = [mark.at for mark in marks.values() if mark is not None]
    parts = dict(zip(("launch", "setup", "model", "handler", "first_step"),
                     (b - a for a, b in zip(at, at[1:], strict=False)), strict=True))
    return {"total": at[-1] - at[0], **parts}


def exit_line(run: Sequence[Event]) -> Event:
    """Returns the package's exit line (logged after the save and the requeue).

    Raises:
      RuntimeError: the run has none.
    """
    lines = [e for e in run if e.name == "logged" and "exit code" in " ".join(e.fields)]
    if not lines:
        raise RuntimeError("the chief logged no exit line (mpi_resolver: ... exit code N)")
    return lines[-1]


def steps_figures(fresh: Sequence[Event], resumed: Sequence[Event],
                  t_signal: float) -> Dict[str, int]:
    """Returns the steps done at the signal (the chief's last step before it), the step
    saved (which the resumed run restored), those lost (goal 0) and those trained between
    the signal and the save."""
    before = [int(e.fields[0]) for e in fresh if e.name == "step" and e.at < t_signal]
    at_signal = max(before, default=0)
    restored = first(resumed, "restored")
    saved = int(restored.fields[0]) if restored else 0
    return {"steps_at_signal": at_signal, "steps_saved": saved,
            "steps_lost": max(0, at_signal - saved),
            "steps_after_signal": max(0, saved - at_signal)}


def task_ends(output: str) -> List[str]:
    """Returns how srun saw tasks end other than with exit 0, from the job's output ('task 0:
    Killed', 'task 1: Exited with exit code 75'), by task: the first run's, after the
    requeue (the resumed run's tasks exit 0, which srun does not report)."""
    ends = re.findall(r"^srun: error: \S+: task (\d+): (.+)$", output, re.M)
    return [f"task {task}: {how.strip()}" for task, how in sorted(ends)]


def checks(fresh: Sequence[Event], resumed: Sequence[Event], fields: Dict[str, str],
           final_state: str, steps_after_resume: int) -> List[str]:
    """Returns what did not go as the package promises (empty when all did): the exit line
    gives exit code 75, scontrol counts the restart, the resumed run restored the step the
    first run saved at and ended after its steps, and the job COMPLETED. (Whether the exit
    line says the job was requeued is a figure: requeue_said.)"""
    problems = []
    line = " ".join(exit_line(fresh).fields)
    if not line.endswith("exit code 75"):
        problems.append(f"exit line: {line}")
    if int(fields.get("Restarts", "0")) < 1:
        problems.append(f"scontrol shows Restarts={fields.get('Restarts')}")
    left, restored = first(fresh, "exit"), first(resumed, "restored")
    if not left or not restored or left.fields[0] != restored.fields[0]:
        problems.append(f"saved at {left and left.fields[0]}, resumed at "
                        f"{restored and restored.fields[0]}")
    done = first(resumed, "done")
    if restored and (not done or int(done.fields[0]) !=
                     int(restored.fields[0]) + steps_after_resume):
        problems.append(f"resumed run ended: {done}")
    if final_state != "COMPLETED":
        problems.append(f"job ended {final_state}")
    return problems


def requeue_said(line: str) -> str:
    """Returns what the package's exit line says of the requeue: 'requeued', else its own
    words ('scontrol requeue 15 failed (exit -15: no output); ...')."""
    said = line.split("; ", 1)[-1].rsplit("; exit code", 1)[0]
    return "requeued" if said.startswith("requeued job") else said


def slurm_wait(t_requeued: float, next_start: float, requeued: Dict[str, Any],
               t_update: Optional[float]) -> Dict[str, float]:
    """Returns Slurm's own wait after the requeue (seconds): to the job PENDING again, the
    BeginTime Slurm set, and to the next run's first line, after `StartTime=now` or (no
    ``t_update``) Slurm's own start."""
    fields = requeued["fields"]
    out = {"requeue_to_pending": requeued["pending_seen"] - t_requeued,
           "begin_time": slurm_time(fields["EligibleTime"]) - slurm_time(fields["SubmitTime"])}
    if t_update is None:
        out["real_wait"] = next_start - t_requeued
    else:
        out["update_to_start"] = next_start - t_update
        out["requeue_to_start"] = next_start - t_requeued
    return out
