#!/usr/bin/env bash
# Installs what mpi_resolver's demo, tests and benchmarks need on a fresh Debian machine (as
# root): Debian's Slurm, munge, PMIx and Open MPI, and a virtualenv (.venv) with TensorFlow,
# mpi4py and the test tools. Safe to run again: it installs only what is missing.
set -euo pipefail
cd "$(dirname "$0")/.."

APT_PACKAGES=(slurm-wlm munge openmpi-bin libopenmpi-dev libpmix2 libpmix-dev libpmi2-0 iproute2
              util-linux procps nftables gcc sshfs openssh-sftp-server socat)
missing=()
for pkg in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "ok installed" || missing+=("$pkg")
done
if ((${#missing[@]})); then
  echo "setup: installing Debian packages: ${missing[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
    "${missing[@]}" >/dev/null
fi

VENV=${MPI_RESOLVER_VENV:-.venv}
PYTHON=${PYTHON:-python3}
if ! command -v "$PYTHON" >/dev/null || ! "$PYTHON" -c "import venv, ensurepip" 2>/dev/null; then
  echo "setup: installing Debian's python3 and python3-venv"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
    python3 python3-venv >/dev/null
fi
if [ ! -x "$VENV/bin/python" ]; then
  echo "setup: creating virtualenv $VENV"
  "$PYTHON" -m venv "$VENV"
fi
stamp="$VENV/.mpi_resolver-installed"
want="$(cat pyproject.toml scripts/setup.sh | sha1sum | cut -c1-16)"
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  echo "setup: installing Python packages into $VENV (TensorFlow takes a minute)"
  "$VENV/bin/pip" install -q --disable-pip-version-check --upgrade pip 2>&1 | grep -v "^WARNING: Location" || true
  "$VENV/bin/pip" install -q --disable-pip-version-check -e ".[tf-cpu,mpi,test,docs,examples]" \
    2>&1 | grep -v "^WARNING: Location" || true
  # Keras 2 for `train.py --fit`. --no-deps: tf-keras requires the full `tensorflow` wheel,
  # which would unpack over tensorflow-cpu (both are the `tensorflow` module).
  "$VENV/bin/pip" install -q --disable-pip-version-check --no-deps "tf-keras~=2.21.0" \
    2>&1 | grep -v "^WARNING: Location" || true
  # No scikit-learn (the examples' digits ship in examples/data): Keras imports it wherever it is
  # installed, about 2 s of a core in every TensorFlow process. An older setup installed it.
  # No matplotlib either, for the same reason (0.4 s of a core a process): the 'plot' extra has
  # a virtualenv of its own, .venv-plot (scripts/setup_plot.sh). An older setup installed it.
  "$VENV/bin/pip" uninstall -q -y scikit-learn matplotlib 2>&1 | grep -v "^WARNING: Skipping" || true
  "$VENV/bin/python" -c "import sys, mpi_resolver, tensorflow, mpi4py, pytest, tf_keras, build, twine, ruff, mypy, importlinter, sphinx, myst_parser, furo; assert 'sklearn' not in sys.modules, 'scikit-learn is installed'; assert 'matplotlib' not in sys.modules, 'matplotlib is installed'" \
    || { echo "setup: the Python packages did not install" >&2; exit 1; }
  "$VENV/bin/python" -c "import tensorflow as tf; assert not tf.test.is_built_with_cuda()" \
    || { echo "setup: $VENV has a GPU build of TensorFlow; the tests need tensorflow-cpu" >&2
         exit 1; }
  echo "$want" > "$stamp"
fi

# report --plot's matplotlib, in a virtualenv of its own (.venv-plot).
bash scripts/setup_plot.sh

# MPICH and Intel MPI, each in its own virtualenv with its own mpi4py (.venv-mpich,
# .venv-impi), for the tests that launch them for real; installs only what is missing.
bash scripts/setup_mpis.sh
