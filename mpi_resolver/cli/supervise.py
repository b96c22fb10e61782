"""mpi-resolver supervise: runs a step (``srun ...``, ``mpirun ...``), judges each run's end
with the restart policy (long_jobs/supervision: the cause, the progress, the table) and acts:
runs it again in the same allocation, requeues the job, or ends with the policy's status;
every run's start and end go to the job's ledger. The edge: the checkpoint directory's
manifest and ledger, scontrol, the step itself (cli/step_run).

It imports neither mpi4py nor TensorFlow and resolves nothing: it runs in the batch script,
one process, beside the step.
"""

from __future__ import annotations

import os
import signal
import time
from dataclasses import dataclass, field, replace
from typing import Any, Dict, List, Mapping, Optional, Sequence, Set, Tuple

from mpi_resolver.core.errors import FormatError, ResolutionError
from mpi_resolver.long_jobs import exits, ledger
from mpi_resolver.long_jobs.causes import RunEnd
from mpi_resolver.long_jobs.job_settings import said_checkpoint_dir
from mpi_resolver.long_jobs.journal import read_progress
from mpi_resolver.long_jobs.resume import restart_count
from mpi_resolver.long_jobs.manifest import MANIFEST, read_checked, this_job
from mpi_resolver.long_jobs.nodes import kept_in, lemons, left_out, parse_spare_nodes
from mpi_resolver.long_jobs.policy import Action
from mpi_resolver.long_jobs.report import end_line
from mpi_resolver.long_jobs.restarts import STOP_TIMEOUT
from mpi_resolver.long_jobs.signals import DEFAULT_SIGNAL, parse_signal
from mpi_resolver.long_jobs.slurm_nodes import drained, node_states
from mpi_resolver.long_jobs.story import NewerLedger, story_of
from mpi_resolver.long_jobs.srun_options import (SrunLine, job_nodelist, job_nodes, read_srun,
                                                tasks_per_node)
from mpi_resolver.long_jobs.supervision import (Checkpoints, Job, Verdict, checkpoints_of, judge,
                                                settled)
from mpi_resolver.placement.hostlist import expand_hostlist
from mpi_resolver.cli.step_run import CommandNotRun, Signals, run_once, say
from mpi_resolver.cli.supervise_requeue import came_now, requeue_job

__all__ = ["supervise", "main", "Setup"]


@dataclass(frozen=True)
class Setup:
    """What one supervise knows before its first run: the command and its srun line, the
    job (its settings are read after each run: ``_look``), its checkpoint directory (None:
    not known), the warning signal, the spare nodes, the job's node list and how often Slurm
    requeued it; and the warnings said already (each is said once)."""

    command: List[str]
    srun: Optional[SrunLine]
    job: Job
    directory: Optional[str]
    spare: int
    nodelist: Optional[str]
    requeues: int = 0
    said: Set[str] = field(default_factory=set, compare=False)


def setup(command: Sequence[str], max_restarts: int, spare_nodes: str,
          env: Mapping[str, str]) -> Setup:
    """Returns supervise's setup from its arguments and the batch script's environment.

    Raises:
      FormatError, ResolutionError: MPI_RESOLVER_SIGNAL names no signal the package watches;
        --spare-nodes is not a whole number smaller than the job's nodes, or the command
        names its nodes itself.
    """
    text = env.get("MPI_RESOLVER_SIGNAL", "").strip() or DEFAULT_SIGNAL
    warning = parse_signal(text, "MPI_RESOLVER_SIGNAL")
    directory = said_checkpoint_dir(None, env)
    srun = read_srun(command)
    argv, spare = _with_spare_nodes(command, srun, spare_nodes, job_nodes(env),
                                    tasks_per_node(env))
    job = Job(this_job(env), os.path.basename(command[0]), max_restarts, warning.number,
              warning.name, checkpoints_seen=directory is not None)
    return Setup(argv, read_srun(argv), job, directory, spare, job_nodelist(env),
                 restart_count(env))


def _with_spare_nodes(command: Sequence[str], srun: Optional[SrunLine], text: str,
                      nodes: Optional[int], per_node: Optional[int]) -> tuple:
    """Returns (the command, with srun's -N for the job's nodes less the spare ones, and
    their tasks where the job gives ``per_node``; the spare nodes), from --spare-nodes'
    ``text``; the step's own -N where it has one."""
    spare = parse_spare_nodes(text, nodes)
    if srun is None or spare == 0:
        return list(command), (srun.spare(nodes) if srun is not None else 0)
    if srun.nodes is not None or srun.names_nodes:
        raise ResolutionError(f"--spare-nodes {spare} (the templates' SPARE_NODES) and the "
                              "step's own node options (-N, --nodelist): give one of them.")
    assert nodes is not None  # parse_spare_nodes refuses spare nodes of an unknown job
    return srun.with_nodes(nodes - spare, per_node), spare


