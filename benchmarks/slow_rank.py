"""A slow rank, named (issue 40): how long after a rank slows down it is named, and whether a
clean run of the same training names anyone.

    python benchmarks/slow_rank.py [--round SECONDS] [--json FILE]

On a throw-away 2-node Slurm cluster of its own (tests/harness/slurm_cluster.py), two steps
of `srun -N2 --ntasks-per-node=1 --mpi=pmix python examples/train.py --checkpoint-dir ...`
train side by side with MPI_RESOLVER_STRAGGLER_ROUND=ROUND (default: the package's own, 45 s).
Once worker 0 of each has said its rounds' length, each step's two tasks are pinned to a CPU
of their own step's (the first CPU for one step, the second for the other: whatever else the
machine runs weighs the same on both ranks of a step), and worker 1's Python process of one
step is held to 70 % of its time (SIGSTOP for 30 ms of every 100 ms, as cpulimit does: its
CPU limited about 30 %). Then, measured on the wall clock:
- the seconds from the limit to worker 0's line naming rank 1, the rounds that took, and the
  ratio the line gives (its probe's time over its peer's);
- the clean step's alarms (none expected) in twice the rule's window of rounds at least;
- what the rounds cost: the probe's seconds (the peer's time in the line) a round.
Both steps end with SIGTERM to their tasks (a save, exit 143). Every figure is measured in
this run.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Dict, Optional, Sequence

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks import restart  # noqa: E402
from benchmarks.restart import RANK_ENV, START, TRAIN, Lines  # noqa: E402
from mpi_resolver.long_jobs.stragglers import WINDOW  # noqa: E402
from tests.harness.cpu_limit import Limit, cpus, pin  # noqa: E402
from tests.harness.slurm_cluster import SlurmCluster  # noqa: E402

ROUNDS = re.compile(r"slow-rank rounds: every [\d.]+ s of training \(the first after (\d+) "
                    r"steps\)")
SLOW = re.compile(r"rank 1 on (\S+) is slow: ([\d.e+-]+) s for what its peers do in "
                  r"([\d.e+-]+) s \(([\d.]+) times their median\), slow in (\d+) of its "
                  r"last (\d+) rounds")


def task_pid(cluster: SlurmCluster, directory: Path, rank: int) -> int:
    """Returns the PID of the train.py task ``rank`` of the step writing ``directory``."""
    return restart.task_pid(cluster, rank, str(directory))


def start(cluster: SlurmCluster, directory: Path, round_s: str) -> Lines:
    env = {**cluster.env, **RANK_ENV, "MPI_RESOLVER_STRAGGLER_ROUND": round_s,
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{cluster.env['PATH']}"}
    return Lines(["srun", "-N2", "--ntasks-per-node=1", "--mpi=pmix", "--label",
                  "--kill-on-bad-exit=1", sys.executable, TRAIN, "--epochs", "100000",
                  "--steps-per-epoch", "100", "--log-every", "100", "--checkpoint-dir",
                  str(directory), "--port-base", "auto"], env, cluster.workdir)


def wait_line(run: Lines, pattern: "re.Pattern[str]", seconds: float,
              after: float = 0.0) -> "tuple[float, re.Match[str]]":
    """Returns (time, match) of ``run``'s first line after ``after`` matching ``pattern``.

    Raises:
      RuntimeError: none within ``seconds``, or the step ended first.
    """
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        for at, line in list(run.lines):
            m = pattern.search(line)
            if at >= after and m:
                return at, m
        if run.proc.poll() is not None:
            break
        time.sleep(0.2)
    tail = "\n".join(line for _, line in run.lines[-30:])
    raise RuntimeError(f"no line matching {pattern.pattern!r} within {seconds:g} s:\n{tail}")


def end(cluster: SlurmCluster, run: Lines, directory: Path) -> None:
    """SIGTERM to both tasks, as Slurm sends it: each saves and exits."""
    for rank in (0, 1):
        try:
            os.kill(task_pid(cluster, directory, rank), signal.SIGTERM)
        except (RuntimeError, ProcessLookupError):
            pass  # gone already
    try:
        run.proc.wait(120)
    finally:
        if run.proc.poll() is None:
            os.killpg(run.proc.pid, signal.SIGKILL)


def measure(cluster: SlurmCluster, round_s: str) -> Dict:
    """Returns the figures of one slowed and one clean step side by side.

    Raises:
      RuntimeError: a step did not say its rounds, or its rank was not named, in time.
    """
    work = Path(cluster.workdir)
    clean = start(cluster, work / "clean", round_s)
    slowed = start(cluster, work / "slowed", round_s)
    limit: Optional[Limit] = None
    try:
        agreed = {name: wait_line(run, ROUNDS, START)[0]
                  for name, run in (("clean", clean), ("slowed", slowed))}
        for cpu, name in zip(cpus() * 2, ("clean", "slowed"), strict=False):
            for rank in (0, 1):  # a step's ranks share a CPU: the rest weighs on both alike
                pin(task_pid(cluster, work / name, rank), cpu)
        limit = Limit(task_pid(cluster, work / "slowed", 1))
        limit.start()
        limited = time.monotonic()
        named_at, m = wait_line(slowed, SLOW, START + 2 * WINDOW * float(round_s), limited)
        # the clean step trains 2 WINDOW rounds at least: its chance to name someone
        time.sleep(max(float(round_s), 2 * WINDOW * float(round_s)
                       - (time.monotonic() - agreed["clean"])))
        clean_rounds = int((time.monotonic() - agreed["clean"]) / float(round_s))
    finally:
        if limit is not None:
            limit.stop()
        for name, run in (("clean", clean), ("slowed", slowed)):
            end(cluster, run, work / name)
    return {"round_s": float(round_s), "named_after_s": named_at - limited,
            "node": m.group(1), "rank_s": float(m.group(2)), "probe_s": float(m.group(3)),
            "ratio": float(m.group(4)), "rounds": int(m.group(5)), "window": int(m.group(6)),
            "clean_alarms": sum("is slow:" in line for _, line in clean.lines),
            "clean_said": [line for _, line in clean.lines if "is slow:" in line],
            "clean_rounds_about": clean_rounds, "probe_cost": float(m.group(3)) / float(round_s),
            **reported(work / "slowed"),
            "said": [line.split(": ", 1)[1] for _, line in slowed.lines
                     if ROUNDS.search(line) or SLOW.search(line)]}


def reported(directory: Path) -> Dict:
    """Returns what `mpi-resolver report` says of the slowed step: its count of slow ranks
    (--json) and its lines naming one."""
    def report(*args: str) -> str:
        return subprocess.run([sys.executable, "-m", "mpi_resolver", "report", *args,
                               str(directory)], capture_output=True, text=True,
                              check=True).stdout

    return {"report_slow_ranks": json.loads(report("--json"))["slow_ranks"],
            "report_lines": [line for line in report().splitlines() if SLOW.search(line)]}


def main(argv: Optional[Sequence[str]] = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--round", default="45", help="MPI_RESOLVER_STRAGGLER_ROUND (seconds)")
    p.add_argument("--json", help="also write the figures to this file")
    args = p.parse_args(argv)
    with SlurmCluster(nodes=("node1", "node2"), gpus={}) as cluster:
        r = measure(cluster, args.round)
    print(f"Rank 1 of a 2-rank training held to 70 % of its time, rounds every "
          f"{r['round_s']:g} s (load average {os.getloadavg()[0]:.2f}):")
    print("| figure | measured |\n|---|---|")
    print(f"| named after the limit (s) | {r['named_after_s']:.1f} |")
    print(f"| its probe against its peer's (s) | {r['rank_s']:.3f} / {r['probe_s']:.3f} "
          f"= {r['ratio']:.2f} |")
    print(f"| the clean step's alarms in about {r['clean_rounds_about']} rounds | "
          f"{r['clean_alarms']} |")
    print(f"| the rounds' cost (probe / round) | {r['probe_cost'] * 100:.2f} % |")
    print(f"named within five minutes: {'yes' if r['named_after_s'] <= 300 else 'NO'}")
    print("worker 0's lines, then the report's:", *r["said"], *r["report_lines"], sep="\n")
    if args.json:
        Path(args.json).write_text(json.dumps(r, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
