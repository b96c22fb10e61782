#!/usr/bin/env bash
# Installs what is needed (scripts/setup.sh), then runs the benchmarks: a table of measured
# figures with ratios to TensorFlow's resolver (bench.py), the MPI exchange at scale
# (exchange.py), check --connect's dial pattern (connect_pattern.py), and long jobs on Slurm:
# the signal to the checkpoint and the requeue, and the resumed run (preemption.py), periodic
# checkpoints (periodic.py) and saves in the background on 1 and 2 workers
# (background_saves.py), a worker
# killed and the step restarted (restart.py), a slow rank named (slow_rank.py), JAX's saves
# to the shared directory through Orbax and to the node-local tier, side by side (tiers.py, in
# .venv-jax: scripts/setup_jax.sh), TensorFlow's the same way (tf_tiers.py), both with the
# shared directory on a file server behind a 1 Gbit/s link (tests/harness/network_share.py:
# sshfs from a network namespace of its own, as the nodes of a cluster reach theirs), and
# goodput at scale from them (goodput.py); figures also
# written to benchmarks/results/ (or $MPI_RESOLVER_BENCH_RESULTS).
# --quick: smaller jobs; --skip-slurm: no throw-away Slurm cluster (no preemption.py either);
# other arguments go to bench.py.
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
skip_slurm=0
for arg in "$@"; do
  [ "$arg" = --quick ] && quick=(--quick)
  [ "$arg" = --skip-slurm ] && skip_slurm=1
done
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
echo
echo "Periodic checkpoints: the save's time, the overhead at 'auto', the write against dd," \
     "a signal to the checkpoint on disk (benchmarks/periodic.py)"
"$PY" benchmarks/periodic.py "${quick[@]}" --json "$results/periodic.json"
echo
echo "Periodic saves in the background against saves at once: what the training pays, the" \
     "write against dd (benchmarks/background_saves.py)"
"$PY" benchmarks/background_saves.py "${quick[@]}" --json "$results/background_saves.json"
echo "The same on 2 workers under mpirun, each step waiting for the other (--workers 2)"
# --quick: 10 MiB once (each run starts two TensorFlow processes on the machine's cores)
two=("${quick[@]}")
[ ${#quick[@]} -eq 0 ] || two=(--mib 10 --repeat 1)
"$PY" benchmarks/background_saves.py "${two[@]}" --workers 2 \
  --json "$results/background_saves_2.json"
if [ "$skip_slurm" = 0 ]; then
  echo
  echo "Long jobs: Slurm's signal to the checkpoint and the requeue, the resumed run" \
       "(benchmarks/preemption.py)"
  # Not in a namespace of its own: its throw-away cluster's nodes are network namespaces on a
  # bridge of the host's (each node's workers pick free ports there, --port-base auto).
  "$PY" benchmarks/preemption.py "${quick[@]}" --json "$results/preemption.json"
  echo
  echo "A worker killed without warning: the restart by supervise and the resume from the" \
       "periodic checkpoint (benchmarks/restart.py)"
  "$PY" benchmarks/restart.py --repeat "$([ ${#quick[@]} -gt 0 ] && echo 1 || echo 3)" \
    --json "$results/restart.json"
  echo
  echo "A slow rank: a rank held to 70 % of its time named, a clean run naming nobody" \
       "(benchmarks/slow_rank.py)"
  "$PY" benchmarks/slow_rank.py --round "$([ ${#quick[@]} -gt 0 ] && echo 2 || echo 45)" \
    --json "$results/slow_rank.json"
  echo
  echo "JAX's checkpoint tiers side by side: the shared directory through Orbax, at once and" \
       "in the background, against the node-local tier with a partner's copy; the restores;" \
       "a kill with and without the tier (benchmarks/tiers.py, in .venv-jax)"
  bash scripts/setup_jax.sh
  "${MPI_RESOLVER_JAX_VENV:-.venv-jax}/bin/python" benchmarks/tiers.py "${quick[@]}" \
    --json "$results/tiers.json"
  echo
  echo "TensorFlow's checkpoint tiers side by side: SlurmTerminationConfig's periodic saves to" \
       "the checkpoint directory and to the node-local tier with a partner's copy, at once" \
       "and in the background; the restores; a kill with and without the tier" \
       "(benchmarks/tf_tiers.py)"
  "$PY" benchmarks/tf_tiers.py "${quick[@]}" --json "$results/tf_tiers.json"
fi
echo
# Goodput at scale: from the tiers' figures where the Slurm part measured them, else from the
# TensorFlow saves' (at once and in the background).
measured="$results/tiers.json"
[ "$skip_slurm" = 0 ] || measured="$results/background_saves.json"
echo "Goodput at scale from those figures (benchmarks/goodput.py --measured $measured)"
"$PY" benchmarks/goodput.py --measured "$measured" \
  --mib "$([ ${#quick[@]} -gt 0 ] && echo 100 || echo 1024)" --json "$results/goodput.json"
