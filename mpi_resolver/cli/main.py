"""mpi-resolver show / check / tf-config / exec: the resolver's answer without importing
TensorFlow; supervise (cli/supervise) without resolving anything."""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
from dataclasses import asdict
from typing import Any, Dict, List, Mapping, Optional, Sequence

from mpi_resolver.rehearsal.checkpoint_report import CheckpointReport
from mpi_resolver.rehearsal.checkpoint_probe import run_checkpoint
from mpi_resolver.cli.args import parse_args
from mpi_resolver.cli.deep import end_after_deep, end_lost, run_deep_check
from mpi_resolver.rehearsal.connect_check import ConnectReport, run_connect
from mpi_resolver.rehearsal.deep_check import DeepReport
from mpi_resolver.resolve.environment import snapshot
from mpi_resolver.core.errors import ExchangeTimeout, MismatchError, ResolutionError
from mpi_resolver.cli.exec import MPI_USED, program_env, run_program, tf_config_text
from mpi_resolver.gpus.notes import describe
from mpi_resolver.gpus.lists import SlurmGpus
from mpi_resolver.launch.launchers import Launch, detect_launch
from mpi_resolver.options import Options, make_options, parse_jobs
from mpi_resolver.exchange.records import RankRecord
from mpi_resolver.launch.slurm_step import SlurmStep
from mpi_resolver.resolve.resolution import Resolution, resolve_job
from mpi_resolver.core.tables import text_table
from mpi_resolver.core.values import whole_number


_REPORT_WAIT = 10.0  # seconds a failing rank waits for the others before it exits

def _ranks(res: Resolution) -> List[Dict[str, Any]]:
    """Returns every rank's host, task, address, GPUs ('?' where unknown) and how it got them."""
    layout = res.layout
    rows = []
    for rank, (host, index) in enumerate(zip(layout.placement, layout.local_index, strict=True)):
        task_type, task_id = layout.task_of(rank)
        gpus, kind = res.gpus.at(host, index)
        rows.append({"rank": rank, "host": host, "task_type": task_type, "task_id": task_id,
                     "address": layout.addresses[rank],
                     "gpus": "?" if gpus is None else ",".join(gpus), "gpu_binding": kind})
    return rows


def _gpu_text(r: RankRecord) -> str:
    """Returns what a rank saw of its GPUs, for the records table."""
    if r.visible is not None:
        return ",".join(r.visible) or "''"
    if r.gpus_on_node is not None:
        return f"{r.gpus_on_node} (SLURM_GPUS_ON_NODE)"
    if r.probed is not None:
        if r.cpu_only:
            return "none (CPU-only)"
        shown = r.probed if isinstance(r.probed, int) else ",".join(r.probed)
        return f"{shown} (nvidia-smi)"
    return "-"


def _record_rows(records: Sequence[RankRecord]) -> List[Dict[str, Any]]:
    return [{"rank": r.rank, "mpi host": r.host, "SLURM_PROCID": r.procid,
             "SLURMD_NODENAME": r.nodename, "tasks (Slurm)": r.num_tasks,
             "GPUs": _gpu_text(r), "GPU bind": r.gpu_bind} for r in records]


def _report_show(res: Resolution, as_json: bool, bind: Optional[str]) -> str:
    ranks = _ranks(res)
    binding = describe(sorted({row["gpu_binding"] for row in ranks}), bind)
    if as_json:
        return json.dumps({"source": res.source, "verified": res.verified,
                           "cluster": res.cluster(), "ranks": ranks, "gpu_binding": binding,
                           "notes": res.notes}, indent=2)
    lines = [f"source: {res.source}   cross-checked with MPI: "
             f"{'yes' if res.verified else 'no'}   tasks: {res.num_tasks}",
             "ClusterSpec: " + json.dumps(res.cluster()), f"GPUs: {binding}", "",
             text_table(ranks, ("rank", "host", "task_type", "task_id", "address", "gpus",
                            "gpu_binding"))]
    lines += [f"warning: {n}" if n == res.proxy else f"note: {n}" for n in res.notes]
    return "\n".join(lines)


