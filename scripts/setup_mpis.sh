#!/usr/bin/env bash
# Installs the other MPIs the real-launch tests run mpi_resolver under, each in a virtualenv of
# its own with an mpi4py that uses it (one mpi4py per MPI: mpi4py's wheel picks the libmpi of
# the virtualenv it runs from):
#   .venv-mpich   PyPI's `mpich` (MPICH, Hydra's mpiexec) + mpi4py + JAX (CPU)
#   .venv-impi    PyPI's `impi-rt` (Intel MPI, its Hydra's mpiexec) + mpi4py + JAX (CPU)
# Usage: bash scripts/setup_mpis.sh [mpich] [impi]     (default: both)
# Safe to run again: a virtualenv whose stamp matches what it should hold is left alone (a
# re-run takes well under a second). The package itself is not installed there: the tests put
# this checkout on PYTHONPATH (tests/cluster/conftest.py RANK_ENV), as for the Open MPI ranks.
# Neither virtualenv has TensorFlow: the tests drive the resolution without it
# (tests/cluster/mpi_probe.py and the command line). Both have JAX (no Keras): one virtualenv
# with JAX and an mpi4py on the user's MPI, as a user has it, for tests/jax/test_other_mpis.py
# (measured: about 16 s per virtualenv from an empty pip cache, 620 MB; once per machine).
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3}
MPICH_VENV=${MPI_RESOLVER_MPICH_VENV:-.venv-mpich}
IMPI_VENV=${MPI_RESOLVER_IMPI_VENV:-.venv-impi}
# Pinned: the versions the tests were measured with. impi-rt 2021.19.0 needs PyPI's
# `libfabric>=2.6`, which the package registry here does not have; 2021.18.1 bundles its own.
# JAX 0.10.2: tests/jax's version (scripts/setup_jax.sh).
JAX_PACKAGES=(jax==0.10.2 jaxlib==0.10.2)
MPICH_PACKAGES=(mpich==5.0.2 mpi4py==4.1.2 "${JAX_PACKAGES[@]}")
IMPI_PACKAGES=(impi-rt==2021.18.1 mpi4py==4.1.2 "${JAX_PACKAGES[@]}")

need_python() {
  if ! command -v "$PYTHON" >/dev/null || ! "$PYTHON" -c "import venv, ensurepip" 2>/dev/null; then
    echo "setup_mpis: installing Debian's python3 and python3-venv"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
      python3 python3-venv >/dev/null
  fi
}

# stamp_of VENV PACKAGES...: what VENV's stamp says once PACKAGES are in (its Python included)
stamp_of() {
  local venv=$1
  shift
  printf '%s\n' "$@" "$("$venv/bin/python" -c 'import sys; print(sys.version)' 2>/dev/null)" \
    | sha1sum | cut -c1-16
}

# setup_venv DIR EXPECTED-LIBRARY-PREFIX PACKAGES...
setup_venv() {
  local venv=$1 expect=$2
  shift 2
  local stamp="$venv/.mpi_resolver-installed"
  if [ -x "$venv/bin/python" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$(stamp_of "$venv" "$@")" ]
  then
    return 0
  fi
  echo "setup_mpis: installing $* into $venv"
  if ! "$venv/bin/python" -c "" 2>/dev/null; then
    need_python
    "$PYTHON" -m venv --clear "$venv"
  fi
  printf '*\n' > "$venv/.gitignore"  # never committed, whatever the checkout's .gitignore says
  "$venv/bin/pip" install -q --disable-pip-version-check "$@" 2>&1 \
    | grep -v "^WARNING: Location" || true
  # Which MPI this mpi4py loads, read without starting MPI (no mpiexec needed).
  local version
  version="$("$venv/bin/python" -c 'import mpi4py
mpi4py.rc.initialize = False
from mpi4py import MPI
print(MPI.Get_library_version().splitlines()[0])')" \
    || { echo "setup_mpis: mpi4py in $venv does not load" >&2; exit 1; }
  case "$version" in
    "$expect"*) ;;
    *) echo "setup_mpis: mpi4py in $venv loads '$version', expected $expect" >&2; exit 1 ;;
  esac
  local jax_version
  jax_version="$(JAX_PLATFORMS=cpu "$venv/bin/python" -c 'import jax; print(jax.__version__)')" \
    || { echo "setup_mpis: JAX in $venv does not import" >&2; exit 1; }
  echo "setup_mpis: $venv: $version, JAX $jax_version"
  stamp_of "$venv" "$@" > "$stamp"
}

which=("$@")
((${#which[@]})) || which=(mpich impi)
for mpi in "${which[@]}"; do
  case "$mpi" in
    mpich) setup_venv "$MPICH_VENV" "MPICH Version:" "${MPICH_PACKAGES[@]}" ;;
    impi) setup_venv "$IMPI_VENV" "Intel(R) MPI Library" "${IMPI_PACKAGES[@]}" ;;
    *) echo "setup_mpis: unknown MPI '$mpi' (expected mpich or impi)" >&2; exit 2 ;;
  esac
done
