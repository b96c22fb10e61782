#!/usr/bin/env bash
# The oldest supported versions, in a second virtualenv beside .venv (which has the newest):
# .venv-tf215 with TensorFlow 2.15.1 (CPU build) and the oldest mpi4py that pyproject.toml allows,
# plus the test tools and mpi_resolver itself (editable, without its extras' dependencies).
#
#   bash scripts/setup_versions.sh          # then: .venv-tf215/bin/python -m pytest tests/unit ...
#
# mpi4py 4.1.0 is the oldest with binary wheels and with the _mpiabi module mpi_resolver reads
# the MPI library through (4.0.0 also works, but compiles, see below, and cannot tell which MPI
# it loads before MPI_Init). The rest of this note is for building an older one.
# Needs what scripts/setup.sh installs from Debian (Open MPI's mpicc: mpi4py 4.0 has no binary
# wheel and is compiled; pip caches the wheel it builds, so only the first run compiles).
# It is compiled with -O1 -g0: with this Python's own flags (-O3 -g), gcc 12 had not finished
# mpi4py's MPI.c after 20 minutes of CPU time and had grown to 21 GB of memory when it was
# stopped; with -O1 -g0 the build takes about 1.5 minutes.
# Safe to run again: a stamp records what was installed, and pip installs only what is missing.
set -euo pipefail
cd "$(dirname "$0")/.."

VENV=${MPI_RESOLVER_OLDEST_VENV:-.venv-tf215}
PYTHON=${PYTHON:-python3}
# Keep these equal to the floors in pyproject.toml (tf/tf-cpu: tensorflow>=2.15.1, mpi: mpi4py>=...).
OLDEST=(tensorflow-cpu==2.15.1 mpi4py==4.1.0)
TOOLS=(pytest pytest-mpi hypothesis)

# The stamp (stamp_value, stamp_matches, stamp_write) and quietly.
source scripts/venv_stamp.sh

if ! command -v mpicc >/dev/null; then
  echo "setup_versions: mpicc not found: run scripts/setup.sh first (Debian's libopenmpi-dev)" >&2
  exit 1
fi
if [ ! -x "$VENV/bin/python" ]; then
  echo "setup_versions: creating virtualenv $VENV"
  "$PYTHON" -m venv "$VENV"
fi
want="$(stamp_value "${OLDEST[*]} ${TOOLS[*]}" pyproject.toml scripts/setup_versions.sh)"
if ! stamp_matches "$VENV" "$want"; then
  echo "setup_versions: installing ${OLDEST[*]} ${TOOLS[*]} into $VENV" \
       "(the first time: TensorFlow, and mpi4py compiled from source: a few minutes)"
  quietly "$VENV/bin/pip" install -q --disable-pip-version-check --upgrade pip
  CFLAGS="${CFLAGS:-} -O1 -g0" quietly "$VENV/bin/pip" install -q \
    --disable-pip-version-check "${OLDEST[@]}" "${TOOLS[@]}"
  # The package itself, editable; --no-deps: its extras must not upgrade TensorFlow or mpi4py.
  quietly "$VENV/bin/pip" install -q --disable-pip-version-check --no-deps -e .
  quietly "$VENV/bin/pip" uninstall -q -y scikit-learn  # an older setup installed it
  TF_CPP_MIN_LOG_LEVEL=2 "$VENV/bin/python" - "${OLDEST[@]}" <<'EOF' \
    || { echo "setup_versions: the Python packages did not install" >&2; exit 1; }
import sys
from importlib.metadata import version
import mpi_resolver, pytest, hypothesis, pytest_mpi  # noqa: F401
for pin in sys.argv[1:]:
    name, wanted = pin.split("==")
    got = version(name)
    assert got == wanted, f"{name} {got} installed, {wanted} wanted"
from mpi4py import MPI
import tensorflow as tf
print(f"setup_versions: TensorFlow {tf.__version__}, mpi4py {version('mpi4py')} "
      f"({MPI.Get_library_version().splitlines()[0].strip()})")
EOF
  stamp_write "$VENV" "$want"
fi
