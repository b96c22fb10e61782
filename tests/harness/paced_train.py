"""examples/train.py with each step of its custom loop held to at least PACE seconds (it sleeps
for the rest), as a larger model's step would take, for the jobs that train until Slurm's time
limit (tests/cluster/test_long_jobs.py): a minute of 7 ms steps kept both of the machine's
cores busy for nothing; paced, the same minute costs little CPU. Everything else is
train.py's own: its arguments, its preemption handler, its saves and exits.

    python paced_train.py [--pace S] TRAIN.PY [train.py's arguments]  # a task of srun

--pace S: the step's least seconds (default PACE; 0: train.py's own pace).
"""

from __future__ import annotations

import os
import sys
import time
from typing import List, Sequence, Tuple

#: A step's least seconds: a paced 2-worker training then costs about 0.1 CPU-s a second
#: (measured: 1.6 unpaced, 0.4 at 0.05 s, where TensorFlow's own threads wake as often).
PACE = 0.2


def paced(tick, pace: float = PACE, clock=time.monotonic, sleep=time.sleep):
    """Returns ``tick`` that, called after each step, first sleeps until the step (since the
    last call) took ``pace`` seconds."""
    last = [clock()]

    def tick_paced() -> None:
        rest = pace - (clock() - last[0])
        if rest > 0:
            sleep(rest)
        last[0] = clock()
        tick()

    return tick_paced


def split_pace(argv: Sequence[str]) -> Tuple[float, List[str]]:
    """Returns the pace (--pace S first, else PACE) and the rest of ``argv`` (train.py's path
    and its arguments); raises SystemExit naming --pace where its value is not a number of
    seconds >= 0."""
    if list(argv[:1]) != ["--pace"]:
        return PACE, list(argv)
    try:
        pace = float(argv[1])
    except (IndexError, ValueError):
        pace = -1.0
    if not pace >= 0:
        raise SystemExit(f"paced_train.py: --pace takes seconds >= 0, got {argv[1:2]}")
    return pace, list(argv[2:])


def main() -> int:
    pace, args = split_pace(sys.argv[1:])
    train_py = args[0]
    sys.argv = [train_py, *args[1:]]
    sys.path.insert(0, os.path.dirname(train_py))
    import train  # examples/train.py, as a module: its main() is called below

    loop = train.train_epochs

    def train_epochs(*args, **kwargs):
        tick = kwargs.pop("tick", args[8] if len(args) > 8 else lambda: None)
        return loop(*args[:8], tick=paced(tick, pace), **kwargs)

    train.train_epochs = train_epochs
    return train.main()


if __name__ == "__main__":
    sys.exit(main())
