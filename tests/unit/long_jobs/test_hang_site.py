"""long_jobs.hang_site: where a hung worker is, from its threads' stacks: stuck in its own
code, its input pipeline or Python that TensorFlow runs; waiting inside TensorFlow's step; or
its stack does not say. The frames are shaped as a real run's (tests/cluster/test_hang.py)."""

from __future__ import annotations

import pytest

from mpi_resolver.long_jobs.hang_site import STUCK, UNKNOWN, WAITING, hang_site, where

pytestmark = pytest.mark.unit

LIB = ["/usr/lib/python3.11"]
SP = "/venv/lib/python3.11/site-packages/"
MAIN = ("/job/train.py", 90, "<module>")
LOOP = ("/job/train.py", 60, "train")
RUNPY = ("/usr/lib/python3.11/runpy.py", 88, "_run_code")
WAIT = ("/usr/lib/python3.11/threading.py", 320, "wait")
EXECUTE = (SP + "tensorflow/python/eager/execute.py", 53, "quick_execute")
FUNCTION = (SP + "tensorflow/python/eager/polymorphic_function/polymorphic_function.py", 833,
            "__call__")
FIT = (SP + "tf_keras/src/engine/training.py", 1807, "fit")
KERAS3 = (SP + "keras/src/models/functional.py", 180, "call")
ITERATOR = (SP + "tensorflow/python/data/ops/iterator_ops.py", 826, "__next__")
SCRIPT_OPS = (SP + "tensorflow/python/ops/script_ops.py", 268, "__call__")
GENERATOR_OP = (SP + "tensorflow/python/data/ops/from_generator_op.py", 198,
                "generator_py_func")
ENDLESS = ("/job/train.py", 30, "endless")
NUMPY = ("/usr/local/lib/python3.11/site-packages/numpy/core/fromnumeric.py", 57, "_wrapfunc")
BOOTSTRAP = ("/usr/lib/python3.11/threading.py", 995, "_bootstrap")
WAITING_WORDS = ("in TensorFlow's step (tensorflow/python/eager/execute.py:53 quick_execute): "
                 "waiting for another worker, or busy in TensorFlow; its own stack cannot tell "
                 "which")
PXLA = (SP + "jax/_src/interpreters/pxla.py", 395, "__call__")
AGREEMENT = ("/work/mpi_resolver/jax/termination.py", 75, "should_stop")
JAXLIB = ("/usr/lib/python3/dist-packages/jaxlib/xla_client.py", 12, "execute")
OWN_JAX = ("/home/u/jax/train.py", 7, "step")  # a user's own directory named jax
KV_GET = (SP + "mpi_resolver/jax/coordinator.py", 117, "get")  # a native wait below it
TF_AGREE = ("/work/mpi_resolver/tensorflow/coordinator.py", 80, "agree")
MPI_WAIT = (SP + "mpi_resolver/exchange/transport.py", 141, "_wait")
AGREEING = "in an agreement of mpi_resolver's with the other workers ({}): waiting for " \
    "another worker"
JAX_WORDS = ("in JAX's step (jax/_src/interpreters/pxla.py:395 __call__): waiting for another "
             "worker, or busy in JAX; its own stack cannot tell which")
RUN_BY_TF = ", Python that TensorFlow runs for the step (a tf.data generator or a py_function)"


