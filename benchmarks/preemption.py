"""Long jobs on Slurm, measured: from Slurm's warning signal to the checkpoint on disk and the
requeue, the steps lost, and a resumed run's start against a fresh one's (issue 28).

    python benchmarks/preemption.py [--repeat N] [--quick] [--model example|large]...
                                    [--mib 100] [--real-wait] [--json FILE]

On a throw-away 2-node Slurm cluster of its own (tests/harness/slurm_cluster.py: one network
namespace per node), every repetition submits `sbatch --requeue --open-mode=append` of a
batch script whose step runs two TensorFlow workers, `srun --mpi=pmix --kill-on-bad-exit=1
python benchmarks/preemption_trainer.py --checkpoint-dir DIR ...` (MultiWorkerMirroredStrategy
with MPIClusterResolver; every step through the handler of SlurmTerminationConfig), for
examples/train.py's model ('example') and one of about --mib MiB of variables ('large'):

1. once the chief has done --signal-at-step steps, `scancel --signal=USR1 JOB`, which sends
   USR1 as `#SBATCH --signal=USR1@N` does (to every task of the job's steps);
2. every worker saves one checkpoint at the same step, worker 0 runs `scontrol requeue`, all
   exit 75, and the job is PENDING again (Reason=BeginTime);
3. the benchmark runs `scontrol update JobId=J StartTime=now` (with --real-wait, the first
   time, it waits for Slurm to start the job by itself); the job's next run resumes from the
   checkpoint, trains --steps-after-resume steps and ends.

What is measured, and where each time comes from (wall clock, one machine):
- t_signal: the time just before scancel runs (scancel's own time is in the JSON);
- signal -> checkpoint on disk: the mtime of DIR/chief/checkpoint, the file that TensorFlow's
  CheckpointManager writes last, after the data and index files (the chief's save; the other
  worker writes the same, to a directory removed after it);
- signal -> requeue issued: the time of the package's line on the chief ('checkpoint saved
  on SIGUSR1; requeued job J (scontrol requeue J); exit code 75'), logged once scontrol
  requeue returned: the trainer hands the 'mpi_resolver' logger's records to its timeline
  with their own time (LogRecord.created). scontrol's Restarts=1 is checked as well, and
  whether the line says the job was requeued is counted: scontrol runs inside the job's
  step, so the requeue's own SIGTERM may end it before it answers ('scontrol requeue J
  failed (exit -15: no output)', though the job was requeued);
- steps: at the signal (the last step the chief's timeline shows done before t_signal),
  saved (the step the resumed run restored, the checkpoint's own step variable), lost =
  at the signal - saved where positive (the goal: 0), and trained after the signal = saved -
  at the signal (TensorFlow saves at a step boundary once its watcher thread, which polls
  every second, has seen the signal); the grace period (--grace-period, SlurmTermination-
  Config's) is printed with whether the save and the requeue came within it;
- start to first step, of the job's first (fresh) run and of its resumed run: from the batch
  script's first line (`date`, appended to the timeline) to the chief's first step done, and
  its parts: launch (to the trainer's first line, before TensorFlow is imported), set-up
  (imports, the resolver, the strategy: every worker has started), the model built, the
  handler (built; it restores the checkpoint), the first step (the dataset, skipping the
  steps done as train.py does, the step traced, run);
- Slurm's own wait, apart: requeue -> the job PENDING again (its tasks end, at the latest
  KillWait after the requeue's SIGTERM), Slurm's BeginTime as scontrol shows the requeued
  job (EligibleTime - SubmitTime: CredExpire 120 s + 1, by Slurm's policy), and requeue ->
  the next run's first line with `StartTime=now` or, with --real-wait, without it;
- how the first run's tasks ended after the requeue, in srun's words from the job's output
  ('task 1: Exited with exit code 75', 'task 0: Killed' where KillWait ran out), counted.

Figures are measured in this run, printed as median [min, max] over the repetitions; nothing
is hard-coded. The load average is printed with them: other work on the machine shows in
every figure. No ratio to TensorFlow's resolver: TensorFlow has no Slurm requeue (its own
handler saves on SIGTERM; nothing of it requeues the job), so there is nothing to compare.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import shutil
import statistics
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any, Callable, Dict, List, NamedTuple, Optional, Sequence, TypeVar

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench import PY, QUIET, RESULTS, machine  # noqa: E402 - benchmarks/ is this directory
from mpi_resolver.long_jobs.requeue import job_fields  # noqa: E402
from tests.harness.requeue import slurm_time, start_due  # noqa: E402
from tests.harness.slurm_cluster import SlurmCluster  # noqa: E402

TRAINER = ROOT / "benchmarks" / "preemption_trainer.py"
MODELS = ("example", "large")
#: Seconds any one phase may take before the benchmark gives up (loaded machine: generous).
PHASE_TIMEOUT = 240.0
#: Seconds Slurm may take to start a requeued job by itself (--real-wait): BeginTime's 121 s,
#: then the scheduler's next pass.
REAL_WAIT_TIMEOUT = 420.0
POLL = 0.05
T = TypeVar("T")


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


def wait_until(probe: Callable[[], Optional[T]], timeout: float, what: str,
               context: Callable[[], str] = lambda: "") -> T:
    """Returns probe()'s first answer other than None, polling every POLL s.

    Raises:
      RuntimeError: none within ``timeout`` seconds (with ``context()``).
    """
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if value is not None:
            return value
        if time.monotonic() > deadline:
            raise RuntimeError(f"no {what} within {timeout:.0f} s{context()}")
        time.sleep(POLL)


class Cycle:
    """One repetition: a job of ``model`` whose files are in ``directory``."""

    def __init__(self, cluster: SlurmCluster, directory: Path, args: argparse.Namespace,
                 model: str) -> None:
        self.cluster, self.dir, self.args, self.model = cluster, directory, args, model
        self.timeline = directory / "timeline"
        self.checkpoints = directory / "ckpt"
        self.output = directory / "job.out"
        self.job = ""
        directory.mkdir(parents=True)

    def run(self, argv: Sequence[str], timeout: float = 60.0, check: bool = True) -> str:
        """Returns the stdout of a Slurm client command (raises where it fails, unless
        ``check`` is False: then its stdout and stderr)."""
        proc = self.cluster.run(argv, timeout=timeout, env={**QUIET, "PYTHONPATH": str(ROOT)},
                                cwd=str(self.dir), check=check)
        return proc.stdout if check else proc.stdout + proc.stderr

    def context(self) -> str:
        """Returns the timeline and the job's output, for an error message."""
        out = self.output.read_text(errors="replace") if self.output.exists() else ""
        text = self.timeline.read_text() if self.timeline.exists() else ""
        lines = [ln for ln in text.splitlines() if not ln.startswith("step ")]
        return (f"\n--- timeline (without steps) {self.timeline}\n" + "\n".join(lines[-20:])
                + f"\n--- job output {self.output}\n{out[-4000:]}"
                + f"\n--- the job and the nodes now\n{self.state_now()}")

    def state_now(self) -> str:
        """Returns `scontrol show job` and `sinfo` as they are now (or why they failed)."""
        return "\n".join(self.run(argv, timeout=30, check=False)
                         for argv in (["scontrol", "show", "job", self.job], ["sinfo", "-N", "-l"]))

    def events(self) -> List[List[Event]]:
        """Returns the job's runs' events so far."""
        return runs_of(read_timeline(self.timeline))

    def show(self) -> Dict[str, str]:
        """Returns the job's fields as `scontrol show job -o` gives them."""
        return job_fields(self.run(["scontrol", "show", "job", "-o", self.job]))


