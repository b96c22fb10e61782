"""benchmarks/preemption.py's repetitions, one each: a Cycle's job submitted, signalled once
the chief has trained, requeued, started again (``StartTime=now``, or Slurm's own start) and
ended, and its figures read from its timeline (preemption_timeline)."""

from __future__ import annotations

import argparse
import shlex
import sys
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, TypeVar

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench import PY, QUIET  # noqa: E402 - benchmarks/ is this directory
from preemption_timeline import (Event, checks, exit_line, first, phases,  # noqa: E402
                                 read_timeline, requeue_said, runs_of, slurm_wait,
                                 steps_figures, task_ends)
from mpi_resolver.long_jobs.requeue import job_fields  # noqa: E402
from tests.harness.requeue import start_due  # noqa: E402
from tests.harness.slurm_cluster import SlurmCluster  # noqa: E402

__all__ = ["MODELS", "one_cycle"]

TRAINER = ROOT / "benchmarks" / "preemption_trainer.py"
MODELS = ("example", "large")
#: Seconds any one phase may take before the benchmark gives up (loaded machine: generous).
PHASE_TIMEOUT = 240.0
#: Seconds Slurm may take to start a requeued job by itself (--real-wait): BeginTime's 121 s,
#: then the scheduler's next pass.
REAL_WAIT_TIMEOUT = 420.0
POLL = 0.05
T = TypeVar("T")


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