@pytest.mark.parametrize("main, others, verdict, frame, words", [
    pytest.param([MAIN, LOOP], [], STUCK, LOOP, "stuck in /job/train.py:60 train",
                 id="main-thread-in-own-code"),
    pytest.param([RUNPY, MAIN, LOOP, WAIT], [], STUCK, LOOP, "stuck in /job/train.py:60 train",
                 id="own-code-waiting-on-a-lock-of-the-standard-library"),
    pytest.param([MAIN, LOOP, AGREEMENT, PXLA], [], WAITING, PXLA, JAX_WORDS,
                 id="jax-running-a-computation-waits"),
    pytest.param([MAIN, LOOP, JAXLIB], [], WAITING, JAXLIB,
                 "in JAX's step (jaxlib/xla_client.py:12 execute): waiting for another worker, "
                 "or busy in JAX; its own stack cannot tell which", id="jaxlib-waits"),
    pytest.param([MAIN, LOOP, AGREEMENT, KV_GET], [], WAITING, KV_GET,
                 AGREEING.format("mpi_resolver/jax/coordinator.py:117 get"),
                 id="the-package-s-own-agreement-over-jax-waits"),
    pytest.param([MAIN, LOOP, TF_AGREE, WAIT], [], WAITING, TF_AGREE,
                 AGREEING.format("/work/mpi_resolver/tensorflow/coordinator.py:80 agree"),
                 id="the-package-s-own-agreement-over-tensorflow-waits"),
    pytest.param([MAIN, LOOP, MPI_WAIT], [], WAITING, MPI_WAIT,
                 AGREEING.format("mpi_resolver/exchange/transport.py:141 _wait"),
                 id="the-package-s-own-wait-over-mpi"),
    pytest.param([MAIN, OWN_JAX], [], STUCK, OWN_JAX, "stuck in /home/u/jax/train.py:7 step",
                 id="a-directory-named-jax-is-the-user-s-own"),
    pytest.param([MAIN, LOOP, FUNCTION, EXECUTE], [], WAITING, EXECUTE, WAITING_WORDS,
                 id="main-thread-in-the-step-function"),
    pytest.param([MAIN, FIT, FUNCTION, EXECUTE], [[BOOTSTRAP, LOOP]], WAITING, EXECUTE,
                 WAITING_WORDS, id="fit-waiting-other-thread-in-own-code-is-not-the-step"),
    pytest.param([MAIN, LOOP, KERAS3], [], WAITING, KERAS3,
                 "in TensorFlow's step (keras/src/models/functional.py:180 call): waiting for "
                 "another worker, or busy in TensorFlow; its own stack cannot tell which",
                 id="keras-3-counts-as-tensorflow"),
    pytest.param([MAIN, LOOP, ITERATOR], [], STUCK, ITERATOR,
                 "stuck in its input pipeline (tf.data, "
                 "tensorflow/python/data/ops/iterator_ops.py:826 __next__)",
                 id="main-thread-in-its-input-pipeline"),
    pytest.param([MAIN, LOOP, FUNCTION, EXECUTE],
                 [[BOOTSTRAP], [BOOTSTRAP, SCRIPT_OPS, GENERATOR_OP, ENDLESS, WAIT]],
                 STUCK, ENDLESS, "stuck in /job/train.py:30 endless" + RUN_BY_TF,
                 id="a-generator-tensorflow-runs-hangs"),
    pytest.param([MAIN, LOOP, FUNCTION, EXECUTE], [[SCRIPT_OPS, GENERATOR_OP, WAIT]],
                 STUCK, WAIT, "stuck in /usr/lib/python3.11/threading.py:320 wait" + RUN_BY_TF,
                 id="nothing-own-below-script-ops-innermost-frame"),
    pytest.param([MAIN, LOOP, EXECUTE], [[BOOTSTRAP, SCRIPT_OPS, ENDLESS, WAIT]], STUCK,
                 ENDLESS, "stuck in /job/train.py:30 endless" + RUN_BY_TF,
                 id="a-py-function-tensorflow-calls-directly"),
    pytest.param([MAIN, SCRIPT_OPS, ENDLESS, SCRIPT_OPS, GENERATOR_OP, LOOP], [], STUCK, LOOP,
                 "stuck in /job/train.py:60 train" + RUN_BY_TF,
                 id="below-the-last-script-ops-frame"),
    pytest.param([MAIN, LOOP, SCRIPT_OPS], [[BOOTSTRAP, SCRIPT_OPS, ENDLESS]], STUCK,
                 SCRIPT_OPS, "stuck in tensorflow/python/ops/script_ops.py:268 __call__"
                 + RUN_BY_TF, id="the-main-thread-first"),
    pytest.param([MAIN, LOOP, NUMPY], [], STUCK, NUMPY,
                 "stuck in numpy/core/fromnumeric.py:57 _wrapfunc",
                 id="site-packages-inside-the-standard-librarys-directory-are-not-its"),
    pytest.param([("/usr/lib/python3/dist-packages/yaml/x.py", 3, "f")], [], STUCK,
                 ("/usr/lib/python3/dist-packages/yaml/x.py", 3, "f"), "stuck in yaml/x.py:3 f",
                 id="dist-packages"),
    pytest.param([("/usr/lib/python3.11x/own.py", 5, "g")], [], STUCK,
                 ("/usr/lib/python3.11x/own.py", 5, "g"),
                 "stuck in /usr/lib/python3.11x/own.py:5 g", id="a-folder-that-only-starts-alike"),
    pytest.param([MAIN, LOOP, ("<frozen importlib._bootstrap>", 1176, "_find_and_load")], [],
                 STUCK, LOOP, "stuck in /job/train.py:60 train", id="frozen-modules-are-python's"),
    pytest.param([RUNPY, BOOTSTRAP, WAIT], [[BOOTSTRAP, LOOP]], UNKNOWN, WAIT,
                 "cannot tell where: its main thread shows no frame outside Python's own library",
                 id="only-the-standard-library"),
    pytest.param([], [[BOOTSTRAP, LOOP]], UNKNOWN, None,
                 "cannot tell where: its main thread shows no frame outside Python's own library",
                 id="no-main-thread-frames"),
])
def test_hang_site(main, others, verdict, frame, words):
    site = hang_site(main, others, LIB)
    assert (site.verdict, site.frame, site.words) == (verdict, frame, words)


@pytest.mark.parametrize("library, wait", [
    (["/usr/lib/python3.11/"], WAIT), (["/opt/x", "/usr/lib/python3.11"], WAIT),
    (["/opt/pythonX"], ("/opt/pythonX/threading.py", 320, "wait")),
])
def test_the_librarys_directories_as_given(library, wait):
    assert hang_site([MAIN, LOOP, wait], [], library).frame == LOOP


def test_without_a_library_every_frame_is_someones():
    assert hang_site([MAIN, LOOP, WAIT], [], []).frame == WAIT


@pytest.mark.parametrize("frame, text", [
    (("/job/train.py", 7, "f"), "/job/train.py:7 f"),
    ((SP + "tensorflow/python/eager/execute.py", 53, "quick_execute"),
     "tensorflow/python/eager/execute.py:53 quick_execute"),
    (("/a/site-packages/b/site-packages/c.py", 1, "h"), "c.py:1 h"),
    (("/a/dist-packages/b.py", 2, "i"), "b.py:2 i"),
])
def test_where(frame, text):
    assert where(frame) == text
