#!/usr/bin/env bash
# The whole test suite: unit tables, parity with TensorFlow, real mpirun runs, and real
# Slurm runs on a throw-away cluster this suite starts and stops. Exits non-zero on any failure.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export TF_CPP_MIN_LOG_LEVEL=3 PYTHONDONTWRITEBYTECODE=1
exec "${MPI_RESOLVER_VENV:-.venv}/bin/python" -m pytest -ra --color=no "$@"