def _report_check(res: Optional[Resolution], records: Optional[List[RankRecord]],
                  error: Optional[MismatchError], as_json: bool, bind: Optional[str],
                  connect: Optional[ConnectReport] = None, deep: Optional[DeepReport] = None,
                  checkpoint: Optional[CheckpointReport] = None) -> str:
    if as_json:
        return json.dumps({
            "agree": error is None,
            "differences": [vars(d) for d in (error.rows if error else ())],
            "message": str(error) if error else None,
            "records": [asdict(r) for r in records or ()],  # fields only
            "cluster": res.cluster() if res else None,
            "ranks": _ranks(res) if res else None,
            "proxy": res.proxy if res else None,
            "checkpoint_dir": checkpoint.as_json() if checkpoint else None,
            "connect": connect.as_json() if connect else None,
            "deep": deep.as_json() if deep else None}, indent=2, default=list)
    lines = []
    if records:
        lines += ["What each rank sees:", text_table(_record_rows(records), (
            "rank", "mpi host", "SLURM_PROCID", "SLURMD_NODENAME", "tasks (Slurm)", "GPUs",
            "GPU bind")), ""]
    if error is not None:
        lines.append(f"MISMATCH: {error}")
    else:
        assert res is not None  # resolved, since no error
        if res.verified:
            lines.append(f"OK: Slurm and MPI agree on all {len(records or ())} ranks.")
        else:  # check --connect under mpirun, or with --source slurm
            lines.append("Not cross-checked: " + ("MPI alone (no Slurm step)." if records else
                                                   "Slurm's variables alone (--source slurm)."))
        lines += ["", _report_show(res, False, bind)]
        if res.proxy:  # the warning above, as check's verdict
            lines += ["", "PROXY: check fails: a proxy variable would carry TensorFlow's "
                          "traffic between the workers (see the warning above)."]
    lines += [line for r in (checkpoint, connect, deep) if r is not None
              for line in ("", r.text())]
    return "\n".join(lines)


def _failed(status: int, together: bool, start: bool) -> int:
    """Returns ``status`` once this rank's output is out. ``together``: first wait (bounded)
    until every rank gets here, rank 0 with its report printed, because mpirun ends the whole
    job when the first rank exits non-zero; where MPI has not started yet, ``start`` it for
    that (under an MPI launcher, where every rank fails alike)."""
    sys.stdout.flush()
    sys.stderr.flush()
    if together:
        from mpi_resolver.exchange.transport import wait_for_all

        wait_for_all(_REPORT_WAIT, start=start)
    return status


def _options(args: argparse.Namespace, source: str, env: Mapping[str, str]) -> Options:
    """Returns the resolver's options from the command line's arguments."""
    return make_options(
        jobs=parse_jobs(args.jobs) if args.jobs else None, port_base=args.port_base,
        gpus_per_node=args.gpus_per_node, gpus_per_task=args.gpus_per_task,
        source=source, verify=_verify(args, source, env),
        timeout=args.timeout, uneven_gpus=args.uneven_gpus, address=args.address, env=env)


def _verify(args: argparse.Namespace, source: str, env: Mapping[str, str]) -> Any:
    """Returns the resolver's verify: True for check (the cross-check), but 'auto' where
    --connect or --checkpoint-dir has no Slurm to check against MPI (mpirun) or no MPI
    (--source slurm): the connections and the directory are still checked."""
    if args.command != "check":
        return "auto"
    rehearses = args.connect or args.checkpoint_dir is not None
    if rehearses and (source == "slurm" or not SlurmStep.present(env)):
        return "auto"
    return True


def _warn(warnings: Sequence[str], rank: Optional[int], kind: str = "warning") -> None:
    """Prints warnings (or notes, ``kind``) on rank 0's stderr: the plan's before MPI starts
    (MPI_Init may hang)."""
    if rank in (0, None) and warnings:
        sys.stderr.write("".join(f"mpi-resolver: {kind}: {w}\n" for w in warnings))
        sys.stderr.flush()


def _error(e: ResolutionError, rank: Optional[int], launch: Launch, source: str,
           own: bool = False) -> int:
    """Prints ``e`` (rank 0's, or every rank's ``own``: a timeout, a program exec cannot run
    on its node) and returns exit status 2.

    After a timeout some ranks never come. An error before MPI started comes on every rank
    alike; under mpirun/mpiexec, which end the job at the first failing rank, the ranks start
    MPI to wait for rank 0's message (srun does not end the others, and under srun MPI may be
    what must not start: a plugin the MPI cannot speak).
    """
    own = own or isinstance(e, ExchangeTimeout)  # each rank's own: every rank reports it
    if rank in (0, None) or own:
        prefix = "" if rank is None else f"rank {rank}: "
        sys.stderr.write(f"mpi-resolver: error: {prefix}{e}\n")  # one write: launchers
        sys.stderr.flush()                                          # interleave lines
    return _failed(2, together=not own, start=launch.mpirun and source != "slurm")


def _print_result(args: argparse.Namespace, res: Resolution, bind: Optional[str],
                  checks: Sequence[Any] = ()) -> None:
    """Prints what the command asks for: every rank its TF_CONFIG, or rank 0 a report (and,
    where check's rehearsals ran without MPI, every other rank its own failures). ``checks``:
    --checkpoint-dir's, --connect's and --deep's reports (None where not run)."""
    if args.command == "tf-config":
        # one write per rank: launchers interleave the ranks' lines
        sys.stdout.write(_tf_config_line(args, res) + "\n")
        sys.stdout.flush()
    elif res.rank == 0:
        checkpoint, connect, deep = checks or (None, None, None)
        print(_report_check(res, res.records, None, args.json, bind, connect, deep, checkpoint)
              if args.command == "check" else _report_show(res, args.json, bind))
    else:
        own = [f"rank {res.rank}: {r.text()}\n" for r in checks
               if r is not None and not r.ok and not r.gathered]
        sys.stdout.write("".join(own))  # one write: see above
        sys.stdout.flush()


