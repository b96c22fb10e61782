"""What benchmarks/tiers.py (JAX) and benchmarks/tf_tiers.py (TensorFlow) share: their
arguments, their cluster and shared directory, and the lines of the kill with and without the
tier. Imports no framework."""

from __future__ import annotations

import argparse
import contextlib
import re
import statistics
import tempfile
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple

#: Worker 0's line after each step of a kill's training: "STEP <step> <time.time()>".
STEP_MARK = "STEP "


def tier_arguments(p: argparse.ArgumentParser, kill_at: int, mtbf_hours: float,
                   quick: str, who: str) -> None:
    """Adds --mib, --repeat, --kill-at (default ``kill_at``; ``who`` is killed),
    --node-mtbf-hours (default ``mtbf_hours``), --quick (``quick``: what it runs) and --json
    to ``p``."""
    p.add_argument("--mib", type=int, nargs="+", default=[100, 1024],
                   help="the states' sizes in MiB (default 100 1024)")
    p.add_argument("--repeat", type=int, default=3, help="rounds of each size (medians)")
    p.add_argument("--kill-at", type=int, default=kill_at,
                   help=f"the step after which {who} is killed (default {kill_at})")
    p.add_argument("--node-mtbf-hours", type=float, default=mtbf_hours,
                   help=f"a node's MTBF for the kill's 'auto' intervals (default {mtbf_hours}: "
                        f"{mtbf_hours * 3600:g} s)")
    p.add_argument("--shared-mbit", type=int, default=1000,
                   help="the shared directory on a file server behind one link of this many "
                        "Mbit/s, both nodes' (default 1000); 0: the cluster's own directory, "
                        "this machine's disk and page cache")
    p.add_argument("--quick", action="store_true", help=quick)
    p.add_argument("--json", help="also write the figures to this file")


def shared_where(mbit: int) -> str:
    """Returns what the shared directory is, for the report's lines."""
    return f"a file server on a {mbit} Mbit/s link" if mbit else "this machine's disk"


@contextlib.contextmanager
def cluster_and_share(mbit: int, prefix: str) -> Iterator[Tuple[Any, str]]:
    """Yields a throw-away Slurm cluster of two emulated nodes and a directory for the
    checkpoints (``prefix``...): on a file server behind a link of ``mbit`` Mbit/s
    (tests/harness/network_share.py, mounted before the nodes start so that both see it), or
    at 0 in the cluster's own directory. Both are gone after."""
    from tests.harness.network_share import NetworkShare
    from tests.harness.slurm_cluster import SlurmCluster

    with contextlib.ExitStack() as stack:
        share = stack.enter_context(NetworkShare(mbit)) if mbit else None
        cluster = stack.enter_context(
            SlurmCluster(nodes=("node1", "node2"), gpus={}, cpus_per_node=16))
        base = share.path if share else cluster.workdir
        yield cluster, stack.enter_context(tempfile.TemporaryDirectory(prefix=prefix, dir=base))


def step_times(output: str) -> List[Tuple[int, float]]:
    """Returns the (step, time) of each STEP_MARK line of ``output``."""
    out = []
    for line in output.splitlines():
        if line.startswith(STEP_MARK):
            step, at = line[len(STEP_MARK):].split()
            out.append((int(step), float(at)))
    return out


def ledger_saves(directory: str) -> List[Tuple[int, float]]:
    """Returns the (step, time it was whole) of each save in ``directory``'s ledger."""
    from mpi_resolver.long_jobs import ledger

    return [(r["step"], r["time"]) for r in ledger.read(directory) if r.get("event") == "save"]


def mean_lost(steps: Sequence[Tuple[int, float]],
              saves: Sequence[Tuple[int, float]]) -> Tuple[Optional[float], Optional[float]]:
    """Returns what a failure would have lost on the mean over the run's ``steps`` (each
    (step, time it ended)) from the first whole save on, (steps, seconds of training), each
    None where no save was whole: in steps, a failure at a step's end, each step alike, the
    step less the newest of ``saves`` ((step, time whole)) whole by then; in seconds, a
    failure at any time alike (failures come in time, not in steps: a run's slow steps weigh
    as long as they take), over each step from the end of the one before, the time since the
    end of the step that newest save holds."""
    ended = dict(steps)
    lost: List[int] = []
    weighed: List[Tuple[float, float]] = []  # (the mean loss within a step, its length)
    before: Optional[float] = None
    for step, at in steps:
        whole = [saved for saved, t in saves if t <= at]
        if whole:
            lost.append(step - max(whole))
            if before is not None and max(whole) in ended:
                span = at - before
                weighed.append((max(0.0, at - span / 2 - ended[max(whole)]), span))
        before = at
    total = sum(span for _, span in weighed)
    return (statistics.mean(lost) if lost else None,
            sum(v * span for v, span in weighed) / total if total else None)