def batch_script(cycle: Cycle) -> str:
    """Returns the batch script: its first line's time to the timeline, then the step."""
    a = cycle.args
    trainer = [PY, str(TRAINER), "--checkpoint-dir", str(cycle.checkpoints), "--timeline",
               str(cycle.timeline), "--model", cycle.model, "--mib", str(a.mib),
               "--steps-after-resume", str(a.steps_after_resume),
               "--grace-period", str(a.grace_period)]
    return "\n".join([
        "#!/bin/bash",
        f'echo "batch $(date +%s.%N) ${{SLURM_RESTART_COUNT:-0}}" >> '
        f"{shlex.quote(str(cycle.timeline))}",
        f"srun --mpi=pmix --kill-on-bad-exit=1 {shlex.join(trainer)}", ""])


def submit(cycle: Cycle) -> None:
    """Submits the cycle's job (2 nodes, 1 task each, requeue allowed, output appended)."""
    script = cycle.dir / "job.sh"
    script.write_text(batch_script(cycle))
    cycle.job = cycle.run(["sbatch", "--parsable", "-N2", "--ntasks-per-node=1", "--requeue",
                           "--open-mode=append", "--time=30", "--job-name", f"bench-{cycle.model}",
                           "-o", str(cycle.output), str(script)]).strip().split(";")[0]


