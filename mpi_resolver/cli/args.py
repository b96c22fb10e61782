"""mpi-resolver's command line: its commands and options (argparse), and what --help says."""

from __future__ import annotations

import argparse
import os
from typing import Any, Optional, Sequence

from mpi_resolver.cli.deep import FRAMEWORKS
from mpi_resolver.cli.story_args import add_story_commands
from mpi_resolver.placement.addresses import DEFAULT_ADDRESS
from mpi_resolver.rehearsal.checkpoint_files import checkpoint_dir
from mpi_resolver.core.errors import FormatError
from mpi_resolver.options import AUTO, DEFAULT_PORT_BASE, DEFAULT_SOURCE, DEFAULT_TIMEOUT, SOURCES
from mpi_resolver.core.values import PORT_MAX, PORT_MIN, is_port, whole_number

_DESCRIPTION = """\
Show how mpi_resolver maps this job onto TensorFlow: the ClusterSpec, each rank's task,
address and GPUs, and whether Slurm and MPI agree. Run it the way you run training, e.g.

  srun --mpi=pmix mpi-resolver check      preflight: do Slurm and MPI agree? (exit 0 if so)
  mpirun -n 4 mpi-resolver show           the ClusterSpec and every rank's task and GPUs
  eval "$(mpi-resolver tf-config --export)"   TF_CONFIG and GPUs for this rank (Keras users)
  srun --mpi=pmix mpi-resolver exec -- python train.py   the same, without eval
  mpi-resolver supervise -- srun --mpi=pmix python train.py   in a batch script: restart,
                                          requeue or end the step as its end says

show and check print once, from rank 0; tf-config prints on every rank (its own TF_CONFIG).
Exit status: 0 success, 1 Slurm and MPI disagree (check), 2 the job could not be resolved.
"""


def _port_base(text: str) -> Any:
    """Returns --port-base as a port or 'auto'; argparse reports the error otherwise."""
    if text == AUTO:
        return text
    port = whole_number(text)
    if port is None or not is_port(port):
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a port ({PORT_MIN}..{PORT_MAX}) or 'auto'")
    return port


def _signal(text: str) -> Any:
    """Returns --signal as a WarningSignal; argparse reports the error otherwise."""
    from mpi_resolver.long_jobs.signals import parse_signal

    try:
        return parse_signal(text, "--signal")
    except FormatError as e:
        raise argparse.ArgumentTypeError(str(e)) from e


def _checkpoint_dir(text: str) -> str:
    """Returns --checkpoint-dir as an absolute path (``~`` expanded); argparse reports an
    empty one."""
    try:
        return os.path.abspath(os.path.expanduser(checkpoint_dir(text)))
    except FormatError as e:
        raise argparse.ArgumentTypeError(str(e)) from e


def _max_restarts(text: str) -> int:
    """Returns --max-restarts as an int >= 0; argparse reports the error otherwise."""
    from mpi_resolver.long_jobs.restarts import parse_max_restarts

    try:
        return parse_max_restarts(text)
    except FormatError as e:
        raise argparse.ArgumentTypeError(str(e)) from e


def _supervise(sub: Any) -> None:
    """Adds supervise: --max-restarts, --spare-nodes, --warned-file and the command after
    --."""
    from mpi_resolver.long_jobs.restarts import DEFAULT_MAX_RESTARTS

    run = sub.add_parser(
        "supervise", help="run a step (srun ..., mpirun ...): restart, requeue or end it as "
                          "the restart policy says",
        description="Runs COMMAND (the batch script's `srun ...`, or `mpirun ...` without "
                    "Slurm) and judges how each run ended by the restart policy "
                    "(docs/long-jobs.md): what came to supervise (nothing, the warning "
                    "signal of MPI_RESOLVER_SIGNAL, SIGTERM, SIGHUP), the run's cause (srun's "
                    "or mpirun's report and the exit codes: a signal, out of memory, a hang, "
                    "a usage or configuration error, the tasks' own 75 after their save) and "
                    "whether the newest checkpoint in MPI_RESOLVER_CHECKPOINT_DIR advanced. "
                    "It then runs the step again in this allocation (at most --max-restarts "
                    "times), requeues the job (scontrol requeue: exit 75), or ends: 0 when "
                    "training completed; the step's own 2 or 64-78 (a usage or configuration "
                    "error: never restarted, never requeued); 79 when two runs in a row made "
                    "no progress (do not requeue); 74 when the save failed without progress; "
                    "143 when Slurm ends the job (scancel); the last failure's status when "
                    "the restarts are used up. One line names each run's cause, task and "
                    "node; every run is recorded in the job's ledger beside its checkpoints. "
                    "A node that failed twice in the job, or that the site drained, is left "
                    "out of the next run where the job has spare nodes and excluded from the "
                    "requeued job.")
    run.add_argument("--max-restarts", type=_max_restarts, default=DEFAULT_MAX_RESTARTS,
                     metavar="N", help="runs after the first in this allocation, at most "
                                       f"(default {DEFAULT_MAX_RESTARTS}; 0: never restart)")
    run.add_argument("--spare-nodes", default="0", metavar="N",
                     help="run the srun step on the job's nodes less N (srun --nodes), so "
                          "that a node that fails again can be left out (the templates' "
                          "SPARE_NODES; default 0)")
    run.add_argument("--warned-file", metavar="FILE",
                     help="a file whose existence says that the warning signal came (the "
                          "templates' trap creates it when the signal comes to the batch "
                          "script): the running step saves and the job is requeued; before a "
                          "run, it is requeued without starting one")
    run.add_argument("step", nargs=argparse.REMAINDER, metavar="-- COMMAND [ARGS]",
                     help="the step to run, after --")


