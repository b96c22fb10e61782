#!/usr/bin/env bash
# mpi_resolver in a few minutes, on one Debian machine, as root:
#
#   bash scripts/demo.sh
#
# 1. installs what is missing (Slurm, munge, PMIx, Open MPI; a .venv with TensorFlow and
#    mpi4py) with scripts/setup.sh;
# 2. starts a throw-away Slurm cluster of two emulated nodes, node1 and node2 (each a network
#    namespace with its own slurmd, hostname and address), from tests/harness/slurm_cluster.py;
# 3. runs the preflight `mpi-resolver check` on both nodes: do Slurm and MPI agree?
# 4. trains a small Keras model with MultiWorkerMirroredStrategy and MPIClusterResolver, one
#    TensorFlow worker per node (examples/train.py);
# 5. runs the same training as a long job (sbatch examples/train.sbatch); mid-training a
#    worker's process is killed (SIGKILL, as the kernel's OOM killer would): supervise names
#    the task and node and runs the step again, which resumes from the last periodic
#    checkpoint; then Slurm's warning signal (scancel --signal=USR1, as `#SBATCH
#    --signal=USR1@120` sends it 120 s before the time limit): every worker saves one
#    checkpoint at the same step, supervise requeues the job, the requeued run is let start at
#    once (Slurm would hold it 121 s: `scontrol update StartTime=now`, as the tests do), and
#    it resumes at the saved step; then `mpi-resolver report` tells the job's story and
#    draws its timeline (where matplotlib is installed);
# 6. stops the cluster. It is stopped on any exit too (an error, Ctrl-C), and nothing it
#    started is left behind but the timeline's picture (/tmp/mpi-resolver-demo-job.*.png,
#    its path printed); /etc/slurm is never touched.
#
# Exits non-zero if any step fails, or if the long job does not end with `steps done: N
# (resumed from K)`, 0 < K < N. Variables: DEMO_EPOCHS (5), DEMO_STEPS (50 per epoch),
# DEMO_LONG_STEPS (100 per epoch, the long job's), DEMO_TRAIN_TIMEOUT (300 s),
# MPI_RESOLVER_VENV (.venv).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"

