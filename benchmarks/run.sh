#!/usr/bin/env bash
# Installs what is needed (scripts/setup.sh), then runs the benchmarks: a table of measured
# figures with ratios to TensorFlow's resolver (bench.py), and the MPI exchange at scale
# (exchange.py); figures also written to benchmarks/results/ (or $MPI_RESOLVER_BENCH_RESULTS).
# --quick: smaller jobs; other arguments go to bench.py.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
PY="${MPI_RESOLVER_VENV:-.venv}/bin/python"
# As root, the benchmarks run in a network namespace of their own (lo up): the resolver's port
# checks probe this rank's port (8888) for real, and there no other process (a Jupyter server,
# another run of the test suite) holds it or probes it in the same instant.
own_net=()
if [ "$(id -u)" = 0 ] && command -v unshare > /dev/null && command -v ip > /dev/null; then
  own_net=(unshare --net sh -c 'ip link set lo up && exec "$0" "$@"')
  echo "(benchmarks in a network namespace of their own)"
fi
"${own_net[@]}" "$PY" benchmarks/bench.py "$@"
quick=()
for arg in "$@"; do [ "$arg" = --quick ] && quick=(--quick); done
results="${MPI_RESOLVER_BENCH_RESULTS:-benchmarks/results}"
mkdir -p "$results"
echo
echo "The MPI exchange at scale (benchmarks/exchange.py)"
"${own_net[@]}" "$PY" benchmarks/exchange.py "${quick[@]}" --json "$results/exchange.json"
echo
echo "check --connect's dial pattern at scale, and real mpirun runs (benchmarks/connect_pattern.py)"
"$PY" benchmarks/connect_pattern.py "${quick[@]}" --json "$results/connect_pattern.json"
"${own_net[@]}" "$PY" benchmarks/connect_pattern.py "${quick[@]}" --mpirun \
  --json "$results/connect_mpirun.json"