def signal_at_step(cycle: Cycle) -> Dict[str, float]:
    """Waits for the chief's --signal-at-step'th step, then signals the job; returns the
    times scancel was run and returned."""
    target = cycle.args.signal_at_step

    def reached() -> Optional[bool]:
        runs = cycle.events()
        return True if runs and any(e.name == "step" and int(e.fields[0]) >= target
                                    for e in runs[0]) else None

    wait_until(reached, PHASE_TIMEOUT, f"step {target} of the first run", cycle.context)
    sent = time.time()
    cycle.run(["scancel", "--signal=USR1", cycle.job])
    return {"t_signal": sent, "scancel_s": time.time() - sent}


def wait_requeued(cycle: Cycle) -> Dict[str, Any]:
    """Waits until the job is PENDING again after the requeue; returns when that was seen,
    scontrol's fields then, and the chief's checkpoint file's mtime and size.

    Raises:
      RuntimeError: the job ended, or was not requeued, within PHASE_TIMEOUT.
    """
    def pending() -> Optional[Dict[str, str]]:
        fields = cycle.show()
        if fields.get("JobState") in ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT"):
            raise RuntimeError(f"job {cycle.job} ended ({fields['JobState']}) instead of "
                               f"being requeued{cycle.context()}")
        # Requeued: PENDING with its new BeginTime. Before that (still COMPLETING, or PENDING
        # for an instant with another reason) a `StartTime=now` is overwritten by the
        # requeue's BeginTime, and the job waits its 121 s (seen once in the suite).
        requeued = fields.get("JobState") == "PENDING" and fields.get("Reason") == "BeginTime"
        return fields if requeued else None

    fields = wait_until(pending, PHASE_TIMEOUT, "requeue", cycle.context)
    seen = time.time()
    chief = cycle.checkpoints / "chief"
    index = chief / "checkpoint"
    if not index.exists():
        raise RuntimeError(f"no checkpoint in {chief} after the requeue{cycle.context()}")
    return {"pending_seen": seen, "fields": fields, "t_saved": index.stat().st_mtime,
            "checkpoint_bytes": sum(p.stat().st_size for p in chief.iterdir())}


def started_again(cycle: Cycle) -> bool:
    """Returns whether the requeued job's next run has written its batch line."""
    return len(cycle.events()) > 1


def nodes_idle(cycle: Cycle) -> bool:
    """Returns whether every node of the cluster is idle (the last run's steps cleaned up)."""
    states = cycle.run(["sinfo", "-h", "-N", "-o", "%T"]).split()
    return bool(states) and all(state == "idle" for state in states)


class Nudge:
    """Sends `scontrol update StartTime=now` once it is due (tests/harness/requeue.py: the
    job PENDING for its BeginTime, the requeue 2 s old) and every node is idle, at most every
    ``every`` s, until the next run has started; ``sent`` holds the times.

    Sent in the requeue's own second, the update started the job at once and its launch
    failed (the nodes still refuse the job's credentials): CI's run waited out its bound.
    """

    def __init__(self, cycle: Cycle, every: float = 2.0) -> None:
        self.cycle, self.every = cycle, every
        self.sent: List[float] = []
        self._last = 0.0

    def __call__(self) -> None:
        """Sends the update where it is due.

        Raises:
          RuntimeError: the job was held or ended instead of starting again.
        """
        cycle = self.cycle
        if started_again(cycle) or time.monotonic() - self._last < self.every:
            return
        self._last = time.monotonic()
        fields = cycle.show()
        reason, state = fields.get("Reason", ""), fields.get("JobState", "")
        if "held" in reason.lower() or state in ("COMPLETED", "FAILED", "CANCELLED"):
            raise RuntimeError(f"job {cycle.job} is {state} ({reason}) instead of starting "
                               f"again{cycle.context()}")
        if start_due(fields, time.time()) and nodes_idle(cycle):
            self.sent.append(time.time())
            cycle.run(["scontrol", "update", f"JobId={cycle.job}", "StartTime=now"])