EPOCHS=${DEMO_EPOCHS:-5}
STEPS=${DEMO_STEPS:-50}
LONG_STEPS=${DEMO_LONG_STEPS:-100}
TRAIN_TIMEOUT=${DEMO_TRAIN_TIMEOUT:-300}
VENV=${MPI_RESOLVER_VENV:-.venv}
case "$VENV" in /*) ;; *) VENV=$ROOT/$VENV ;; esac
PY=$VENV/bin/python
PLOT_VENV=${MPI_RESOLVER_PLOT_VENV:-.venv-plot}
case "$PLOT_VENV" in /*) ;; *) PLOT_VENV=$ROOT/$PLOT_VENV ;; esac
PLOT_PY=$PLOT_VENV/bin/python
HARNESS=$ROOT/tests/harness/slurm_cluster.py

WORK=""         # temp dir: the cluster's state and logs, the saved model, step logs
CLUSTER_UP=""   # set once the cluster has started
CHILD=""        # the step running now (a `timeout` process, leader of its process group)
LONG_JOB=""     # the long job's id, once submitted
T0=$SECONDS

if [ -t 1 ]; then BOLD=$'\033[1m' PLAIN=$'\033[0m'; else BOLD="" PLAIN=""; fi
header() { printf '\n%s== %s%s\n' "$BOLD" "$*" "$PLAIN"; }
note() { printf '   %s\n' "$*"; }

# TensorFlow prints these on every start whatever its log level; they only distract here.
NOISE='absl::InitializeLog|oneDNN custom operations|TF_ENABLE_ONEDNN_OPTS'

kill_child() {
  [ -n "$CHILD" ] || return 0
  if kill -0 "$CHILD" 2>/dev/null; then
    kill -TERM "$CHILD" 2>/dev/null || true   # timeout passes it on to srun, which cancels
    for _ in $(seq 50); do kill -0 "$CHILD" 2>/dev/null || break; sleep 0.1; done
    kill -KILL -- "-$CHILD" 2>/dev/null || true   # timeout's own process group, if still there
  fi
  wait "$CHILD" 2>/dev/null || true
  CHILD=""
}

cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  kill_child
  if [ -n "$LONG_JOB" ]; then timeout -k 5 20 scancel "$LONG_JOB" 2>/dev/null || true; fi
  if [ -n "$CLUSTER_UP" ]; then
    [ "$rc" -eq 0 ] || header "stopping the throw-away cluster (after a failure or interrupt)"
    timeout -k 5 60 "$PY" "$HARNESS" stop --dir "$WORK/cluster" || { [ "$rc" -ne 0 ] || rc=1; }
  fi
  if [ "$rc" -ne 0 ] && [ -n "$WORK" ] && [ -d "$WORK/cluster/log" ]; then
    note "Slurm's logs (kept for you): $WORK/cluster/log"
  elif [ -n "$WORK" ]; then
    rm -rf "$WORK"
  fi
  if [ "$rc" -ne 0 ]; then
    printf '\ndemo FAILED (exit %s) after %s s\n' "$rc" "$((SECONDS - T0))" >&2
  fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# run LIMIT NAME COMMAND...: runs COMMAND under `timeout -k 10 LIMIT`, in the background so
# that Ctrl-C reaches this script at once (timeout runs in a process group of its own, which
# the terminal's Ctrl-C does not reach); stdout is shown as it comes, stderr without
# TensorFlow's start-up noise once the step ends. Fails the demo if COMMAND fails.
run() {
  local limit=$1 name=$2 rc=0 start=$SECONDS
  shift 2
  timeout -k 10 "$limit" "$@" 2>"$WORK/$name.err" &
  CHILD=$!
  wait "$CHILD" || rc=$?
  CHILD=""
  grep -Ev "$NOISE" "$WORK/$name.err" >&2 || true
  if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
    echo "demo: $name did not finish within $limit s (stopped)" >&2
  elif [ "$rc" -ne 0 ]; then
    echo "demo: $name failed (exit $rc)" >&2
  fi
  [ "$rc" -eq 0 ] || return "$rc"
  note "($name: $((SECONDS - start)) s)"
}

if [ "$(id -u)" -ne 0 ]; then
  echo "demo: run as root (the throw-away cluster needs network namespaces and slurmd)" >&2
  exit 1
fi
WORK=$(mktemp -d /tmp/mpi-resolver-demo.XXXXXX)

header "1/5  setup: Debian's Slurm, munge, PMIx and Open MPI; TensorFlow and mpi4py in $VENV"
note "(scripts/setup.sh installs only what is missing; the first time takes a few minutes)"
run 1800 setup bash scripts/setup.sh

header "2/5  a throw-away Slurm cluster: two emulated nodes, node1 and node2"
note "Each node is a network namespace with its own hostname, address and slurmd; the"
note "controller, its config and logs live in $WORK/cluster."
CLUSTER_UP=1   # from here on, cleanup stops it (stop is safe after a failed start too)
run 60 cluster-start "$PY" "$HARNESS" start --nodes node1,node2 --dir "$WORK/cluster" \
  >"$WORK/cluster.env"
# Its export lines point srun/sbatch at this cluster (SLURM_CONF, Open MPI's network) and
# unset any Slurm variables of an enclosing job.
eval "$(grep -E '^(export|unset) ' "$WORK/cluster.env")"
# The tasks run the venv's Python (sbatch/srun pass this environment on) and this checkout.
export PATH="$VENV/bin:$PATH" PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"
export TF_CPP_MIN_LOG_LEVEL=2
grep '^# nodes' "$WORK/cluster.env" | sed 's/; stop:.*//; s/^# /   /'
timeout -k 5 20 sinfo -h -N -o '   %N: %T, %c CPUs (sinfo)'

header "3/5  preflight: srun -N2 -n2 --mpi=pmix mpi-resolver check"
note "Every task reports what Slurm told it and what MPI says; exit 0 only if they agree."
note "These nodes have no GPUs (no nvidia-smi, no /dev/nvidia*): 0 GPUs, with a one-line note."
run 60 check srun -N2 -n2 --mpi=pmix mpi-resolver check