def _look(s: Setup) -> Tuple[Checkpoints, Job]:
    """Returns the job's checkpoints and the job with its settings, as its manifest shows
    them now (none: the defaults). One that cannot be read is said once, naming it: its
    checkpoints are not seen then (--max-restarts alone bounds the restarts)."""
    manifest: Optional[Dict[str, Any]] = None
    why = None
    if s.directory:
        manifest, why = read_checked(s.directory)
    if why is not None and "manifest" not in s.said:
        s.said.add("manifest")
        say(f"warning: the job's manifest {os.path.join(str(s.directory), MANIFEST)} cannot "
            f"be read ({why}): supervise sees neither the checkpoints' progress nor the job's "
            f"settings there, so the restarts are bounded by --max-restarts "
            f"{s.job.max_restarts} alone and the settings are the defaults (requeue=True, "
            "requeue_on_time_limit=False); fix or remove the file")
    return (checkpoints_of(manifest, s.job.job, readable=why is None),
            settled(s.job, manifest))


def supervise(command: Sequence[str], max_restarts: int, *, spare_nodes: str = "0",
              warned_file: Optional[str] = None, env: Optional[Mapping[str, str]] = None,
              stop_timeout: float = STOP_TIMEOUT) -> int:
    """Runs ``command`` until the policy ends the job or requeues it; returns the exit
    status (0, 75 after a requeue, the policy's otherwise). ``warned_file``: where it
    exists, the warning signal came (to the batch script, whose trap creates it)."""
    env = os.environ if env is None else env
    s = setup(command, max_restarts, spare_nodes, env)
    signals = Signals(s.job.warning, warned_file)
    signals.install()
    history = _history(s)
    since = len(ledger.read(s.directory)) if s.directory else 0
    if not s.directory:
        say("MPI_RESOLVER_CHECKPOINT_DIR is not set: supervise cannot see the checkpoints, "
            f"so the restarts are bounded by --max-restarts {max_restarts} alone")
    done = _completed_already(s)
    if done is not None:
        return done
    argv, restarts = _next_argv(s, history), 0  # the nodes earlier runs of the job blamed
    while True:
        verdict = _one_run(s, argv, signals, history, restarts, stop_timeout)
        history.append(verdict.record)
        action = verdict.decision.action
        if action is Action.END:
            say(verdict.line)
            _say_story(s, since)
            return verdict.decision.status
        if action is Action.REQUEUE:
            return requeue_job(s.job, verdict, signals, ledger.blamed(history), s.nodelist)
        say(verdict.line)
        restarts += 1
        argv = _next_argv(s, history)


def _one_run(s: Setup, argv: Sequence[str], signals: Signals, history: List[ledger.RunEnded],
             restarts: int, stop_timeout: float) -> Verdict:
    """Runs the step once (none where a stop or the warning came already) and returns the
    verdict on it, written to the ledger."""
    number = len(history) + 1
    before = _look(s)[0]
    _record(s, {"event": "run_start", "job": s.job.job, "run": number, "time": time.time(),
                "nodes": s.nodelist, "argv": list(argv), "step": before.step,
                "requeues": s.requeues, "format": ledger.FORMAT})
    begun = time.time()
    started = signals.snapshot()
    if started & {int(x) for x in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT)} or \
            s.job.warning in started:
        end = RunEnd(None)
    else:
        end = run_once(argv, signals, stop_timeout)
    for number_ in signals.unwatched():
        say(f"{signal.Signals(number_).name} came to supervise, which watches "
            f"SIG{s.job.warning_name} (MPI_RESOLVER_SIGNAL): not passed on; submit with "
            f"--signal=B:{s.job.warning_name}@N, or set MPI_RESOLVER_SIGNAL to that signal")
    after, job = _look(s)  # the settings too as the run leaves them (its tasks write them)
    verdict = judge(job, number, end, came_now(job, signals), before, after, history,
                    restarts)
    verdict = replace(verdict, record=_reached(s, verdict.record, begun))
    _record(s, {**verdict.record.record(), "time": time.time(), "format": ledger.FORMAT})
    return verdict


