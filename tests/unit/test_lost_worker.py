"""examples/lost_worker.py: which worker TensorFlow's error names, the line printed, the hook.

The messages are TensorFlow's own, as the survivor of a worker killed or stopped on the
emulated nodes got them (tests/cluster/test_lost_worker.py runs that for real); frames cut.
"""

from __future__ import annotations

import importlib.util
import io
import sys
import threading
from pathlib import Path
from types import SimpleNamespace

import pytest

from tests.docs.blocks import assert_sample, block

pytestmark = pytest.mark.unit

_spec = importlib.util.spec_from_file_location(
    "lost_worker", Path(__file__).resolve().parents[2] / "examples" / "lost_worker.py")
lw = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(lw)

CLUSTER = {"worker": ["node1:24610", "node2:24610", "node3:24610"]}
CHIEF = ("worker", 0)
FRAME = ("Graph execution error:\n\nDetected at node CollectiveReduceV2 defined at (most recent "
         "call last):\n  File \"train.py\", line 335, in <lambda>\n\n")
TAIL = ("\nThe error could be from a previous operation. Restart your program to reset.\n"
        "\t [[{{node CollectiveReduceV2}}]] [Op:__inference_train_step_514]")
#: TensorFlow 2.21, a stopped worker (and a killed one no collective was talking to)
HEARTBEAT_221 = (FRAME + "Collective ops is aborted by: Error reported from /job:worker/task:1: "
                 "The following tasks are unhealthy (stopped sending heartbeats):\n"
                 "/job:worker/replica:0/task:1\nThe tasks have crashed. Check the task logs "
                 "for an earlier error, or scheduler events (e.g. preemption, eviction) to "
                 "debug further." + TAIL)
#: TensorFlow 2.15.1, the same
HEARTBEAT_215 = (FRAME + "Collective ops is aborted by: Error reported from /job:worker/task:1: "
                 "Task /job:worker/replica:0/task:1 heartbeat timeout. This indicates that the "
                 "remote task has failed, got preempted, or crashed unexpectedly. Check the "
                 "task logs for an earlier error to debug further." + TAIL)
#: TensorFlow 2.21, a killed worker
RESET_221 = (FRAME + "Collective ops is aborted by: recvmsg:Connection reset by peer\n"
             "Additional GRPC error information from remote target /job:worker/replica:0/task:1"
             " while calling /tensorflow.WorkerService/RecvBuf:\n:UNKNOWN:Error received from "
             "peer  {grpc_status:14, grpc_message:\"recvmsg:Connection reset by peer\"}" + TAIL)
#: TensorFlow 2.15.1, a killed worker
CLOSED_215 = (FRAME + "Collective ops is aborted by: Socket closed\nAdditional GRPC error "
              "information from remote target /job:worker/replica:0/task:1 while calling "
              "/tensorflow.WorkerService/RecvBuf:\n:{\"created\":\"@1795616677.010451245\","
              "\"description\":\"Error received from peer ipv4:10.199.2.3:24610\",\"grpc_message"
              "\":\"Socket closed\",\"grpc_status\":14}" + TAIL)
#: --collective-timeout shorter than the heartbeat: names nobody
TIMED_OUT = FRAME + "Collective has timed out during execution." + TAIL


@pytest.mark.parametrize("message, reason", [
    pytest.param(HEARTBEAT_221, "The following tasks are unhealthy (stopped sending heartbeats)",
                 id="2.21 heartbeat"),
    pytest.param(HEARTBEAT_215, "Task /job:worker/replica:0/task:1 heartbeat timeout",
                 id="2.15 heartbeat"),
    pytest.param(RESET_221, "recvmsg:Connection reset by peer", id="2.21 reset"),
    pytest.param(CLOSED_215, "Socket closed", id="2.15 socket closed"),
])
def test_tensorflow_names_the_lost_task(message, reason) -> None:
    assert lw.named_tasks(message, CLUSTER, CHIEF) == [("worker", 1)]
    assert lw.lost_tasks(message, CLUSTER, CHIEF, check=_never_called) == ([("worker", 1)],
                                                                          lw.NAMED)
    assert lw.reason(message) == reason


def test_reason_of_an_error_that_names_nobody() -> None:
    assert lw.named_tasks(TIMED_OUT, CLUSTER, CHIEF) == []
    assert lw.reason(TIMED_OUT) == "Collective has timed out during execution"
    assert lw.reason("") == ""
    assert lw.reason("x" * 200) == "x" * 157 + "..."


def test_own_task_and_tasks_outside_the_cluster_are_not_named() -> None:
    text = "/job:worker/replica:0/task:0 /job:worker/task:7 /job:ps/replica:0/task:0 " \
           "/job:worker/task:2 /job:worker/replica:0/task:2"
    assert lw.named_tasks(text, CLUSTER, CHIEF) == [("worker", 2)]
    # the resumed worker 1 names the survivor it lost, worker 0
    assert lw.named_tasks("remote target /job:worker/replica:0/task:0", CLUSTER,
                          ("worker", 1)) == [("worker", 0)]


def test_an_address_alone_is_mapped_to_its_task() -> None:
    text = "Error received from peer ipv4:10.0.0.3:24610 and ipv4:10.0.0.9:24610"
    addresses = {"10.0.0.2:24610": ("worker", 0), "10.0.0.3:24610": ("worker", 1)}
    assert lw.named_tasks(text, CLUSTER, CHIEF, addresses) == [("worker", 1)]
    assert lw.named_tasks(text, CLUSTER, CHIEF) == []
    loopback = {"worker": ["localhost:24610", "127.0.0.1:24611"]}
    assert lw.ip_addresses(loopback) == {"127.0.0.1:24610": ("worker", 0),
                                        "127.0.0.1:24611": ("worker", 1)}
    assert lw.lost_tasks("from peer ipv4:127.0.0.1:24611", loopback, CHIEF) == (
        [("worker", 1)], lw.NAMED)


