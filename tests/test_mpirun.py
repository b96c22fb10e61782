"""Real `mpirun` runs of the MPI tests and of the command line (no Slurm)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import own_network

pytestmark = pytest.mark.mpirun
ROOT = Path(__file__).resolve().parent.parent


def mpirun_env():
    env = dict(os.environ)
    env.update({"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
                "OMPI_MCA_rmaps_base_oversubscribe": "1",
                "OMPI_MCA_hwloc_base_binding_policy": "none",
                "PYTHONPATH": str(ROOT) + os.pathsep + env.get("PYTHONPATH", ""),
                "TF_CPP_MIN_LOG_LEVEL": "3", "TF_NUM_INTRAOP_THREADS": "1",
                "TF_NUM_INTEROP_THREADS": "1", "OMP_NUM_THREADS": "1"})
    for key in [k for k in env if k.startswith(("SLURM_", "SLURMD_", "PMI_", "PMIX_"))]:
        del env[key]
    return env


def mpirun(n, args, timeout=300, extra=()):
    return subprocess.run(own_network(["mpirun", "-n", str(n), *extra, *args]),
                          capture_output=True, text=True, timeout=timeout, env=mpirun_env(),
                          cwd=ROOT)


def test_mpi_parity_and_cross_check_under_mpirun_4():
    """tests/mpi/mpi_parity.py on 4 real MPI ranks: every rank's pytest passes."""
    proc = mpirun(4, [sys.executable, "-m", "pytest", "--with-mpi", "--color=no", "-q",
                      "-p", "no:cacheprovider", "tests/mpi/mpi_parity.py"], timeout=600)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-6000:]
    summaries = re.findall(r"(\d+) passed", out)
    assert len(summaries) == 4 and len(set(summaries)) == 1, out[-3000:]
    assert int(summaries[0]) >= 14
    assert "failed" not in out


def cli(n, *args, extra_env=None):
    env = mpirun_env()
    env.update(extra_env or {})
    return subprocess.run(own_network(["mpirun", "-n", str(n), sys.executable, "-m",
                                       "mpi_resolver", *args]),
                          capture_output=True, text=True, timeout=120, env=env, cwd=ROOT)


def test_cli_show_prints_once_with_every_rank():
    proc = cli(4, "show", "--jobs", "chief=1,worker=3", "--gpus-per-node", "4")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.count("ClusterSpec:") == 1
    rows = [ln.split() for ln in proc.stdout.splitlines() if ln[:1].isdigit()]
    assert [r[0] for r in rows] == ["0", "1", "2", "3"]
    assert [(r[2], r[3]) for r in rows] == [("chief", "0"), ("worker", "0"), ("worker", "1"),
                                           ("worker", "2")]
    assert [r[5] for r in rows] == ["0", "1", "2", "3"]  # one GPU each, no overlap


def test_cli_show_json_and_tf_config_agree():
    shown = cli(2, "show", "--json", "--gpus-per-node", "0", "--port-base", "2222")
    assert shown.returncode == 0, shown.stderr
    data = json.loads(shown.stdout)
    assert data["source"] == "mpi" and len(data["ranks"]) == 2
    configs = cli(2, "tf-config", "--gpus-per-node", "0", "--port-base", "2222")
    lines = [json.loads(ln) for ln in configs.stdout.splitlines()]
    assert sorted(c["task"]["index"] for c in lines) == [0, 1]
    assert all(c["cluster"] == data["cluster"] for c in lines)
    export = cli(1, "tf-config", "--export", "--gpus-per-node", "0")
    assert export.stdout.startswith("export TF_CONFIG='{")


# One write per line (os.write): mpirun forwards each write as it comes, and a print's parts
# (its arguments, its newline) can interleave with another rank's (measured: "01 {...}").
ENV_PROGRAM = ("import os; os.write(1, (os.environ.get('CUDA_VISIBLE_DEVICES') + ' ' + "
               "os.environ['TF_CONFIG'] + '\\n').encode())")


