"""mpi_resolver.core.logs: the package's lines on standard error as they are where nobody
configured logging, also after a library's logging.warning() set up basicConfig's default
handler (TensorFlow's absl, Orbax), each once; through the script's own handlers and format
where it configured logging; and each message once per process."""

from __future__ import annotations

import logging
import subprocess
import sys

import pytest

from mpi_resolver.core import logs
from mpi_resolver.core.logs import log_each, log_once, unconfigured

pytestmark = pytest.mark.unit

SCRIPT = '''
import logging, sys
{before}
from mpi_resolver.core.logs import logger, log_once
log_once("first")
{between}
log_once("second")
log_once("first")
logger.info("below the level")
'''


@pytest.mark.parametrize("before, between, stderr", [
    pytest.param("", "", "mpi_resolver: first\nmpi_resolver: second\n", id="unconfigured"),
    pytest.param("", 'logging.warning("a library\'s")',
                 "mpi_resolver: first\nWARNING:root:a library's\nmpi_resolver: second\n",
                 id="a library's basicConfig between: the lines as they are, once"),
    pytest.param('logging.warning("a library\'s")', "",
                 "WARNING:root:a library's\nmpi_resolver: first\nmpi_resolver: second\n",
                 id="a library's basicConfig before"),
    pytest.param('logging.basicConfig(format="%(name)s|%(message)s")', "",
                 "mpi_resolver|mpi_resolver: first\nmpi_resolver|mpi_resolver: second\n",
                 id="the script's own format"),
    pytest.param("logging.basicConfig(level=logging.INFO)", "",
                 "mpi_resolver: first\nmpi_resolver: second\nbelow the level\n",
                 id="the script's level in basicConfig's format: as they are, at its level"),
    pytest.param('logging.basicConfig(stream=sys.stdout)', "", "",
                 id="the script's own stream"),
])
def test_where_the_lines_go(before: str, between: str, stderr: str) -> None:
    code = SCRIPT.replace("{before}", before).replace("{between}", between)
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       timeout=60)
    assert p.returncode == 0, p.stderr
    assert p.stderr == stderr


def handler(fmt: str, stream=None) -> logging.Handler:
    one = logging.StreamHandler(sys.stderr if stream is None else stream)
    one.setFormatter(logging.Formatter(fmt))
    return one


@pytest.mark.parametrize("handlers, expected", [
    pytest.param([], True, id="none"),
    pytest.param([handler(logging.BASIC_FORMAT)], True, id="basicConfig's default"),
    pytest.param([handler(logging.BASIC_FORMAT, sys.__stderr__)], True,
                 id="the default to the process's own stderr"),
    pytest.param([handler("%(message)s")], False, id="another format"),
    pytest.param([handler(logging.BASIC_FORMAT, sys.stdout)], False, id="another stream"),
    pytest.param([handler(logging.BASIC_FORMAT), handler("%(message)s")], False,
                 id="the default and another"),
    pytest.param([logging.FileHandler("/dev/null")], False, id="a file"),
    pytest.param([logging.NullHandler()], False, id="a handler of another type"),
])
def test_unconfigured(handlers: list, expected: bool) -> None:
    root = logging.Logger("a root")
    for one in handlers:
        root.addHandler(one)
    assert unconfigured(root) is expected


def test_without_a_formatter_it_is_configured() -> None:
    root = logging.Logger("a root")
    root.addHandler(logging.StreamHandler(sys.stderr))  # no formatter: not basicConfig's
    assert not unconfigured(root)


def test_under_pytest_the_lines_reach_caplog_once(caplog: pytest.LogCaptureFixture) -> None:
    """pytest's handlers on the root: logging is configured, the lines propagate."""
    message = "a message of this test alone"
    log_each([message, message])
    log_once(message)
    assert [r.getMessage() for r in caplog.records] == [f"mpi_resolver: {message}"]
    assert logs.logger.propagate
