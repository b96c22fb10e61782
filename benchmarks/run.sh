#!/usr/bin/env bash
# Installs what is needed (scripts/setup.sh), then runs the benchmarks: a table of measured
# figures with ratios to TensorFlow's resolver, also written to benchmarks/results/.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec "${MPI_RESOLVER_VENV:-.venv}/bin/python" benchmarks/bench.py "$@"