def test_where_tensorflow_names_nobody_the_silent_peers_are_lost() -> None:
    asked = []

    def check(task: str, timeout_ms: int) -> None:
        asked.append((task, timeout_ms))
        if task.endswith("task:2"):
            raise RuntimeError("UnavailableError: failed to connect to all addresses")

    lost, how = lw.lost_tasks(TIMED_OUT, CLUSTER, CHIEF, check)
    assert (lost, how) == ([("worker", 2)], "did not answer a probe within 3 s")
    assert sorted(asked) == [("/job:worker/replica:0/task:1", 3000),
                             ("/job:worker/replica:0/task:2", 3000)]
    lost, how = lw.lost_tasks(TIMED_OUT, CLUSTER, CHIEF, lambda task, ms: None)
    assert (lost, how) == ([], "TensorFlow's error names no task, and every other task "
                               "answered a probe")
    assert lw.lost_tasks(TIMED_OUT, CLUSTER, CHIEF) == ([], "TensorFlow's error names no task")


def test_a_probe_that_never_returns_counts_as_lost() -> None:
    release = threading.Event()

    def check(task: str, timeout_ms: int) -> None:
        if task.endswith("task:1"):
            release.wait(30)  # a stopped peer, and a probe that ignores its timeout

    try:
        assert lw.probe([("worker", 1), ("worker", 2)], check, seconds=0.1) == [("worker", 1)]
    finally:
        release.set()


def resolution():
    layout = SimpleNamespace(jobs=[("worker", 0, 3)], placement=["node1", "node2", "node3"],
                             addresses=CLUSTER["worker"])
    return SimpleNamespace(layout=layout, task=CHIEF, cluster=lambda: CLUSTER)


def test_the_line_names_task_rank_node_and_address() -> None:
    res = resolution()
    assert lw.describe(res, ("worker", 2)) == "worker:2 (rank 2 on node3, node3:24610)"
    assert lw.describe(res, ("ps", 0)) == "ps:0"
    assert lw.summary(res, CHIEF, [("worker", 1)], lw.NAMED, HEARTBEAT_215, "UnavailableError") \
        == ("train.py: lost worker:1 (rank 1 on node2, node2:24610). TensorFlow: "
            "UnavailableError: Task /job:worker/replica:0/task:1 heartbeat timeout. This worker, "
            "worker:0 (rank 0 on node1, node1:24610), exits 1 now.")
    assert_sample(block("lost-worker-line"), lw.summary(  # the docs' line, but for the port
        res, CHIEF, [("worker", 1)], lw.NAMED, HEARTBEAT_215, "UnavailableError"))
    assert lw.summary(res, CHIEF, [("worker", 1), ("worker", 2)], "did not answer a probe "
                      "within 3 s", TIMED_OUT, "DeadlineExceededError").startswith(
        "train.py: lost worker:1 (rank 1 on node2, node2:24610), worker:2 (rank 2 on node3, "
        "node3:24610), which did not answer a probe within 3 s. TensorFlow: "
        "DeadlineExceededError: Collective has timed out during execution. This worker")
    assert lw.summary(res, CHIEF, [], "why", TIMED_OUT, "E").startswith(
        "train.py: lost a worker (why). TensorFlow: E: Collective")


class OpError(Exception):
    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class UnavailableError(OpError):
    pass


class DeadlineExceededError(OpError):
    pass


#: tf's errors as the hook sees them (the same names)
TF = SimpleNamespace(errors=SimpleNamespace(OpError=OpError, UnavailableError=UnavailableError,
                                            DeadlineExceededError=DeadlineExceededError))


def test_which_errors_are_a_lost_peer() -> None:
    assert lw.is_peer_loss(TF, UnavailableError("x"))
    assert lw.is_peer_loss(TF, DeadlineExceededError("x"))
    assert lw.is_peer_loss(TF, OpError("... Collective ops is aborted by: x"))
    assert not lw.is_peer_loss(TF, OpError("Invalid argument"))
    assert not lw.is_peer_loss(TF, ValueError("Collective ops is aborted by: x"))


def test_the_hook_names_the_lost_worker_then_exits_and_leaves_other_errors(monkeypatch) -> None:
    before, exits, out = [], [], io.StringIO()
    monkeypatch.setattr(sys, "excepthook", lambda *a: before.append(a[1]))
    resolver = SimpleNamespace(resolution=resolution())
    lw.install(TF, resolver, stream=out, exit=exits.append)
    other = ValueError("a bug")
    sys.excepthook(ValueError, other, None)
    assert (before, exits, out.getvalue()) == ([other], [], "")
    lost = UnavailableError(HEARTBEAT_221)
    sys.excepthook(UnavailableError, lost, None)
    assert before == [other, lost]  # the traceback first, as before
    assert exits == [1]
    assert out.getvalue() == (
        "train.py: lost worker:1 (rank 1 on node2, node2:24610). TensorFlow: UnavailableError: "
        "The following tasks are unhealthy (stopped sending heartbeats). This worker, worker:0 "
        "(rank 0 on node1, node1:24610), exits 1 now.\n")


def _never_called(task: str, timeout_ms: int) -> None:
    raise AssertionError(f"probed {task}, though TensorFlow named the task")
