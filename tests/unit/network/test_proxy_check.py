"""A proxy variable that would carry TensorFlow's gRPC traffic between the workers: the
resolution says so (a note the resolver logs as a warning), and `check` fails naming it."""

from __future__ import annotations

import json

import pytest

from mpi_resolver.cli import main as cli
from tests.unit.jobs import run_job, srun_env

pytestmark = pytest.mark.unit

PLACEMENT = ["node1", "node1", "node2"]
DEAD = "http://127.0.0.1:9"


def envs(**proxy):
    return [{**srun_env(r, ["node1", "node2"], [2, 1], PLACEMENT), **proxy} for r in range(3)]


@pytest.mark.parametrize("proxy, captured", [
    pytest.param({}, None, id="no proxy variable"),
    pytest.param({"http_proxy": DEAD}, ("node1", "node2"), id="http_proxy: both nodes"),
    pytest.param({"HTTP_PROXY": DEAD}, None, id="upper case: gRPC ignores it"),
    pytest.param({"https_proxy": DEAD, "no_proxy": "node1,node2"}, None,
                 id="no_proxy lists the nodes"),
    pytest.param({"grpc_proxy": DEAD, "no_proxy": "node1"}, ("node2",),
                 id="no_proxy lists one node: the other is captured"),
])
def test_the_resolution_names_a_proxy_that_captures_peers(proxy, captured):
    res = run_job(envs(**proxy), PLACEMENT, rank=0, gpus_per_node=0)
    if captured is None:
        assert res.proxy is None and not [n for n in res.notes if "proxy" in n]
    else:
        assert res.proxy is not None and res.proxy in res.notes
        variable = next(iter(proxy))
        assert res.proxy.startswith(f"{variable}={DEAD}"), res.proxy
        for host in captured:
            assert host in res.proxy
        assert "no_proxy" in res.proxy and "unset" in res.proxy  # the two fixes


def test_check_fails_with_the_proxy_and_show_warns(monkeypatch):
    res = run_job(envs(http_proxy=DEAD), PLACEMENT, rank=0, gpus_per_node=0)
    report = cli._report_check(res, res.records, None, False, None)
    assert f"warning: http_proxy={DEAD}" in report
    assert report.rstrip().endswith("PROXY: check fails: a proxy variable would carry "
                                    "TensorFlow's traffic between the workers (see the warning "
                                    "above).")
    assert json.loads(cli._report_check(res, res.records, None, True, None))["proxy"] == \
        res.proxy
    assert f"warning: http_proxy={DEAD}" in cli._report_show(res, False, None)