def planned(plan: str) -> Tuple[Optional[float], Optional[int]]:
    """Returns the (seconds, steps) between two saves that an 'auto' plan line says, each
    None where it does not say it."""
    every = re.search(r"every (\d+(?:\.\d+)?) s", plan)
    steps = re.search(r"= (\d+) steps", plan)
    return (float(every.group(1)) if every else None, int(steps.group(1)) if steps else None)


def kill_figures(first_output: str, directory: str, kill_at: int,
                 restored: int) -> Dict[str, Any]:
    """Returns a kill's figures from its training's output and ledger: the 'auto' plans, the
    last one's seconds and steps between saves, the mean steps and seconds of training a
    failure would have lost (mean_lost), and what they come from (each step's end, each
    save's step and time whole). The step the next run ``restored`` was whole by the
    kill, even where the ledger had not recorded it yet or recorded it after worker 0's last
    step (a write that ended in the kill's own step is recorded at the next, or by the
    survivor as it ends)."""
    plans = [line.split("periodic checkpoints ", 1)[1] for line in first_output.splitlines()
             if "periodic checkpoints " in line]
    steps = [(s, t) for s, t in step_times(first_output) if s <= kill_at]
    saves = ledger_saves(directory)
    if restored and steps:  # whole by the kill: no later than worker 0's last step
        saves = [(s, min(t, steps[-1][1]) if s == restored else t) for s, t in saves]
        if restored not in [s for s, _ in saves]:
            saves.append((restored, steps[-1][1]))
    every_s, every = planned(plans[-1]) if plans else (None, None)
    per_failure, per_failure_s = mean_lost(steps, saves)
    return {"plans": plans, "interval": every, "interval_s": every_s,
            "per_failure": per_failure, "per_failure_s": per_failure_s,
            "steps": steps, "saves": sorted(saves)}


def kill_lines(kills: List[Dict[str, Any]], shared_only: str, plan: str) -> List[str]:
    """Returns a line for each kill: its step, where it restored, the steps lost, the mean a
    failure at any step would have lost (steps, seconds of training), and the 'auto' plan
    (``plan``: 'first' or 'last' of its run); a kill without the tier named ``shared_only``."""
    lines = []
    for k in kills:
        way = "with the tier" if k["tiered"] else shared_only
        chosen = k["plans"][:1] if plan == "first" else k["plans"][-1:]
        lines.append(f"  kill at step {k['killed_at']} ({k['mib']} MiB, {way}): restored step "
                     f"{k['restored']}, {k['lost']} steps lost; a failure at any step of the "
                     f"run would have lost {_mean(k)} on the mean; 'auto' chose"
                     f"{' last' if plan == 'last' else ''}: " + "; ".join(chosen))
    return lines


def lost_goals(kills: List[Dict[str, Any]]) -> List[str]:
    """Returns the goal's line for each size killed both ways: less training lost per
    failure with the tier (the mean over the run's steps, in seconds of training: a run
    whose steps the saves slow loses fewer, slower steps), beside the ratio of the two
    intervals (seconds) and the mean in steps."""
    lines = []
    for mib in sorted({k["mib"] for k in kills}):
        both = {k["tiered"]: k for k in kills if k["mib"] == mib}
        if True not in both or False not in both:
            continue
        tier, shared = both[True], both[False]
        with_tier, without = tier["per_failure_s"], shared["per_failure_s"]
        known = with_tier is not None and without is not None
        met = known and with_tier < without
        cut = f"{without / with_tier:.2f}" if known and with_tier else "-"
        ratio = "-" if not tier["interval_s"] or not shared["interval_s"] else \
            f"{shared['interval_s'] / tier['interval_s']:.2f}"
        lines.append(f"goal at {mib} MiB: less training lost per failure with the tier: "
                     f"{'met' if met else 'not met'} ({_seconds(with_tier)} against "
                     f"{_seconds(without)} on the mean, cut {cut} x; the intervals' ratio "
                     f"{ratio}; in steps {_mean(tier)} against {_mean(shared)}; at the kill "
                     f"{tier['lost']} against {shared['lost']} steps)")
    return lines


def _mean(kill: Dict[str, Any]) -> str:
    """Returns the mean a failure would have lost: '<steps> steps (<seconds> s)', '-' for
    either where unknown."""
    steps = "-" if kill["per_failure"] is None else f"{kill['per_failure']:.1f}"
    return f"{steps} steps ({_seconds(kill['per_failure_s'])})"


def _seconds(value: Optional[float]) -> str:
    return "- s" if value is None else f"{value:.2f} s"


def restore_goal(mib: int, local_s: float, shared_s: float, shared: str,
                 more: str = "") -> str:
    """Returns the goal's line at ``mib`` MiB: the restore from the local tier (``local_s``)
    faster than from ``shared`` (``shared_s``); ``more``: figures said after them."""
    return (f"goal at {mib} MiB: the restore from the local tier faster than from the "
            f"{shared}: {'met' if local_s < shared_s else 'not met'} ({local_s:.3f} s "
            f"against {shared_s:.3f} s{more})")
