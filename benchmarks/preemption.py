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
import shutil
import sys
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench import QUIET, RESULTS, machine  # noqa: E402 - benchmarks/ is this directory
from preemption_cycle import MODELS, one_cycle  # noqa: E402
from preemption_table import notes, table  # noqa: E402
from tests.harness.slurm_cluster import SlurmCluster  # noqa: E402

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
