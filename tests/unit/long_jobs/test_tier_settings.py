"""long_jobs.tier_settings: the node-local tier's settings from the arguments, else the
variables, else the defaults, each refused as it is read, naming the argument or variable."""

from __future__ import annotations

import pytest

from mpi_resolver.core.errors import FormatError, VariableError
from mpi_resolver.long_jobs.tier_settings import (DEFAULT_SHARED_EVERY, TierSettings,
                                                  tier_settings)

pytestmark = pytest.mark.unit

JOB = {"SLURM_JOB_ID": "77"}


@pytest.mark.parametrize("env, given, expected", [
    ({}, {}, None),  # no directory: no tier
    ({"MPI_RESOLVER_LOCAL_DIR": ""}, {}, None),  # an empty variable is not a setting
    ({"MPI_RESOLVER_SHARED_EVERY": "3"}, {}, None),
    ({"MPI_RESOLVER_LOCAL_DIR": "/dev/shm/c-%j"}, {}, TierSettings(
        "/dev/shm/c-%j", "MPI_RESOLVER_LOCAL_DIR", DEFAULT_SHARED_EVERY)),
    ({"MPI_RESOLVER_LOCAL_DIR": " /tmp/%N ", "MPI_RESOLVER_SHARED_EVERY": "4"}, {},
     TierSettings("/tmp/%N", "MPI_RESOLVER_LOCAL_DIR", 4)),
    ({"MPI_RESOLVER_LOCAL_DIR": "/local/%u/%n-%N"}, {},
     TierSettings("/local/%u/%n-%N", "MPI_RESOLVER_LOCAL_DIR", DEFAULT_SHARED_EVERY)),
    ({"MPI_RESOLVER_LOCAL_DIR": "/tmp/v", "MPI_RESOLVER_SHARED_EVERY": "4"},
     {"local_dir": "/tmp/a", "shared_every": 1}, TierSettings("/tmp/a", "local_dir", 1)),
])
def test_tier_settings(env: dict, given: dict, expected) -> None:
    assert tier_settings({**JOB, **env}, **given) == expected
    assert DEFAULT_SHARED_EVERY == 10


@pytest.mark.parametrize("env, given, error, says", [
    ({}, {"local_dir": "tmp/a"}, FormatError, "local_dir='tmp/a' is not an absolute path"),
    ({}, {"local_dir": ""}, FormatError, "local_dir='' is not an absolute path"),
    ({"MPI_RESOLVER_LOCAL_DIR": "/tmp/%q"}, {}, FormatError,
     "MPI_RESOLVER_LOCAL_DIR='/tmp/%q': %q is not a pattern it takes"),
    ({"MPI_RESOLVER_LOCAL_DIR": "/tmp/%j", "SLURM_JOB_ID": ""}, {}, FormatError,
     "%j names the job's id, and this is not a Slurm job"),
    ({}, {"local_dir": "/tmp/a", "shared_every": 0}, FormatError,
     "shared_every=0: expected a whole number of local saves >= 1 (default 10)."),
    ({}, {"local_dir": "/tmp/a", "shared_every": True}, FormatError, "shared_every=True"),
    ({}, {"local_dir": "/tmp/a", "shared_every": "2"}, FormatError, "shared_every='2'"),
    ({"MPI_RESOLVER_SHARED_EVERY": "often"}, {"local_dir": "/tmp/a"}, VariableError,
     "MPI_RESOLVER_SHARED_EVERY='often': its value='often': expected a whole number"),
    ({"MPI_RESOLVER_SHARED_EVERY": "0"}, {}, VariableError,
     "MPI_RESOLVER_SHARED_EVERY='0': its value=0: expected"),
])
def test_refusals(env: dict, given: dict, error: type, says: str) -> None:
    with pytest.raises(error) as e:
        tier_settings({**JOB, **env}, **given)
    assert says in str(e.value)