def test_cli_exec_runs_the_program_with_tf_config_and_gpus_and_says_mpi_was_used():
    """mpirun without Slurm: exec resolves over MPI, ends MPI, then runs the program as the
    rank, TF_CONFIG and CUDA_VISIBLE_DEVICES set; rank 0 says, once, that the program must
    not start MPI again."""
    proc = cli(2, "exec", "--gpus-per-node", "2", "--", sys.executable, "-c", ENV_PROGRAM)
    assert proc.returncode == 0, proc.stderr
    seen = sorted((json.loads(config)["task"]["index"], gpus) for gpus, config in
                  (line.split(" ", 1) for line in proc.stdout.splitlines()))
    assert seen == [(0, "0"), (1, "1")], proc.stdout
    assert proc.stderr.count("mpi-resolver: warning: the resolution used MPI") == 1


def test_cli_exec_program_that_starts_mpi_again_fails_as_the_warning_says():
    """Measured with Open MPI 4.1.4: after the resolution's MPI_Init (finalized before exec),
    the program's own MPI_Init fails ("orte_init failed"); mpirun exits non-zero."""
    program = "from mpi4py import MPI; MPI.COMM_WORLD.Barrier()"
    proc = cli(2, "exec", "--gpus-per-node", "0", "--", sys.executable, "-c", program)
    assert proc.returncode != 0, proc.stdout + proc.stderr
    assert "the program must not use MPI itself" in " ".join(proc.stderr.split())
    assert "orte_init" in proc.stderr or "MPI_INIT" in proc.stderr, proc.stderr[-3000:]


def test_cli_check_without_slurm_fails_once_with_a_clear_message():
    proc = cli(4, "check", "--gpus-per-node", "0")
    assert proc.returncode != 0
    errors = [ln for ln in proc.stderr.splitlines() if ln.startswith("mpi-resolver: error:")]
    assert len(errors) == 1 and "no Slurm step" in errors[0], proc.stderr


def test_cli_check_connect_without_slurm_rehearses_the_connections():
    """No Slurm step to cross-check (plain check fails above), but --connect still rehearses
    TensorFlow's connections: every rank listens on its address, each dials the next."""
    proc = cli(3, "check", "--connect", "--timeout", "10", "--gpus-per-node", "0")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Not cross-checked: MPI alone (no Slurm step)." in proc.stdout
    assert "CONNECT OK: the job's 3 connection(s) among 3 rank(s), a ring of the ranks of the " \
        "one node" in proc.stdout, proc.stdout


def test_cli_check_checkpoint_dir_without_slurm_checks_the_directory(tmp_path):
    """mpirun on one machine: nothing to cross-check, but every rank writes, the ranks gather
    over MPI, and rank 0 says that one node cannot tell whether others see the directory."""
    proc = cli(3, "check", "--checkpoint-dir", str(tmp_path), "--timeout", "10",
               "--gpus-per-node", "0")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.count("CHECKPOINT DIR OK: ") == 1, proc.stdout
    assert f"CHECKPOINT DIR OK: {tmp_path} written and read back on " in proc.stdout
    assert ", the job's one node; free space: " in proc.stdout
    assert "note: the job has one node: whether other nodes" in proc.stdout
    assert list(tmp_path.iterdir()) == []


def test_cli_error_from_a_slow_rank_0_still_comes_out():
    """Every rank fails before MPI starts (no Slurm step for `check`), rank 0 last: the others
    wait for it (starting MPI for the bounded barrier) instead of exiting at once, which would
    make mpirun end rank 0 before its one message is out."""
    script = ("import os, sys, time\n"
              "if os.environ['OMPI_COMM_WORLD_RANK'] == '0': time.sleep(3)\n"
              "from mpi_resolver.cli.main import main\n"
              "sys.exit(main(['check', '--gpus-per-node', '0']))\n")
    proc = subprocess.run(own_network(["mpirun", "-n", "3", sys.executable, "-c", script]),
                          capture_output=True, text=True, timeout=120, env=mpirun_env(),
                          cwd=ROOT)
    assert proc.returncode != 0
    errors = [ln for ln in proc.stderr.splitlines() if ln.startswith("mpi-resolver: error:")]
    assert len(errors) == 1 and "no Slurm step" in errors[0], proc.stderr


