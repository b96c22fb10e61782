#!/usr/bin/env bash
# The 'plot' extra's virtualenv, apart from the training's: .venv-plot with matplotlib and
# mpi_resolver itself (editable, without TensorFlow or mpi4py), for `mpi-resolver report
# --plot` (the demo's timeline, its tests). Not in .venv: Keras 3 imports matplotlib.pyplot
# wherever it is installed, at TensorFlow's import, about 0.4 s of a core in every TensorFlow
# process (the suite starts hundreds), for a picture drawn once after the job.
#
#   bash scripts/setup_plot.sh         # then: .venv-plot/bin/mpi-resolver report DIR --plot F
#
# Safe to run again, no standard input: a stamp records what was installed; a re-run whose stamp
# matches takes well under a second.
set -euo pipefail
cd "$(dirname "$0")/.."

VENV=${MPI_RESOLVER_PLOT_VENV:-.venv-plot}
PYTHON=${PYTHON:-python3}

# The stamp (stamp_value, stamp_matches, stamp_write) and quietly.
source scripts/venv_stamp.sh

if [ ! -x "$VENV/bin/python" ]; then
  echo "setup_plot: creating virtualenv $VENV"
  "$PYTHON" -m venv "$VENV"
fi
printf '*\n' > "$VENV/.gitignore"  # never committed, whatever the checkout's .gitignore says
want="$(stamp_value "plot" pyproject.toml scripts/setup_plot.sh)"
if ! stamp_matches "$VENV" "$want"; then
  echo "setup_plot: installing mpi_resolver's 'plot' extra (matplotlib) into $VENV"
  quietly "$VENV/bin/pip" install -q --disable-pip-version-check -e ".[plot]"
  "$VENV/bin/python" -c "import matplotlib.pyplot, mpi_resolver.cli.plot" \
    || { echo "setup_plot: the Python packages did not install" >&2; exit 1; }
  stamp_write "$VENV" "$want"
fi