def _tf_config_line(args: argparse.Namespace, res: Resolution) -> str:
    """Returns this rank's tf-config line: TF_CONFIG's JSON; with --json, an object of
    TF_CONFIG and CUDA_VISIBLE_DEVICES; with --export, a shell's export of both. The GPUs are
    those cluster_spec() sets, left out (None in --json) with --no-auto-set-gpu."""
    visible = res.visible_devices if args.auto_set_gpu else None
    if args.json:
        return json.dumps({"TF_CONFIG": res.tf_config(), "CUDA_VISIBLE_DEVICES": visible})
    text = tf_config_text(res)
    if not args.export:
        return text
    gpus = "" if visible is None else f" CUDA_VISIBLE_DEVICES={shlex.quote(visible)}"
    return f"export TF_CONFIG={shlex.quote(text)}{gpus}"


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Runs the command line; returns the exit status (0, 1 mismatch, 2 error)."""
    args = parse_args(argv)
    if args.command in ("supervise", "report", "status"):
        return _without_resolution(args)
    env = snapshot()
    launch = detect_launch(env)
    # Who prints errors that every rank hits alike: rank 0, as far as the variables tell.
    rank = launch.rank if launch.rank is not None else whole_number(env.get("SLURM_PROCID"))
    source = args.source
    try:
        bind = SlurmGpus.read(env).bind
        opts = _options(args, source, env)

        def transport():
            nonlocal rank
            from mpi_resolver.exchange.transport import MpiTransport, world

            comm, rank, _ = world()
            return MpiTransport(comm, opts.timeout)

        from mpi_resolver.exchange.transport import mpi_library

        res = resolve_job(opts, env, library=mpi_library, transport=transport, details=True,
                          warn=lambda warnings: _warn(warnings, rank))
    except MismatchError as e:
        if rank in (0, None):
            records = [r for r in e.records or () if isinstance(r, RankRecord)]
            print(_report_check(None, records, e, args.json, None))
        return _failed(1, together=True, start=False)
    except ResolutionError as e:
        return _error(e, rank, launch, source)
    if args.command == "exec":
        return _exec(args, res, rank, launch, source)
    return _report(args, res, opts, bind, launch)


def _without_resolution(args: argparse.Namespace) -> int:
    """Runs supervise (in the batch script, beside the step), report or status (the job's
    files): no resolution, no MPI; returns the exit status."""
    if args.command == "supervise":
        from mpi_resolver.cli.supervise import main as supervise

        return supervise(args.step, args.max_restarts, args.spare_nodes, args.warned_file)
    from mpi_resolver.cli.report import story_command

    return story_command(args)


def _report(args: argparse.Namespace, res: Resolution, opts: Options, bind: Optional[str],
            launch: Launch) -> int:
    """Runs check's --checkpoint-dir, --connect and --deep where asked, prints the command's
    report; returns the exit status (1 where a check failed: the checkpoint directory,
    connections, TensorFlow, a proxy)."""
    checkpoint = connect = deep = None
    if args.command == "check":
        try:
            if args.checkpoint_dir is not None:
                checkpoint = run_checkpoint(args.checkpoint_dir, res.layout, res.rank,
                                            args.timeout)
            if args.connect:
                connect = run_connect(res.layout, res.rank, args.timeout)
                deep = run_deep_check(args, res, opts, connect)
        except ResolutionError as e:
            status = _error(e, res.rank, launch, args.source, own=True)
            if isinstance(e, ExchangeTimeout):  # a rank is missing: no MPI_Finalize
                return end_lost(status)
            return status
    _print_result(args, res, bind, (checkpoint, connect, deep))
    status = _status(checkpoint=checkpoint, connect=connect, deep=deep)
    if status == 0 and args.command == "check" and res.proxy:
        return _failed(1, together=res.records is not None, start=False)
    return status




def _status(*, checkpoint: Optional[CheckpointReport] = None,
            connect: Optional[ConnectReport] = None, deep: Optional[DeepReport] = None) -> int:
    """Returns the exit status after check's rehearsals (0 where none failed, or none ran),
    once every rank is there where all the failed ones were gathered; after a failed --deep,
    ends the process instead (cli/deep.end_after_deep: no rank waits for a stuck thread or
    a lost rank)."""
    failed = [r for r in (checkpoint, connect, deep) if r is not None and not r.ok]
    if not failed:
        return 0
    return end_after_deep(deep, _failed(1, together=all(r.gathered for r in failed),
                                        start=False))


def _exec(args: argparse.Namespace, res: Resolution, rank: Optional[int], launch: Launch,
          source: str) -> int:
    """Runs the program as this rank; returns (status 2) only where it cannot be run."""
    from mpi_resolver.exchange.transport import mpi_initialized

    _warn(res.notes, rank, "note")
    if mpi_initialized():
        _warn([MPI_USED], rank)
    try:
        run_program(args.program, program_env(os.environ, res, args.auto_set_gpu))
    except ResolutionError as e:
        return _error(e, rank, launch, source, own=True)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