def _common() -> argparse.ArgumentParser:
    """Returns the options every command takes (the resolver's arguments, --json)."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--jobs", metavar="NAME=N,...",
                        help="job names and task counts, e.g. ps=1,worker=3 "
                             "(default: worker=<all tasks>)")
    common.add_argument("--port-base", type=_port_base, metavar="PORT|auto",
                        help="first port on each node; ranks on a node count up (default "
                             f"MPI_RESOLVER_PORT_BASE where set, else {DEFAULT_PORT_BASE}); "
                             "'auto': ports free on each node, so that jobs sharing a node do "
                             "not collide")
    common.add_argument("--gpus-per-node", type=int, metavar="N",
                        help="GPUs on each node (default: MPI_RESOLVER_GPUS_PER_NODE where "
                             "set, else Slurm's, CUDA_VISIBLE_DEVICES, else nvidia-smi)")
    common.add_argument("--gpus-per-task", type=int, metavar="N",
                        help="GPUs for each task (default: the node's GPUs / its tasks)")
    common.add_argument("--source", choices=SOURCES, default=DEFAULT_SOURCE,
                        help="where rank and placement come from: slurm's step variables, "
                             "the MPI communicator, or auto (Slurm inside a step, else MPI)")
    common.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT, metavar="SECONDS",
                        help="give up on ranks that do not answer after this long (default "
                             f"{DEFAULT_TIMEOUT:g})")
    common.add_argument("--uneven-gpus", action="store_true",
                        help="let tasks get different numbers of GPUs, each as many as its "
                             "node gives (parameter servers); by default every task gets the "
                             "same number, as MultiWorkerMirroredStrategy needs")
    common.add_argument("--address", default=DEFAULT_ADDRESS, metavar="RULE",
                        help="what the ClusterSpec names each node by: host (default: Slurm's "
                             "node name, or the host name under mpirun), fqdn, ip (the IPv4 "
                             "address the name resolves to), iface:NAME (that interface's "
                             "IPv4 address on each node, gathered over MPI), or a name with "
                             "{host} in it, e.g. '{host}-ib0'")
    common.add_argument("--json", action="store_true", help="machine-readable output")
    return common


def _deep_options(check: argparse.ArgumentParser) -> None:
    """Adds check's --deep, --framework, --signal and --collective."""
    check.add_argument(
        "--deep", action="store_true",
        help="--connect, then rehearse TensorFlow as training runs it: every rank imports it, "
             "creates MPIClusterResolver with these options, checks that TensorFlow lists as "
             "many GPUs as it was given, builds MultiWorkerMirroredStrategy and runs one "
             "all-reduce; rank 0 prints each rank's time to the first all-reduce. A rank that "
             "fails or does not get there within --timeout is named and every rank exits 1. "
             "Needs TensorFlow (a CPU build: --gpus-per-node 0), or JAX with --framework jax.")
    check.add_argument(
        "--framework", choices=FRAMEWORKS, default=None,
        help="with --deep: the framework to rehearse: tensorflow (default) or jax (import "
             "jax, mpi_resolver.jax's resolution, jax.distributed.initialize, one all-reduce "
             "across every process; needs JAX, not TensorFlow)")
    check.add_argument(
        "--signal", type=_signal, metavar="NAME",
        help="with --deep: after the all-reduce, check on every rank that Slurm's warning "
             "signal NAME (as #SBATCH --signal names it: USR1, USR2, ...) and SIGTERM still "
             "reach mpi_resolver's watcher, installed after the strategy as "
             "SlurmTerminationConfig is; a library that took the signal since is named")
    check.add_argument(
        "--collective", choices=("auto", "ring", "nccl"), default="auto",
        help="--deep's all-reduce (CommunicationOptions): auto (default: what the strategy "
             "picks when a training script does not say, NCCL between GPUs and ring on "
             "CPU-only nodes), ring (gRPC, any node) or nccl (GPUs only)")


