#!/bin/bash
# Multi-worker TensorFlow training with mpi_resolver on machines without Slurm: Open MPI's
# mpirun starts the workers, and MPIClusterResolver learns from MPI where each rank runs.
#
#   NP=4 HOSTFILE=hosts bash examples/mpirun.sh --epochs 5 --save model.keras
#
# Arguments go to train.py. Variables:
#   NP        number of workers (MPI ranks), default 4
#   HOSTFILE  Open MPI hostfile, default ./hosts; one line per machine, e.g.
#                 gpu-a slots=2
#                 gpu-b slots=2
#             (slots = ranks that machine takes). HOSTFILE=local runs every rank here.
#   PYTHON    the Python with TensorFlow, mpi4py and mpi_resolver, default `python` on PATH
#   GPUS_PER_NODE  GPUs per machine for the preflight; default: CUDA_VISIBLE_DEVICES, else
#             nvidia-smi counts them (a machine with neither nvidia-smi nor /dev/nvidia* is
#             CPU-only: 0 GPUs)
#
# Every machine must reach the others by the names mpirun sees, and the workers' ports
# (train.py --port-base, 8888 by default, plus each rank's index on its machine) must be free;
# --port-base auto picks free ones on each machine (the preflight then shows an example: the
# training run picks its own).
# Inside a Slurm allocation (salloc/sbatch), the same commands work without a hostfile:
# mpirun takes the nodes from Slurm, and the resolver knows that Slurm's variables there
# describe mpirun's daemons, not the ranks. Under Slurm, prefer `srun --mpi=pmix` (train.sbatch).

set -euo pipefail

NP=${NP:-4}
HOSTFILE=${HOSTFILE:-hosts}
PYTHON=${PYTHON:-python}
HERE=$(cd "$(dirname "$0")" && pwd)

MPIRUN=(mpirun -n "$NP")
if [ "$HOSTFILE" != local ]; then
  if [ ! -f "$HOSTFILE" ]; then
    echo "mpirun.sh: hostfile '$HOSTFILE' not found: write one (see the top of $0)," \
         "or set HOSTFILE=local to run all $NP ranks on this machine" >&2
    exit 2
  fi
  MPIRUN+=(--hostfile "$HOSTFILE")
fi
# Open MPI starts remote ranks with a bare environment: -x sends these variables along (MPICH's
# mpiexec sends the whole environment by default and has no -x).
export TF_CPP_MIN_LOG_LEVEL=${TF_CPP_MIN_LOG_LEVEL:-2}
MPIRUN+=(-x PATH -x TF_CPP_MIN_LOG_LEVEL)
if [ -n "${PYTHONPATH:-}" ]; then MPIRUN+=(-x PYTHONPATH); fi
if [ -n "${LD_LIBRARY_PATH:-}" ]; then MPIRUN+=(-x LD_LIBRARY_PATH); fi
# Running as root (containers)? Open MPI refuses unless OMPI_ALLOW_RUN_AS_ROOT=1 and
# OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 are exported. More ranks than slots? Add --oversubscribe
# (or export OMPI_MCA_rmaps_base_oversubscribe=1), and with more ranks than cores also
# --bind-to none.

# The preflight shows what training will use: pass on train.py's --port-base/--gpus-per-node.
SHOW_ARGS=()
args=("$@")
for ((i = 0; i < ${#args[@]}; i++)); do
  case "${args[i]}" in
    --port-base=* | --gpus-per-node=*) SHOW_ARGS+=("${args[i]}") ;;
    --port-base | --gpus-per-node) SHOW_ARGS+=("${args[i]}" "${args[i + 1]:-}"); i=$((i + 1)) ;;
  esac
done
if [[ " ${SHOW_ARGS[*]-} " != *" --gpus-per-node"* && -n "${GPUS_PER_NODE:-}" ]]; then
  SHOW_ARGS+=(--gpus-per-node "$GPUS_PER_NODE")
fi

# 1. What the resolver makes of this launch: the ClusterSpec and each rank's task, address and
#    GPUs, printed once (by rank 0). It starts no TensorFlow, so it takes about a second.
echo "== mpirun -n $NP: the ClusterSpec the workers will use"
"${MPIRUN[@]}" "$PYTHON" -m mpi_resolver show "${SHOW_ARGS[@]}"

# 2. Training: every rank is one TensorFlow worker; rank 0 (worker 0) is the chief, which
#    prints the progress and saves the model.
echo "== mpirun -n $NP: training ($HERE/train.py $*)"
"${MPIRUN[@]}" "$PYTHON" "$HERE/train.py" "$@"
