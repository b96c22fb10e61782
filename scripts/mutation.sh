#!/usr/bin/env bash
# Mutation testing of the pure core with the fast tests (unit tables and TensorFlow parity):
# mutmut 3 (settings in pyproject.toml, [tool.mutmut]) mutates each line of mpi_resolver's
# core (given a module, only its files: scripts/mutmut_only.py), runs the tests that reach
# it, and counts the mutants no test noticed. Then
# scripts/mutation_report.py prints the score, the survivors, and which of them
# scripts/mutation_equivalent.txt explains (mutants that cannot change behaviour).
#
#   bash scripts/mutation.sh                         # everything (10-15 minutes on 2 cores)
#   bash scripts/mutation.sh "mpi_resolver.core.values*"  # one module
#
# Exit status 1 when the score is below 95 % or a survivor is neither killed nor explained.
# Not part of the test command (scripts/test.sh) (it takes 10-15 minutes); mutants/ is its scratch copy.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh > /dev/null
export TF_CPP_MIN_LOG_LEVEL=3 PYTHONDONTWRITEBYTECODE=1
# The tests run in mutmut's copy (mutants/), whose report --plot tests reach this checkout's
# .venv-plot (tests/unit/cli/test_report.py), not one inside the copy.
export MPI_RESOLVER_PLOT_VENV="${MPI_RESOLVER_PLOT_VENV:-$PWD/.venv-plot}"
rm -rf mutants
status=0
.venv/bin/python scripts/mutmut_only.py run "$@" > mutants.log 2>&1 || status=$?
if [ "$status" -ne 0 ]; then
  tail -40 mutants.log >&2
  echo "mutation: mutmut run failed ($status); its output is in mutants.log" >&2
  exit "$status"
fi
exec .venv/bin/python scripts/mutation_report.py "$@"
