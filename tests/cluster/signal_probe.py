"""A task that notes every signal it gets (tests/cluster/test_signals.py): one line
'<SIGNAME>' per signal in LOGDIR/task<SLURM_PROCID>.log, after a line 'ready'. It ignores
any further arguments (examples/train.sbatch passes train.py's), and exits once
LOGDIR/stop exists or after 120 s. LOGDIR: SIGNAL_PROBE_LOG, else the first argument."""

from __future__ import annotations

import os
import signal
import sys
import time

WATCHED = (signal.SIGUSR1, signal.SIGUSR2, signal.SIGTERM, signal.SIGURG)


def main() -> None:
    logdir = os.environ.get("SIGNAL_PROBE_LOG") or sys.argv[1]
    path = os.path.join(logdir, f"task{os.environ.get('SLURM_PROCID', '?')}.log")

    def note(signum: int, frame: object) -> None:
        with open(path, "a") as f:
            f.write(signal.Signals(signum).name + "\n")

    for s in WATCHED:
        signal.signal(s, note)
    with open(path, "a") as f:
        f.write("ready\n")
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not os.path.exists(os.path.join(logdir, "stop")):
        time.sleep(0.05)


if __name__ == "__main__":
    main()