def test_cli_does_not_import_tensorflow(tmp_path):
    fake = tmp_path / "tensorflow"
    fake.mkdir()
    (fake / "__init__.py").write_text("raise ImportError('the CLI must not import TensorFlow')")
    proc = cli(2, "show", "--gpus-per-node", "0",
               extra_env={"PYTHONPATH": f"{tmp_path}{os.pathsep}{ROOT}"})
    assert proc.returncode == 0, proc.stderr


def test_rank_that_never_arrives_is_named_within_the_timeout(tmp_path):
    """Rank 2 stays away until ranks 0 and 1 have given up (it waits for their files, up to
    100 s): with --timeout 2 they raise ResolutionError naming rank 2. Had they waited for
    rank 2 instead of their timeout, neither would have returned (rank 2, arriving later,
    finds nobody left and reports that itself)."""
    script = ("import os, sys, time\nfrom mpi4py import MPI\n"
              "rank = MPI.COMM_WORLD.rank\n"
              "done = [os.path.join(os.environ['OUT_DIR'], f'gave-up.{r}') for r in (0, 1)]\n"
              "end = time.monotonic() + 100\n"
              "while rank == 2 and not all(map(os.path.exists, done)) "
              "and time.monotonic() < end:\n"
              "    time.sleep(0.1)\n"
              "from mpi_resolver.cli.main import main\n"
              "start = time.monotonic()\n"
              "rc = main(['show', '--timeout', '2', '--gpus-per-node', '0'])\n"
              "sys.stdout.write(f'rank {rank} rc {rc} after {time.monotonic() - start:.1f}\\n')\n"
              "sys.stdout.flush()\n"
              "if rank < 2: open(done[rank], 'w').close()\n")
    proc = subprocess.run(own_network(["mpirun", "-n", "3", "-x", "OUT_DIR", sys.executable,
                                       "-c", script]),
                          capture_output=True, text=True, timeout=240,
                          env=dict(mpirun_env(), OUT_DIR=str(tmp_path)), cwd=ROOT)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["gave-up.0", "gave-up.1"], \
        proc.stdout + proc.stderr  # both returned while rank 2 still stayed away
    # mpirun's forwarding can put two ranks' lines on one: split on the prefix, not on lines
    errors = ["mpi-resolver: error:" + part.split("\n", 1)[0]
              for part in proc.stderr.split("mpi-resolver: error:")[1:]]
    early = [e for e in errors if not e.startswith("mpi-resolver: error: rank 2:")]
    assert len(early) == 2, proc.stderr
    assert all("rank(s) 2 did not reach it" in e and "within 2 s" in e for e in early)
    for rank in (0, 1):
        line = next(ln for ln in proc.stdout.splitlines() if ln.startswith(f"rank {rank} "))
        assert " rc 2 " in line, proc.stdout


def test_rank_that_dies_before_the_resolver_ends_the_job_instead_of_hanging():
    """Rank 2 exits (status 3) before reaching the resolver: Open MPI's mpirun ends the whole
    job at once with that status and names the rank (measured: every time, in about 2 s; the
    others' 600 s timeout never comes into play)."""
    script = ("import os, sys\nfrom mpi4py import MPI\n"
              "if MPI.COMM_WORLD.rank == 2: os._exit(3)\n"
              "from mpi_resolver.cli.main import main\n"
              "sys.exit(main(['show', '--timeout', '600', '--gpus-per-node', '0']))\n")
    proc = subprocess.run(own_network(["mpirun", "-n", "3", sys.executable, "-c", script]),
                          capture_output=True, text=True, timeout=120, env=mpirun_env(),
                          cwd=ROOT)
    assert proc.returncode == 3, proc.stdout + proc.stderr
    err = " ".join(proc.stderr.split())
    assert "mpirun detected that one or more processes exited with non-zero status" in err
    assert re.search(r"Process name: \[\[\d+,1\],2\] Exit code: 3", err), proc.stderr