def _checkpoint_option(check: argparse.ArgumentParser) -> None:
    """Adds check's --checkpoint-dir."""
    check.add_argument(
        "--checkpoint-dir", type=_checkpoint_dir, metavar="DIR",
        help="also check that DIR is one directory that every node of the job sees and can "
             "write (a shared file system), as saving a checkpoint on Slurm's warning signal "
             "and resuming from it after a requeue needs: every rank writes a small hidden "
             "file there, the first rank of each node reads back those of the other nodes "
             "(looking again until --timeout: network file systems may lag), and each rank "
             "removes its own. Rank 0 prints the free space there on each node, or the nodes "
             "that cannot use DIR with the likely fix (exit status 1). Without MPI (--source "
             "slurm) each rank checks its own node only.")


def _parser() -> argparse.ArgumentParser:
    """Returns the command line's parser: show, check, tf-config, exec, supervise, report,
    status."""
    common = _common()
    parser = argparse.ArgumentParser(
        prog="mpi-resolver", description=_DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    sub.add_parser("show", parents=[common], help="the ClusterSpec and every rank's task")
    _check(sub, common)
    _tf_config_and_exec(sub, common)
    _supervise(sub)
    add_story_commands(sub)
    return parser


def _check(sub: Any, common: argparse.ArgumentParser) -> None:
    """Adds check: the cross-check, --connect, --deep's options, --checkpoint-dir."""
    check = sub.add_parser(
        "check", parents=[common],
        help="cross-check Slurm against MPI; exit 1 with a table if they differ")
    check.add_argument(
        "--connect", action="store_true",
        help="then rehearse TensorFlow's connections: every rank listens on its ClusterSpec "
             "address and dials its peers by the ClusterSpec's names (every pair of nodes up "
             "to 64 nodes, about 2 log2(nodes) connections a rank beyond); each failure is "
             "reported once, by rank 0, with its likely fix, and the exit status is 1. Each "
             "dial gives up after --timeout. With --source slurm (no MPI) each rank reports "
             "its own failures, and the check takes about twice --timeout.")
    _deep_options(check)
    _checkpoint_option(check)


def _tf_config_and_exec(sub: Any, common: argparse.ArgumentParser) -> None:
    """Adds tf-config and exec, which both hand a program its TF_CONFIG and GPUs."""
    tfc = sub.add_parser("tf-config", parents=[common], help="this rank's TF_CONFIG")
    tfc.add_argument("--export", action="store_true",
                     help="print `export TF_CONFIG=... CUDA_VISIBLE_DEVICES=...` for a shell "
                          "to eval: this rank's task and the GPUs the resolver gives it")
    run = sub.add_parser(
        "exec", parents=[common], help="run a program as this rank, TF_CONFIG and GPUs set",
        description="Resolves, sets TF_CONFIG and CUDA_VISIBLE_DEVICES, and replaces itself "
                    "with PROGRAM: `srun --mpi=pmix mpi-resolver exec -- python train.py`. "
                    "The resolution uses MPI where it is wired (the cross-check, the same "
                    "number of GPUs for every worker), and MPI does not start twice for one "
                    "rank: PROGRAM must not use MPI then. With --source slurm it resolves from "
                    "Slurm's variables alone, without MPI, so PROGRAM may use MPI (other "
                    "nodes' GPUs are then not checked).")
    for p in (tfc, run):
        p.add_argument("--no-auto-set-gpu", dest="auto_set_gpu", action="store_false",
                       help="leave CUDA_VISIBLE_DEVICES out (as auto_set_gpu=False does)")
    run.add_argument("program", nargs=argparse.REMAINDER, metavar="-- PROGRAM [ARGS]",
                     help="the program to run, after --")


def _check_framework(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Sets check's --framework (its default where not given); exits (status 2) where it is
    given without --deep, or where --signal (TensorFlow's rehearsal) goes with jax."""
    if args.command != "check":
        return
    if args.framework is not None and not args.deep:
        parser.error(f"--framework {args.framework} chooses the framework --deep rehearses: "
                     "add --deep")
    args.framework = args.framework or FRAMEWORKS[0]
    if args.framework == "jax" and args.signal is not None:
        parser.error("--signal is checked by TensorFlow's rehearsal only (--framework "
                     "tensorflow); for JAX, see docs/jax.md's long jobs")


def parse_args(argv: Optional[Sequence[str]]) -> argparse.Namespace:
    """Returns the parsed command line; exits (status 2, as argparse does) on bad arguments,
    or an exec without a program."""
    parser = _parser()
    args = parser.parse_args(argv)
    if getattr(args, "signal", None) is not None and not args.deep:
        parser.error("--signal is checked by --deep's rehearsal, after TensorFlow's first "
                     "all-reduce: add --deep")
    _check_framework(parser, args)
    if getattr(args, "deep", False):
        args.connect = True  # --deep implies --connect
    if args.command == "exec":
        args.program = args.program[1:] if args.program[:1] == ["--"] else args.program
        if not args.program:
            parser.error("exec needs a program: mpi-resolver exec -- python train.py")
    if args.command == "supervise":
        args.step = args.step[1:] if args.step[:1] == ["--"] else args.step
        if not args.step:
            parser.error("supervise needs a command: mpi-resolver supervise [--max-restarts "
                         "N] -- srun --mpi=pmix python train.py (or mpirun ...)")
    return args