header "4/5  training: srun -N2 --ntasks-per-node=1 --mpi=pmix python examples/train.py"
note "One TensorFlow worker per node; MultiWorkerMirroredStrategy(cluster_resolver="
note "MPIClusterResolver()) all-reduces the gradients; worker 0 (the chief) prints and saves."
note "(The two workers meet about 5 s after start: importing TensorFlow takes most of it.)"
run "$TRAIN_TIMEOUT" train srun -N2 --ntasks-per-node=1 --mpi=pmix --kill-on-bad-exit=1 \
  python examples/train.py --epochs "$EPOCHS" --steps-per-epoch "$STEPS" \
  --save "$WORK/model.keras"
note "The chief's saved model, loaded back in a fresh process:"
run 120 load python -c 'import sys, keras
m = keras.models.load_model(sys.argv[1])
print(f"   {sys.argv[1]}: {m.count_params()} parameters,",
      f"input {m.input_shape}, output {m.output_shape}")' \
  "$WORK/model.keras"

header "5/5  a long job: sbatch examples/train.sbatch, a worker lost, then Slurm's warning"
note "The same training as a batch job under the template: its preflight, then train.py under"
note "mpi-resolver supervise. Mid-training, worker 1's process is killed (SIGKILL): supervise"
note "names it and runs the step again, from the last periodic checkpoint. Then Slurm's warning"
note "signal (scancel --signal=USR1, as #SBATCH --signal=USR1@120 sends it 120 s before the"
note "time limit): every worker saves one checkpoint at the same step and exits 75, supervise"
note "requeues the job, and the next run resumes at that step. Slurm holds a requeued job"
note "121 s; here it is let start at once. At the end: mpi-resolver report, the job's story."
OUT=$WORK/long-job.out
SHOWN=0
# The job's output lines not shown yet: the preflight's verdicts, the training's progress, the
# package's and supervise's lines, Slurm's (not TensorFlow's start-up lines nor the tables).
SHOW='^(== |OK: |CHECKPOINT DIR |CONNECT |training: |  step |epoch |resumed |steps done|final '
SHOW+='|mpi_resolver: (checkpoint|periodic|the checkpoint|the save)'
SHOW+='|mpi-resolver supervise|slurmstepd)'
show_new() {
  local total
  [ -f "$OUT" ] || return 0
  total=$(wc -l <"$OUT")
  [ "$total" -gt "$SHOWN" ] || return 0
  sed -n "$((SHOWN + 1)),${total}p" "$OUT" | grep -E "$SHOW" | sed 's/^/   | /' || true
  SHOWN=$total
}
job_field() {  # job_field NAME: the long job's field from `scontrol show job -o`
  timeout -k 5 20 scontrol show job -o "$LONG_JOB" | tr ' ' '\n' | sed -n "s/^$1=//p"
}
# wait_for SECONDS WHAT COMMAND...: shows the job's new lines until COMMAND succeeds.
wait_for() {
  local limit=$1 what=$2 start=$SECONDS
  shift 2
  until "$@"; do
    show_new
    if [ $((SECONDS - start)) -ge "$limit" ]; then
      echo "demo: the long job: no $what within $limit s" \
           "(job $LONG_JOB: $(job_field JobState))" >&2
      return 1
    fi
    sleep 0.5
  done
  show_new
}
trains() { grep -q '^  step ' "$OUT" 2>/dev/null; }
saved() { grep -q ' (periodic) in ' "$OUT" 2>/dev/null; }
# trains_again: a step's line after supervise's restart.
trains_again() { sed -n '/restart 1 of/,$p' "$OUT" 2>/dev/null | grep -q '^  step '; }
task_pid() {  # task_pid N: the PID of the long job's task N (its Python running train.py)
  # This cluster's job (SLURM_CONF): another throw-away cluster on the machine (the test suite's)
  # numbers its jobs from 1 too, and once had a job 3 training when this one did.
  local pid env
  for pid in $(pgrep -f 'examples/train\.py'); do
    env=$(tr '\0' '\n' <"/proc/$pid/environ" 2>/dev/null) || continue
    if grep -qx "SLURM_JOB_ID=$LONG_JOB" <<<"$env" && grep -qx "SLURM_PROCID=$1" <<<"$env" \
        && grep -qxF "SLURM_CONF=$SLURM_CONF" <<<"$env" \
        && ! grep -qx "SLURM_STEP_ID=batch" <<<"$env"; then
      echo "$pid"
      return 0
    fi
  done
  return 1
}
requeued() { [ "$(job_field JobState) $(job_field Reason)" = "PENDING BeginTime" ]; }
ended() {
  case "$(job_field JobState)" in COMPLETED | FAILED | CANCELLED | TIMEOUT) ;; *) false ;; esac
}
LONG_START=$SECONDS
LONG_JOB=$(CHECKPOINT_ROOT=$WORK/checkpoints MPI_RESOLVER_PORT_BASE=auto CHECKPOINT_EVERY=50 \
  timeout -k 5 30 sbatch --parsable --output="$OUT" examples/train.sbatch \
  --epochs "$EPOCHS" --steps-per-epoch "$LONG_STEPS" --log-every 25)
