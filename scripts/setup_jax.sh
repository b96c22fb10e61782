#!/usr/bin/env bash
# The JAX edge's virtualenv, beside .venv (TensorFlow) and apart from it: .venv-jax with JAX (CPU),
# Keras 3, mpi4py (Debian's Open MPI, as in .venv), NumPy, the test tools and mpi_resolver itself
# (editable, without its extras' dependencies: TensorFlow is not wanted here).
# Orbax: LongJob's checkpoints (mpi_resolver/jax/orbax_checkpoints.py). No scikit-learn (the
# examples' digits ship in examples/data): Keras imports it wherever it is installed.
#
#   bash scripts/setup_jax.sh          # then: .venv-jax/bin/python -m pytest tests/jax
#
# Pinned: the versions tests/jax was measured with. JAX 0.10.2 is the newest the package index
# gives Python 3.11; mpi_resolver.jax registers with JAX's own cluster detection through its
# internal ClusterEnv, checked against this version (mpi_resolver/jax/detection.py).
# Safe to run again, no standard input: a stamp records what was installed; a re-run whose stamp
# matches takes well under a second.
set -euo pipefail
cd "$(dirname "$0")/.."

VENV=${MPI_RESOLVER_JAX_VENV:-.venv-jax}
PYTHON=${PYTHON:-python3}
PACKAGES=(jax==0.10.2 jaxlib==0.10.2 keras==3.15.1 mpi4py==4.1.2 orbax-checkpoint==0.12.8 numpy)
TOOLS=(pytest pytest-mpi)

# The stamp (stamp_value, stamp_matches, stamp_write) and quietly.
source scripts/venv_stamp.sh

if [ ! -x "$VENV/bin/python" ]; then
  echo "setup_jax: creating virtualenv $VENV"
  "$PYTHON" -m venv "$VENV"
fi
printf '*\n' > "$VENV/.gitignore"  # never committed, whatever the checkout's .gitignore says
want="$(stamp_value "${PACKAGES[*]} ${TOOLS[*]}" scripts/setup_jax.sh)"
if ! stamp_matches "$VENV" "$want"; then
  echo "setup_jax: installing ${PACKAGES[*]} ${TOOLS[*]} into $VENV"
  quietly "$VENV/bin/pip" install -q --disable-pip-version-check "${PACKAGES[@]}" "${TOOLS[@]}"
  # The package itself, editable; --no-deps: its extras would bring TensorFlow.
  quietly "$VENV/bin/pip" install -q --disable-pip-version-check --no-deps -e .
  quietly "$VENV/bin/pip" uninstall -q -y scikit-learn  # an older setup installed it
  KERAS_BACKEND=jax "$VENV/bin/python" - "${PACKAGES[@]}" <<'EOF' \
    || { echo "setup_jax: the Python packages did not install" >&2; exit 1; }
import sys
from importlib.metadata import version
import jax, keras, mpi_resolver, orbax.checkpoint, pytest, pytest_mpi  # noqa: F401
assert "sklearn" not in sys.modules, "scikit-learn is installed: Keras imports it (seconds a process)"
for pin in sys.argv[1:]:
    if "==" in pin:
        name, wanted = pin.split("==")
        got = version(name)
        assert got == wanted, f"{name} {got} installed, {wanted} wanted"
from mpi4py import MPI
print(f"setup_jax: JAX {jax.__version__}, Keras {keras.__version__} ({keras.backend.backend()}), "
      f"mpi4py {version('mpi4py')} ({MPI.Get_library_version().splitlines()[0].strip()})")
EOF
  stamp_write "$VENV" "$want"
fi