def _reached(s: Setup, record: ledger.RunEnded, begun: float) -> ledger.RunEnded:
    """Returns ``record`` with the step the run reached and when, as worker 0's progress
    file said it during this run (begun at ``begun``); as it was without one."""
    progress = read_progress(s.directory) if s.directory else None
    if not progress or progress.get("job") != s.job.job or \
            not isinstance(progress.get("time"), (int, float)) or progress["time"] < begun or \
            not isinstance(progress.get("step"), int):
        return record
    return replace(record, reached=progress["step"], reached_at=float(progress["time"]))


def _record(s: Setup, record: Mapping[str, object]) -> None:
    """Appends ``record`` to the job's ledger, where its directory is known; a ledger that
    cannot be written is said, and supervise goes on."""
    if not s.directory:
        return
    try:
        os.makedirs(s.directory, exist_ok=True)
        ledger.append(s.directory, record)
    except OSError as e:
        say(f"the ledger in {s.directory} cannot be written ({e.strerror}): going on without")


def _say_story(s: Setup, since: int) -> None:
    """Says the job's line at its end (its runs, restarts, requeues, steps lost, ETTR), as
    its ledger tells it (outside a Slurm job, from record ``since`` on: this supervise's);
    nothing without one."""
    if not s.directory:
        return
    records = ledger.read(s.directory)
    try:
        story = story_of(records[since:] if s.job.job is None else records, s.job.job,
                         exact=True)
    except NewerLedger:
        return
    if story.runs:
        say(end_line(story))


def _history(s: Setup) -> List[ledger.RunEnded]:
    """Returns this job's earlier runs from its ledger (a requeued job's runs before); none
    outside a Slurm job (another command's runs may be in the ledger)."""
    if not s.directory or s.job.job is None:
        return []
    return ledger.runs(ledger.read(s.directory), s.job.job)


def _completed_already(s: Setup) -> Optional[int]:
    """Returns 0, with one line, where the manifest says this job's training completed;
    else None."""
    now = _look(s)[0]
    if not now.completed:
        return None
    say(f"job {s.job.job}'s training completed at step {now.step} (its manifest in "
        f"{s.directory}): nothing to run: exit 0")
    return 0


def _next_argv(s: Setup, history: Sequence[ledger.RunEnded]) -> List[str]:
    """Returns the next run's command line (the first one's too: ``history`` holds the
    runs before a requeue): srun's with the drained nodes of the allocation and those that
    failed twice in this job left out, as many as the job has spare nodes (said); those of
    the allocation that cannot be, said once."""
    if s.srun is None:
        return list(s.command)
    blamed = ledger.blamed(history)
    states = node_states(s.nodelist) if s.nodelist and s.spare > 0 else None
    allocation = _allocation(s.nodelist)
    gone = drained(states)
    out = left_out(blamed, gone, s.spare, allocation)
    kept = kept_in(blamed, gone, s.spare, allocation) if allocation else []
    twice = set(lemons(blamed))
    if out:
        say(f"the next run leaves out {_named(out, twice)}: the job has {s.spare} node"
            f"{'s' * (s.spare != 1)} more than the step needs")
    if kept and f"kept {kept}" not in s.said:
        s.said.add(f"kept {kept}")
        it, more = ("it", "1 node") if len(kept) == 1 else ("them", f"{len(kept)} nodes")
        say(f"{_named(kept, twice)} {'is' if len(kept) == 1 else 'are'} not left out of the "
            f"next run: the job has no{' more' * bool(out)} spare node for {it}; to leave "
            f"{it} out, ask Slurm for {more} more and raise SPARE_NODES (supervise "
            "--spare-nodes) by as many")
    return s.srun.leaving_out(out) if out else list(s.command)


def _named(nodes: Sequence[str], twice: Set[str]) -> str:
    """Returns ``nodes``, each with why it is to be left out."""
    return ", ".join(f"{n} ({'failed twice in this job' if n in twice else 'drained or down'})"
                     for n in nodes)


def _allocation(nodelist: Optional[str]) -> Optional[List[str]]:
    """Returns the job's nodes (SLURM_JOB_NODELIST expanded), None where not known."""
    try:
        return expand_hostlist(nodelist) if nodelist else None
    except FormatError:
        return None


def main(command: Sequence[str], max_restarts: int, spare_nodes: str = "0",
         warned_file: Optional[str] = None) -> int:
    """Runs ``mpi-resolver supervise``; returns the exit status (2 where the command cannot
    be run, as exec; 78 where the job's settings are refused)."""
    try:
        return supervise(command, max_restarts, spare_nodes=spare_nodes,
                         warned_file=warned_file)
    except CommandNotRun as e:
        say(f"error: {e}")
        return exits.USAGE
    except ResolutionError as e:
        say(f"error: {e}")
        return exits.CONFIG