note "submitted job $LONG_JOB; its output as it comes, in part ($OUT):"
wait_for "$TRAIN_TIMEOUT" "periodic checkpoint" saved
TASK1=$(task_pid 1) || { echo "demo: task 1 of job $LONG_JOB not found" >&2; exit 1; }
printf '%s   >> kill -KILL %s   (task 1, worker 1 on node2)%s\n' "$BOLD" "$TASK1" "$PLAIN"
kill -KILL "$TASK1"
wait_for "$TRAIN_TIMEOUT" "training after the restart" trains_again
printf '%s   >> scancel --signal=USR1 %s%s\n' "$BOLD" "$LONG_JOB" "$PLAIN"
timeout -k 5 20 scancel --signal=USR1 "$LONG_JOB"
wait_for 120 "requeue" requeued
# A start sent in the requeue's own second fails (tests/harness/requeue.py): 3 s later.
sleep 3
printf '%s   >> scontrol update JobId=%s StartTime=now%s\n' "$BOLD" "$LONG_JOB" "$PLAIN"
timeout -k 5 20 scontrol update JobId="$LONG_JOB" StartTime=now
wait_for "$TRAIN_TIMEOUT" "end" ended
STATE=$(job_field JobState)
TOTAL=$((EPOCHS * LONG_STEPS))
RESUMED=$(sed -n "s/^steps done: $TOTAL (resumed from \([1-9][0-9]*\))$/\1/p" "$OUT" | tail -1)
if [ "$STATE" != COMPLETED ] || [ -z "$RESUMED" ] || [ "$RESUMED" -ge "$TOTAL" ]; then
  echo "demo: the long job ended $STATE without 'steps done: $TOTAL (resumed from K)'," \
       "0 < K < $TOTAL (see $OUT)" >&2
  exit 1
fi
note "(long job: $((SECONDS - LONG_START)) s; Restarts=$(job_field Restarts);" \
  "resumed at step $RESUMED of $TOTAL)"
# The job's story from its ledger, and its timeline kept for you (the 'plot' extra's
# matplotlib, in .venv-plot, apart from TensorFlow's .venv (scripts/setup_plot.sh): without
# it, the report alone).
PLOT=()
REPORT_PY=$PY
if "$PLOT_PY" -c 'import matplotlib' 2>/dev/null; then
  PLOT=(--plot "$(mktemp --suffix=.png /tmp/mpi-resolver-demo-job.XXXXXX)")
  REPORT_PY=$PLOT_PY
fi
printf '\n%s   >> mpi-resolver report %s %s%s\n' "$BOLD" "$WORK/checkpoints/$LONG_JOB" \
  "${PLOT[*]}" "$PLAIN"
"$REPORT_PY" -m mpi_resolver report "$WORK/checkpoints/$LONG_JOB" "${PLOT[@]}" | sed 's/^/   /'
LONG_JOB=""

header "stopping the cluster"
run 60 cluster-stop "$PY" "$HARNESS" stop --dir "$WORK/cluster"
CLUSTER_UP=""
printf '\ndemo done in %s s. Next: examples/train.sbatch on your cluster, %s\n' \
  "$((SECONDS - T0))" "docs/own-script.md for your own script, examples/mpirun.sh (no Slurm)."
