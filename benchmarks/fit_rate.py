"""Training steps per second of an example on the throw-away cluster, from its own lines
(``epoch N/E ... (T s)``, T printed to a tenth of a second): used by benchmarks/jax_init.py.

The steps of epochs 2..E over the time they took (the first epoch, with its compilation, left
out). A run whose epochs 2..E took under SHORTEST_SPAN is run again with the steps that make
twice that at the rate seen, at most twice, then refused: at a tenth of a second, a shorter
span measures nothing."""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Callable, List, Optional

ROOT = Path(__file__).resolve().parent.parent
#: The shortest span of epochs 2..E timed: the epoch lines print tenths of a second.
SHORTEST_SPAN = 1.0
#: Runs of one measurement: the first, and at most two again with more steps.
ATTEMPTS = 3


def span_of(times: List[float]) -> float:
    """Returns the seconds from the first epoch's end to the last's, to the tenth the lines
    print (2.3 - 1.3 is 0.9999999999999998 in floating point: 1.0 here)."""
    return round(times[-1] - times[0], 1)


def more_steps(steps: int, span: float) -> int:
    """Returns the steps per epoch that make a span of ``span`` seconds (at ``steps``) twice
    SHORTEST_SPAN: ten times as many where it was not measurable at all."""
    if span <= 0:
        return steps * 10
    return math.ceil(steps * 2 * SHORTEST_SPAN / span)


def rate(epochs: int, steps: int, times: List[float], script: str = "the run") -> float:
    """Returns the steps per second over epochs 2..E from each epoch's end (seconds since the
    start, as the lines print them).

    Raises:
      SystemExit: the span is under SHORTEST_SPAN, too short to time at a tenth of a second.
    """
    span = span_of(times)
    if span < SHORTEST_SPAN:
        raise SystemExit(f"{script}: epochs 2-{epochs} of {steps} steps took {span:.1f} s, too "
                         f"short to time (the lines print tenths of a second): raise "
                         f"--fit-steps so that they take {SHORTEST_SPAN:g} s or more")
    return (epochs - 1) * steps / span


def steps_per_second(cluster, python: str, script: str, epochs: int, steps: int,
                     run: Optional[Callable[..., List[float]]] = None) -> float:
    """Runs ``script`` on both nodes (``run``: epoch_times); returns its steps per second
    over epochs 2..E, run again with more steps (at most twice) where they were too short.

    Raises:
      SystemExit: a run failed, or the last run was still too short to time.
    """
    run = run or epoch_times
    for attempt in range(ATTEMPTS):
        times = run(cluster, python, script, epochs, steps)
        span = span_of(times)
        if span >= SHORTEST_SPAN or attempt == ATTEMPTS - 1:
            return rate(epochs, steps, times, script)
        more = more_steps(steps, span)
        print(f"{script}: epochs 2-{epochs} of {steps} steps took {span:.1f} s, too short to "
              f"time; again with {more} steps", flush=True)
        steps = more
    raise AssertionError("unreachable")


def epoch_times(cluster, python: str, script: str, epochs: int, steps: int) -> List[float]:
    """Runs examples/``script`` with ``python`` on both nodes, one worker each; returns when
    each epoch ended (seconds since its start, as its lines print them).

    Raises:
      SystemExit: the run failed, or printed another number of epochs.
    """
    env = {"PYTHONPATH": str(ROOT), "JAX_PLATFORMS": "cpu", "TF_CPP_MIN_LOG_LEVEL": "3",
           "XLA_FLAGS": "--xla_cpu_multi_thread_eigen=false", "OMP_NUM_THREADS": "1",
           "PYTHONDONTWRITEBYTECODE": "1", "TF_NUM_INTRAOP_THREADS": "1",
           "TF_NUM_INTEROP_THREADS": "1"}
    # train.py's Keras is TensorFlow's, whatever the caller's environment says
    env["KERAS_BACKEND"] = "jax" if script == "train_jax.py" else "tensorflow"
    p = cluster.run(["srun", "-N2", "--ntasks-per-node=1", "--mpi=pmix", python,
                     str(ROOT / "examples" / script), "--epochs", str(epochs),
                     "--steps-per-epoch", str(steps), "--port-base", "auto"],
                    timeout=600, env=env)
    times = [float(t) for t in re.findall(r"^epoch \d+/\d+: .*\((\d+\.\d) s\)$", p.stdout,
                                          re.M)]
    if p.returncode != 0 or len(times) != epochs:
        raise SystemExit(f"{script}: exit {p.returncode}\n{p.stdout[-3000:]}\n"
                         f"{p.stderr[-3000:]}")
    return times
