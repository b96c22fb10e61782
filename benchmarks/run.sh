#!/usr/bin/env bash
# Installs what is needed (scripts/setup.sh), then runs the benchmarks: a table of measured
# figures with ratios to TensorFlow's resolver (bench.py), and the MPI exchange at scale
# (exchange.py); figures also written to benchmarks/results/ (or $MPI_RESOLVER_BENCH_RESULTS).
# --quick: smaller jobs; other arguments go to bench.py.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
PY="${MPI_RESOLVER_VENV:-.venv}/bin/python"
"$PY" benchmarks/bench.py "$@"
quick=()
for arg in "$@"; do [ "$arg" = --quick ] && quick=(--quick); done
results="${MPI_RESOLVER_BENCH_RESULTS:-benchmarks/results}"
mkdir -p "$results"
echo
echo "The MPI exchange at scale (benchmarks/exchange.py)"
"$PY" benchmarks/exchange.py "${quick[@]}" --json "$results/exchange.json"
