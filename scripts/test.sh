#!/usr/bin/env bash
# The whole test suite: unit tables, parity with TensorFlow, real mpirun runs, and real
# Slurm runs on a throw-away cluster this suite starts and stops. Exits non-zero on any failure.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
# A test that would be skipped fails instead, in this and any other run of the suite
# (tests/conftest.py): nothing the README promises may silently not run.
unset MPI_RESOLVER_ALLOW_SKIP
export TF_CPP_MIN_LOG_LEVEL=3 PYTHONDONTWRITEBYTECODE=1
# The oldest supported TensorFlow and mpi4py, in .venv-tf215, for tests/test_versions.py.
bash scripts/setup_versions.sh
# JAX, Keras 3 and mpi4py in .venv-jax, for tests/jax (its ranks run there; the suite's own
# pytest stays in .venv). A matching stamp returns at once.
bash scripts/setup_jax.sh
# The checkout's bytecode, compiled once as pip compiles an installed package's: the suite's
# Python processes (TensorFlow's workers, the ranks, mpi-resolver's commands) then read it
# instead of each compiling the modules it imports (0.1 CPU-s for mpi-resolver show, 0.7 for a
# TensorFlow worker of examples/train.py). Nothing else writes bytecode (PYTHONDONTWRITEBYTECODE
# above); every virtualenv is made from the same Python, whose files these are (tests/
# test_bytecode.py); a source changed since is compiled again, in memory.
"${MPI_RESOLVER_VENV:-.venv}/bin/python" -m compileall -q -j 0 mpi_resolver examples benchmarks \
  tests scripts
PYTEST=("${MPI_RESOLVER_VENV:-.venv}/bin/python" -m pytest -ra --color=no --durations=25)
if [ $# -gt 0 ]; then
  exec "${PYTEST[@]}" "$@"
fi
# The whole suite in four pytest runs side by side: tests/cluster and tests/jax (each on
# throw-away clusters of its own; their tests mostly wait: Slurm, TensorFlow's and JAX's
# start-up, heartbeats, timeouts) and the longest files (scripts/side_by_side.py's OWN_RUN),
# each beside everything else. Their output follows the other's; the last line counts all four.
exec "${MPI_RESOLVER_VENV:-.venv}/bin/python" scripts/side_by_side.py -- "${PYTEST[@]}"
