"""long_jobs.process_end, in child processes: the exit code after the save whatever the
teardown does, and a configuration error that ends the process with its own status (78), not
Python's 1, after Python's traceback."""

from __future__ import annotations

import os
import subprocess
import time
import sys
from pathlib import Path

import pytest

from mpi_resolver.core.errors import (ConfigurationError, FormatError, ResolutionError,
                                      SettingError, VariableError)
from mpi_resolver.long_jobs.process_end import settings_checked

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[3]


def child(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60, env={**os.environ, "PYTHONPATH": str(ROOT)})


HOOKED = """from mpi_resolver.long_jobs.process_end import exit_on_configuration_error
from mpi_resolver.core import errors
exit_on_configuration_error()
exit_on_configuration_error()  # once only: no hook on a hook
import atexit
atexit.register(lambda: print("at exit"))
print("before", flush=True)
raise {error}
"""


@pytest.mark.parametrize("error, status, at_exit", [
    ("errors.ConfigurationError('another job wrote DIR')", 78, False),
    ("errors.VariableError('MPI_RESOLVER_KEEP=0: expected ...')", 78, False),
    ("errors.SettingError('keep=0: expected ...')", 78, False),
    ("errors.FormatError('a hostlist')", 1, True),  # not a configuration: Python's own end
    ("errors.ResolutionError('x')", 1, True),
    ("RuntimeError('x')", 1, True),
    ("SystemExit(3)", 3, True),
])
def test_a_configuration_error_ends_the_process_with_78(error: str, status: int,
                                                        at_exit: bool) -> None:
    proc = child(HOOKED.format(error=error))
    assert proc.returncode == status, proc.stderr
    assert proc.stdout.startswith("before\n")
    assert ("at exit" in proc.stdout) is at_exit
    if status != 3:
        assert "Traceback (most recent call last)" in proc.stderr  # Python's own report


def test_end_with_ends_the_process_with_the_code_whatever_follows() -> None:
    proc = child("import time; from mpi_resolver.long_jobs.process_end import end_with\n"
                 "end_with(75, 0.5)\ntime.sleep(30)\n")
    assert proc.returncode == 75
    proc = child("from mpi_resolver.long_jobs.process_end import end_with\n"
                 "end_with(143, 30)\nraise SystemExit(0)\n")
    assert proc.returncode == 143  # at the first at-exit handler, not SystemExit's 0


@pytest.mark.parametrize("raised, becomes", [
    (FormatError("keep=0: expected a whole number >= 1"), SettingError),
    (VariableError("MPI_RESOLVER_KEEP=0: expected"), VariableError),  # already one: as it is
    (ResolutionError("not a setting"), ResolutionError),
    (ValueError("not the package's"), ValueError),
])
def test_settings_checked(raised: Exception, becomes: type) -> None:
    """A setting's refusal (FormatError) inside is a SettingError, a ConfigurationError too,
    with the same words; any other error passes as it is."""
    with pytest.raises(Exception) as caught:
        with settings_checked():
            raise raised
    assert type(caught.value) is becomes and str(caught.value) == str(raised)
    assert isinstance(caught.value, ConfigurationError) is (becomes is not ResolutionError
                                                            and becomes is not ValueError)


def test_settings_checked_passes_what_is_fine() -> None:
    with settings_checked():
        value = 3
    assert value == 3


LEAVING = """import time
from mpi_resolver.long_jobs import process_end
from mpi_resolver.core import errors
process_end.exit_on_configuration_error()
process_end.EXIT_WITHIN = 1.0
def leave():
    print("leaving", flush=True)
    {then}
    print("left", flush=True)
process_end.leave_first(leave)
process_end.leave_first(leave)  # once
raise errors.ConfigurationError("every process refused the directory")
"""


@pytest.mark.parametrize("then, said", [
    ("pass", "leaving\nleft\n"),  # its peers left with it: then its own status
    ("time.sleep(60)", "leaving\n"),  # a peer that never comes: the status within the bound
    ("raise RuntimeError('the service is gone')", "leaving\n"),
])
def test_a_configuration_error_leaves_the_peers_first(then: str, said: str) -> None:
    start = time.monotonic()
    proc = child(LEAVING.format(then=then))
    assert (proc.returncode, proc.stdout) == (78, said), proc.stderr
    assert time.monotonic() - start < 30


EXIT_HOOK = '''
import sys
from mpi_resolver.long_jobs.process_end import settle_at_exit
from concurrent.futures import ThreadPoolExecutor
class Saver:
    def settle(self):  # a write that needs a thread pool, as Orbax's does
        with ThreadPoolExecutor() as pool:
            print(pool.submit(lambda: "settled").result(), flush=True)
saver = Saver()
settle_at_exit(saver.settle)
if sys.argv[1] == "gone":
    del saver
print("ends", flush=True)
'''


@pytest.mark.parametrize("case,out", [
    ("kept", "ends\nsettled\n"),  # the saver still there: its write ended at the exit
    ("gone", "ends\n"),  # a weak reference: the hook kept no saver alive
])
def test_settle_at_exit_runs_while_the_saver_is_there(case: str, out: str) -> None:
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[3]  # this checkout (mutmut's copy: its own)
    p = subprocess.run([sys.executable, "-c", EXIT_HOOK, case], capture_output=True,
                       text=True, timeout=60, env={**os.environ, "PYTHONPATH": str(root)})
    assert (p.returncode, p.stdout) == (0, out), p.stderr