def resume(cycle: Cycle, real_wait: bool) -> Dict[str, Any]:
    """Lets the requeued job start (`scontrol update StartTime=now`, or, ``real_wait``, when
    Slurm starts it itself); waits for its run to end; returns when the first update was
    sent and how many were."""
    nudge = None if real_wait else Nudge(cycle)

    def ended() -> Optional[bool]:
        if nudge is not None:
            nudge()
        runs = cycle.events()
        return True if len(runs) > 1 and first(runs[1], "done") else None

    timeout = REAL_WAIT_TIMEOUT if real_wait else PHASE_TIMEOUT
    wait_until(ended, timeout, "end of the resumed run", cycle.context)

    def finished() -> Optional[str]:
        state = cycle.show().get("JobState", "?")
        return None if state in ("RUNNING", "COMPLETING", "CONFIGURING") else state

    state = wait_until(finished, PHASE_TIMEOUT, "job's end", cycle.context)
    sent = nudge.sent if nudge is not None else []
    return {"t_update": sent[0] if sent else None, "updates": len(sent), "final_state": state}


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


def figures(cycle: Cycle, signalled: Dict[str, float], requeued: Dict[str, Any],
            resumed: Dict[str, Any]) -> Dict[str, Any]:
    """Returns one repetition's figures (seconds, steps, bytes) and checks."""
    runs = cycle.events()
    if len(runs) < 2:
        raise RuntimeError(f"the job ran {len(runs)} time(s), not twice{cycle.context()}")
    fresh, again = runs[0], runs[1]
    t_signal, t_requeued = signalled["t_signal"], exit_line(fresh).at
    out: Dict[str, Any] = {"model": cycle.model, "job": cycle.job, **signalled,
                           "signal_to_saved": requeued["t_saved"] - t_signal,
                           "signal_to_requeued": t_requeued - t_signal,
                           "requeue_said": requeue_said(" ".join(exit_line(fresh).fields))}
    out.update(steps_figures(fresh, again, t_signal))
    for name, run in (("fresh", fresh), ("resumed", again)):
        out.update({f"{name}_{k}": v for k, v in phases(run).items()})
    out["resumed_minus_fresh"] = out["resumed_total"] - out["fresh_total"]
    out.update(slurm_wait(t_requeued, again[0].at, requeued, resumed["t_update"]))
    out["start_updates"] = resumed["updates"]  # StartTime=now sent (0 with --real-wait)
    variables = first(fresh, "variables")
    out.update({"variable_bytes": int(variables.fields[0]) if variables else 0,
                "checkpoint_bytes": requeued["checkpoint_bytes"],
                "grace_period": cycle.args.grace_period,
                "within_grace": max(out["signal_to_saved"], out["signal_to_requeued"])
                <= cycle.args.grace_period,
                "task_ends": task_ends(cycle.output.read_text(errors="replace")),
                "checks": checks(fresh, again, requeued["fields"], resumed["final_state"],
                                 cycle.args.steps_after_resume)})
    return out


def one_cycle(cluster: SlurmCluster, root: Path, args: argparse.Namespace, model: str,
              rep: int, real_wait: bool) -> Dict[str, Any]:
    """Runs one repetition for ``model``: submit, signal, requeue, resume; returns its
    figures."""
    cycle = Cycle(cluster, root / f"{model}-{rep}", args, model)
    submit(cycle)
    signalled = signal_at_step(cycle)
    requeued = wait_requeued(cycle)
    resumed = resume(cycle, real_wait)
    return figures(cycle, signalled, requeued, resumed)


#: (figure, label, kind) of the table: 's' seconds, 'n' a count.
ROWS = [
    ("signal_to_saved", "signal -> checkpoint on disk (the chief's `checkpoint` file)", "s"),
    ("signal_to_requeued", "signal -> requeue issued (the package's exit line)", "s"),
    ("steps_at_signal", "steps done at the signal", "n"),
    ("steps_after_signal", "steps trained between the signal and the save", "n"),
    ("steps_lost", "steps lost (goal: 0)", "n"),
    ("fresh_total", "fresh run: start -> first step", "s"),
    ("fresh_launch", "- launch (batch script -> trainer's first line)", "s"),
    ("fresh_setup", "- imports, resolver, strategy (every worker started)", "s"),
    ("fresh_model", "- model built", "s"),
    ("fresh_handler", "- handler built (nothing to restore)", "s"),
    ("fresh_first_step", "- dataset, step traced, first step", "s"),
    ("resumed_total", "resumed run: start -> first step", "s"),
    ("resumed_launch", "- launch (batch script -> trainer's first line)", "s"),
    ("resumed_setup", "- imports, resolver, strategy (every worker started)", "s"),
    ("resumed_model", "- model built", "s"),
    ("resumed_handler", "- handler built (restores the checkpoint)", "s"),
    ("resumed_first_step", "- dataset (skips the steps done), step traced, first step", "s"),
    ("resumed_minus_fresh", "resumed - fresh (start -> first step, same repetition)", "s"),
]
SLURM_ROWS = [
    ("requeue_to_pending", "requeue -> job PENDING again (its tasks ended)", "s"),
    ("begin_time", "BeginTime Slurm set (EligibleTime - SubmitTime of the requeued job)", "s"),
    ("update_to_start", "`scontrol update StartTime=now` -> next run's first line", "s"),
    ("requeue_to_start", "requeue -> next run's first line, with StartTime=now", "s"),
    ("real_wait", "requeue -> next run's first line, Slurm's own start (--real-wait)", "s"),
]


