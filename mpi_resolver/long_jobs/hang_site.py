"""Where a worker whose step hangs is, read from its own threads' Python stacks: stuck in its
own code, or waiting inside TensorFlow's or JAX's step for a peer (pure: frames in, a verdict
out).

A worker whose main thread is inside TensorFlow's step function (the all-reduce, the
strategy's run), or inside JAX running a computation (a collective, LongJob's agreement), is
waiting, for a peer or for the framework itself: from its own stack it cannot tell which. A
worker whose main thread is in its own code, or in its input pipeline (tf.data), or that has a
thread in Python code TensorFlow runs for the step (a tf.data generator, a py_function), is
the one that did not arrive.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Sequence, Tuple

__all__ = ["Frame", "Site", "hang_site", "where", "verdict_of", "STUCK", "WAITING", "UNKNOWN"]

#: A frame as traceback.extract_stack gives it: (file, line, function).
Frame = Tuple[str, int, str]
#: Site.verdict: this worker did not arrive; it waits for another; its stack does not say.
STUCK, WAITING, UNKNOWN = "stuck", "waiting", "unknown"

#: TensorFlow running Python for a graph: tf.data's from_generator, py_function.
_CALLS_PYTHON = "/tensorflow/python/ops/script_ops.py"
_INPUT = "/tensorflow/python/data/"
_TENSORFLOW = ("/tensorflow/", "/tf_keras/", "/keras/src/")
_PACKAGES = ("/site-packages/", "/dist-packages/")
_JAX = tuple(f"{packages}{name}/" for packages in _PACKAGES for name in ("jax", "jaxlib"))
#: The package's own waits for the other workers: its agreements over the frameworks'
#: coordination services (a native wait below: no framework frame) and over MPI.
_AGREEING = ("/mpi_resolver/jax/coordinator.py", "/mpi_resolver/tensorflow/coordinator.py",
             "/mpi_resolver/exchange/")
_FROZEN = "<frozen "
_WAITING_WORDS = "waiting for another worker"


@dataclass(frozen=True)
class Site:
    """Where the process is: its ``verdict`` (STUCK, WAITING, UNKNOWN), the frame that says
    so (None where there is none), and the words for the line."""

    verdict: str
    frame: Optional[Frame]
    words: str


def hang_site(main: Sequence[Frame], others: Sequence[Sequence[Frame]],
              library: Sequence[str]) -> Site:
    """Returns where the process is, from its main thread's frames and its other threads'
    (each outermost first); ``library``: the standard library's directories, whose frames
    (threading's waits, queue's) are passed over for their callers'."""
    for stack in (main, *others):
        site = _python_run_by_tensorflow(stack, library)
        if site is not None:
            return site
    frame = _innermost(main, library, skip=())
    if frame is None:
        return Site(UNKNOWN, main[-1] if main else None,
                    "cannot tell where: its main thread shows no frame outside Python's own "
                    "library")
    if any(mark in frame[0] for mark in _AGREEING):
        return Site(WAITING, frame, f"in an agreement of mpi_resolver's with the other "
                                    f"workers ({where(frame)}): {_WAITING_WORDS}")
    framework = "JAX" if any(mark in frame[0] for mark in _JAX) else \
        "TensorFlow" if _is_tensorflow(frame[0]) else None
    if framework is None:
        return Site(STUCK, frame, f"stuck in {where(frame)}")
    if _INPUT in frame[0]:
        return Site(STUCK, frame, f"stuck in its input pipeline (tf.data, {where(frame)})")
    return Site(WAITING, frame,
                f"in {framework}'s step ({where(frame)}): {_WAITING_WORDS}, or busy in "
                f"{framework}; its own stack cannot tell which")


def verdict_of(words: str) -> str:
    """Returns the verdict that a Site's ``words`` say (as the watchdog's line prints them):
    STUCK, WAITING or UNKNOWN."""
    if words.startswith("stuck "):
        return STUCK
    return WAITING if _WAITING_WORDS in words else UNKNOWN


def where(frame: Frame) -> str:
    """Returns 'file:line function', the file's path cut after site-packages."""
    path = frame[0]
    for mark in _PACKAGES:
        if mark in path:
            path = path.split(mark)[-1]
    return f"{path}:{frame[1]} {frame[2]}"


def _python_run_by_tensorflow(stack: Sequence[Frame],
                              library: Sequence[str]) -> Optional[Site]:
    """Returns STUCK at the innermost frame of code TensorFlow runs for a graph in
    ``stack`` (below its last script_ops frame); None where it runs none."""
    calls = [i for i, f in enumerate(stack) if f[0].endswith(_CALLS_PYTHON)]
    if not calls:
        return None
    inner = stack[calls[-1] + 1:]
    frame = _innermost(inner, library, skip=_TENSORFLOW) or stack[-1]
    return Site(STUCK, frame, f"stuck in {where(frame)}, Python that TensorFlow runs for the "
                "step (a tf.data generator or a py_function)")


def _innermost(stack: Sequence[Frame], library: Sequence[str],
               skip: Sequence[str]) -> Optional[Frame]:
    """Returns the innermost frame of ``stack`` outside ``library`` and ``skip``, else None."""
    for frame in reversed(stack):
        path = frame[0]
        if not _in_library(path, library) and not any(s in path for s in skip):
            return frame
    return None


def _in_library(path: str, library: Sequence[str]) -> bool:
    """Returns whether ``path`` is in Python's own library (not in its installed packages),
    frozen modules ('<frozen importlib._bootstrap>') included."""
    return path.startswith(_FROZEN) or (any(path.startswith(d.rstrip("/") + "/") for d in library)
            and not any(mark in path for mark in _PACKAGES))


def _is_tensorflow(path: str) -> bool:
    """Returns whether ``path`` is TensorFlow's or Keras' code."""
    return any(mark in path for mark in _TENSORFLOW)