DIVERGENT = """
import json, os, socket, sys, time
from mpi4py import MPI
from mpi_resolver.exchange.transport import MpiTransport
from mpi_resolver.options import make_options
from mpi_resolver.resolve.plan import make_plan
from mpi_resolver.resolve.resolution import resolve_job
comm = MPI.COMM_WORLD
rank = comm.Get_rank()
env = dict(os.environ)
if rank == 3:  # this rank alone sees a Slurm step wired by PMIx: it would cross-check
    env.pop("OMPI_COMM_WORLD_RANK")
    env.update(SLURM_PROCID="3", SLURM_STEP_NUM_TASKS="4", PMIX_RANK="3",
               SLURM_STEP_NODELIST=socket.gethostname(), SLURM_STEP_TASKS_PER_NODE="4")
opts = make_options(timeout=600, gpus_per_node=0)
plan = make_plan(opts, env)  # what this rank's resolution plans: reported below
start = time.monotonic()
try:
    resolve_job(opts, env, transport=lambda: MpiTransport(comm, 600.0))
    out = "resolved"
except Exception as e:
    out = f"{type(e).__name__}: {e}"
with open(os.path.join(os.environ["OUT_DIR"], f"rank{rank}.json"), "w") as f:  # not stdout:
    json.dump({"rank": rank, "uses": plan.uses, "out": out,   # mpirun may glue lines
               "after": time.monotonic() - start}, f)
"""


def test_ranks_whose_plans_differ_all_fail_at_once_instead_of_waiting(tmp_path):
    """mpirun -n 4 where rank 3 alone sees a Slurm step (it would cross-check; the others
    resolve from MPI): every rank raises MismatchError naming rank 3's plan, and none goes on
    as if all were well. The exchange's timeout is 600 s, beyond this test's 120 s: that
    every rank reported at all shows that none waited for it."""
    proc = subprocess.run(own_network(["mpirun", "-n", "4", "-x", "OUT_DIR", sys.executable,
                                       "-c", DIVERGENT]), capture_output=True, text=True,
                          timeout=120, env=dict(mpirun_env(), OUT_DIR=str(tmp_path)), cwd=ROOT)
    lines = [json.loads(p.read_text()) for p in sorted(tmp_path.glob("rank*.json"))]
    assert [line["rank"] for line in lines] == [0, 1, 2, 3], proc.stdout + proc.stderr
    assert [line["uses"] for line in lines] == ["mpi", "mpi", "mpi", "slurm+check"]
    for line in lines:
        assert line["out"].startswith("MismatchError: "), line
        assert "3     plan" in line["out"] and "this rank from slurm+check" in line["out"]


def test_keras_fit_under_multi_worker_mirrored_strategy_as_the_readme_says():
    """README.md: Keras 3's model.fit fails under MultiWorkerMirroredStrategy
    (keras-team/keras#20585), so train.py uses a custom loop, or tf_keras with --fit; with
    TensorFlow 2.15, tf.keras is Keras 2 and fit works. Two workers of tests/mpi/keras_fit.py
    under this Python's TensorFlow (this file also runs under the oldest versions): Keras 3,
    both raise "ValueError: Attempt to convert a value (PerReplica..."; Keras 2, fit finishes.
    If Keras 3's fit finishes, Keras fixed it: update the README and train.py."""
    proc = subprocess.run(["timeout", "-k", "5", "240", "mpirun", "-n", "2", sys.executable,
                           str(ROOT / "tests" / "mpi" / "keras_fit.py")],
                          capture_output=True, text=True, timeout=270, env=mpirun_env(),
                          cwd=ROOT)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 124, out[-4000:]  # did not hang
    major = re.findall(r"keras (\d+)\.\d+\.\d+, worker \d", proc.stdout)
    assert len(major) == 2 and len(set(major)) == 1, out[-4000:]
    if major[0] == "3":
        assert proc.returncode != 0 and "fit finished" not in proc.stdout, out[-4000:]
        assert "ValueError: Attempt to convert a value (PerReplica:{" in proc.stderr, \
            out[-4000:]
    else:
        assert major[0] == "2" and proc.returncode == 0, out[-4000:]
        assert proc.stdout.count("fit finished") == 2, out[-4000:]