def cell(values: Sequence[float], kind: str) -> str:
    """Returns 'median [min, max]' (the value alone for one), or '-' for none."""
    if not values:
        return "-"
    fmt = (lambda v: f"{v:.0f}") if kind == "n" else (lambda v: f"{v:.2f}")
    med = fmt(statistics.median(values))
    unit = "" if kind == "n" else " s"
    if len(values) == 1:
        return med + unit
    return f"{med}{unit} [{fmt(min(values))}, {fmt(max(values))}]"


def header(cycles: Sequence[Dict[str, Any]], model: str) -> str:
    """Returns a model's column heading: its variables and checkpoint, as measured."""
    mine = [c for c in cycles if c["model"] == model]
    variables = statistics.median(c["variable_bytes"] for c in mine) / 2 ** 20
    saved = statistics.median(c["checkpoint_bytes"] for c in mine) / 2 ** 20
    return (f"{model}: {variables:.2f} MiB of variables, checkpoint {saved:.2f} MiB "
            f"(n={len(mine)})")


def share(flags: Sequence[bool]) -> str:
    """Returns 'yes (3/3)' where every flag is true, else 'NO (2/3)'."""
    return f"{'yes' if all(flags) else 'NO'} ({sum(flags)}/{len(flags)})"


def notes(cycles: Sequence[Dict[str, Any]], models: Sequence[str]) -> str:
    """Returns, under the table: how the first runs' tasks ended after the requeue (srun's
    words, counted), and what the exit lines that did not say 'requeued' said."""
    parts = []
    for m in models:
        counts = Counter(end for c in cycles if c["model"] == m for end in c["task_ends"])
        parts.append(f"{m}: " + ("; ".join(f"{end} (x{n})" for end, n in sorted(counts.items()))
                                 or "none reported"))
    text = ("The first runs' tasks after the requeue, as srun reported their ends: "
            + ", ".join(parts) + ".")
    other = sorted({c["requeue_said"] for c in cycles} - {"requeued"})
    if other:
        text += "\n\nExit lines that did not say the job was requeued (it was: Restarts=1): " + \
            " | ".join(other)
    return text


def table(cycles: Sequence[Dict[str, Any]], models: Sequence[str]) -> str:
    """Returns the figures as a Markdown table, one column per model."""
    of = {m: [c for c in cycles if c["model"] == m] for m in models}
    lines = ["| measure | " + " | ".join(header(cycles, m) for m in models) + " |",
             "|---|" + "---|" * len(models)]
    for key, label, kind in ROWS:
        lines.append(f"| {label} | " + " | ".join(
            cell([c[key] for c in of[m]], kind) for m in models) + " |")
    grace = f"{cycles[0]['grace_period']:g}"
    for label, flag in ((f"save and requeue within the grace period ({grace} s)",
                         lambda c: c["within_grace"]),
                        ("the package's exit line says the job was requeued",
                         lambda c: c["requeue_said"] == "requeued")):
        lines.append(f"| {label} | " + " | ".join(
            share([flag(c) for c in of[m]]) for m in models) + " |")
    lines.append("| **Slurm's own wait after the requeue (apart)** |" + " |" * len(models))
    for key, label, kind in SLURM_ROWS:
        values = {m: [c[key] for c in of[m] if key in c] for m in models}
        missing = "not measured (--real-wait)" if key == "real_wait" else "-"
        lines.append(f"| {label} | " + " | ".join(
            cell(values[m], kind) if values[m] else missing for m in models) + " |")
    return "\n".join(lines)


def parse_args(argv: Optional[Sequence[str]] = None) -> argparse.Namespace:
    """Returns the command line's options (--repeat defaults to 3, 1 with --quick)."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeat", type=int, help="repetitions per model (default 3; 1 --quick)")
    ap.add_argument("--quick", action="store_true", help="one repetition per model")
    ap.add_argument("--model", action="append", choices=MODELS,
                    help="example (train.py's model) or large; repeatable (default both)")
    ap.add_argument("--mib", type=float, default=100.0,
                    help="the large model's MiB of variables (default 100)")
    ap.add_argument("--signal-at-step", type=int, default=3,
                    help="signal once the chief has done this many steps (default 3)")
    ap.add_argument("--steps-after-resume", type=int, default=3,
                    help="steps the resumed run trains before it ends (default 3)")
    ap.add_argument("--grace-period", type=float, default=120.0,
                    help="SlurmTerminationConfig's grace period, seconds (default 120)")
    ap.add_argument("--real-wait", action="store_true",
                    help="the first repetition waits for Slurm to start the requeued job by "
                         "itself (BeginTime: about 2-3 minutes) instead of StartTime=now")
    ap.add_argument("--json", metavar="FILE", default=str(RESULTS / "preemption.json"),
                    help="where the figures go, the table beside it as .md "
                         "(default %(default)s)")
    args = ap.parse_args(argv)
    args.repeat = args.repeat or (1 if args.quick else 3)
    args.model = args.model or list(MODELS)
    if args.repeat < 1 or args.signal_at_step < 1 or args.steps_after_resume < 1:
        ap.error("--repeat, --signal-at-step and --steps-after-resume must be at least 1")
    return args


def progress(c: Dict[str, Any], rep: int) -> str:
    """Returns one repetition's line, printed as it ends."""
    wait = (f"requeue -> next start {c['requeue_to_start']:.1f} s (StartTime=now)"
            if "requeue_to_start" in c else f"Slurm's own wait {c['real_wait']:.1f} s")
    return (f"  {c['model']} #{rep + 1} (job {c['job']}): checkpoint on disk "
            f"{c['signal_to_saved']:.2f} s and requeue {c['signal_to_requeued']:.2f} s after "
            f"the signal; steps at the signal {c['steps_at_signal']}, saved "
            f"{c['steps_saved']}, lost {c['steps_lost']}; start -> first step fresh "
            f"{c['fresh_total']:.1f} s, resumed {c['resumed_total']:.1f} s; {wait}"
            + ("" if c["requeue_said"] == "requeued" else
               f"; the exit line says: {c['requeue_said']}")
            + (f"; PROBLEMS: {c['checks']}" if c["checks"] else ""))


def measure(args: argparse.Namespace) -> List[Dict[str, Any]]:
    """Runs every repetition on a throw-away cluster; returns their figures."""
    cycles: List[Dict[str, Any]] = []
    with SlurmCluster(nodes=("node1", "node2"), gpus={}) as cluster:
        root = Path(cluster.workdir) / "preemption"
        for model in args.model:
            for rep in range(args.repeat):
                real_wait = args.real_wait and not cycles
                cycles.append(one_cycle(cluster, root, args, model, rep, real_wait))
                print(progress(cycles[-1], rep), flush=True)
                shutil.rmtree(root / f"{model}-{rep}" / "ckpt", ignore_errors=True)
    return cycles


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Measures, prints the table and writes the figures; returns 0 (1 where a repetition's
    checks failed)."""
    args = parse_args(argv)
    for key, value in QUIET.items():  # this process imports TensorFlow (machine())
        os.environ.setdefault(key, value)
    load_before = os.getloadavg()
    print(f"preemption: {args.repeat} repetition(s) of {', '.join(args.model)} on a "
          f"throw-away 2-node cluster; load average {load_before[0]:.2f}", flush=True)
    cycles = measure(args)
    load_after = os.getloadavg()
    m = machine()
    md = table(cycles, args.model) + "\n\n" + notes(cycles, args.model)
    note = (f"Measured {m['date']} on {m['cpu']} ({m['cores']} cores), Python {m['python']}, "
            f"TensorFlow {m['tensorflow']}; load average (1 min) {load_before[0]:.2f} before, "
            f"{load_after[0]:.2f} after; {args.repeat} repetition(s): median [min, max].")
    print(f"\n{note}\n\n{md}")
    out = Path(args.json)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"machine": m, "load_before": load_before,
                               "load_after": load_after, "settings": vars(args),
                               "cycles": cycles}, indent=1) + "\n")
    out.with_suffix(".md").write_text(f"{note}\n\n{md}\n")
    print(f"\nwritten: {out} and {out.with_suffix('.md').name}")
    return 1 if any(c["checks"] for c in cycles) else 0


if __name__ == "__main__":
    sys.exit(main())
