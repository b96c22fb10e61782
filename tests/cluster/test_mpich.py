"""MPICH, launched for real: Hydra's mpiexec over the two emulated nodes, srun --mpi=pmi2,
mpiexec inside salloc, and the pairings of srun plugin and MPI that do not work.

MPICH lives in its own virtualenv (``.venv-mpich``: PyPI's ``mpich`` wheel and an mpi4py that
loads it, made by ``scripts/setup_mpis.sh``); it has no TensorFlow, so every rank runs
tests/cluster/mpi_probe.py (the resolver's own calls without TensorFlow) or the command line.
A missing MPICH virtualenv fails these tests (it does not skip them).

What the ranks see, per launch mode (measured with MPICH 5.0.2, Slurm 22.05, and asserted
below):

- ``mpiexec`` (Hydra, hostfile, no Slurm): PMI_RANK, PMI_SIZE, PMI_FD, PMI_HOSTNAME,
  MPI_LOCALRANKID, MPI_LOCALNRANKS; no SLURM_* and no HYDRA_*.
- ``srun --mpi=pmi2``: PMI_RANK (= SLURM_PROCID), PMI_SIZE, PMI_FD, PMI_JOBID
  (<job>.<step>), SLURM_MPI_TYPE=pmi2; no MPI_LOCALRANKID, no PMIX_*.
- ``salloc -N2 mpiexec``: Hydra's PMI_* and MPI_LOCAL* as above, plus the SLURM_* of the
  srun step that started Hydra's proxies (one task per node: SLURM_PROCID is the proxy's,
  SLURM_STEP_NUM_TASKS=2); no SLURM_MPI_TYPE.
- ``srun --mpi=pmix``: PMIX_RANK, PMIX_NAMESPACE, PMIX_SERVER_URI*, ... and
  SLURM_MPI_TYPE=pmix: MPICH aborts in MPI_Init.
- ``srun --mpi=none``: SLURM_* only; MPICH's MPI_Init then starts a world of 1 in each task.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path
from typing import Dict, List, Tuple

import pytest

from tests.cluster.conftest import ROOT
from tests.cluster.test_scenarios import (BLOCK_3_1, SPEC_2_2, Run, assert_all_fail,
                                          assert_nothing_left, assert_smi_calls, assert_sound,
                                          assert_two_nodes_without_slurm, launch, short)
from tests.harness.slurm_cluster import SlurmCluster

pytestmark = pytest.mark.cluster

HERE = Path(__file__).resolve().parent
MPI_PROBE = str(HERE / "mpi_probe.py")
SETUP = "bash scripts/setup_mpis.sh"
TIMEOUT = 60  # seconds, for every launch (each takes 0.5-2 s)


def venv_dir(variable: str, default: str) -> Path:
    """Returns the virtualenv scripts/setup_mpis.sh makes (same variable, same default)."""
    path = Path(os.environ.get(variable, default))
    return path if path.is_absolute() else ROOT / path


MPICH_VENV = venv_dir("MPI_RESOLVER_MPICH_VENV", ".venv-mpich")
MPICH_PY = str(MPICH_VENV / "bin" / "python")
MPIEXEC = str(MPICH_VENV / "bin" / "mpiexec")
#: Debian's Open MPI virtualenv (scripts/setup.sh): the wrong-pairing test of Open MPI.
OPENMPI_PY = str(venv_dir("MPI_RESOLVER_VENV", ".venv") / "bin" / "python")

#: Reads which MPI mpi4py loads WITHOUT starting MPI, three ways, and times each (fresh
#: interpreter; each time includes the imports it needs). Prints one JSON object.
LIBRARY_SCRIPT = r"""
import ctypes, json, sys, time
out = {}
t = time.perf_counter()
import importlib.metadata as md
found = {}
for name in ("mpich", "impi-rt", "openmpi"):
    try:
        found[name] = md.version(name)
    except md.PackageNotFoundError:
        pass
out["metadata"] = [found, (time.perf_counter() - t) * 1e3]
t = time.perf_counter()
from mpi4py import _mpiabi
out["mpiabi"] = [_mpiabi._get_mpiabi(), (time.perf_counter() - t) * 1e3]
t = time.perf_counter()
lib = _mpiabi._dlopen_libmpi()
buf, n = ctypes.create_string_buffer(8192), ctypes.c_int()
assert lib.MPI_Get_library_version(buf, ctypes.byref(n)) == 0
out["library_version"] = [buf.value.decode().strip().splitlines()[0],
                          (time.perf_counter() - t) * 1e3]
out["intel"] = hasattr(lib, "I_MPI_Check_image_status")
out["mpi_imported"] = "mpi4py.MPI" in sys.modules  # so MPI was not started
print(json.dumps(out))
"""


def read_library(python: str) -> Dict[str, list]:
    """Returns LIBRARY_SCRIPT's answer in ``python``'s environment (no MPI started)."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("SLURM_", "PMI_", "PMIX_", "OMPI_", "MPI4PY_"))}
    p = subprocess.run([python, "-c", LIBRARY_SCRIPT], capture_output=True, text=True,
                       timeout=60, env=env, cwd=str(ROOT))
    assert p.returncode == 0, f"{python}: {p.stderr[-3000:]}"
    return json.loads(p.stdout)


def library_version(python: str) -> str:
    """Returns the first line of MPI_Get_library_version of ``python``'s mpi4py, through
    mpi4py's public API, without starting MPI (what scripts/setup_mpis.sh checks)."""
    script = ("import mpi4py\nmpi4py.rc.initialize = False\nfrom mpi4py import MPI\n"
              "print(MPI.Get_library_version().strip().splitlines()[0])")
    p = subprocess.run([python, "-c", script], capture_output=True, text=True, timeout=60,
                       cwd=str(ROOT))
    return p.stdout.strip() if p.returncode == 0 else f"an error: {p.stderr[-2000:]}"


def mpi_venv(name: str, python: str, mpiexec: str, venv: object, version: str) -> str:
    """Returns ``python`` where its virtualenv holds mpiexec and an mpi4py that loads the MPI
    whose version text starts with ``version``; fails (never skips) otherwise."""
    missing = [p for p in (python, mpiexec) if not os.access(p, os.X_OK)]
    if missing:
        pytest.fail(f"{name} is not installed: {', '.join(missing)} missing. Run `{SETUP}` "
                    "(the README's test command runs it).")
    got = library_version(python)
    if not got.startswith(version):
        pytest.fail(f"{venv}'s mpi4py loads {got!r}, not {name}. Run `{SETUP}`.")
    return python


@pytest.fixture(scope="module")
def mpich() -> str:
    """The MPICH virtualenv's python; fails (never skips) where it is missing or not MPICH."""
    return mpi_venv("MPICH", MPICH_PY, MPIEXEC, MPICH_VENV, "MPICH Version:")


def probe_argv(variants) -> List[str]:
    """Returns the argv that runs the TF-free probe in the MPICH virtualenv."""
    return [MPICH_PY, MPI_PROBE, json.dumps(variants)]


def cli_argv(*args: str) -> List[str]:
    return [MPICH_PY, "-m", "mpi_resolver", *args]


def hydra_hostfile(cluster: SlurmCluster, slots: int) -> str:
    """Writes a Hydra hostfile (``host:slots`` lines) of every node; returns its path."""
    path = os.path.join(cluster.workdir, f"hydra-hosts.{slots}")
    with open(path, "w") as f:
        f.writelines(f"{n}:{slots}\n" for n in cluster.node_names)
    return path


def mpiexec_hosts(cluster: SlurmCluster, n: int, slots: int = 2) -> List[str]:
    """Hydra's mpiexec over every node, no Slurm: proxies started through the harness's ssh
    stand-in; ``-localhost`` names the head on the nodes' bridge, which the proxies connect
    back to (without it they try the machine's own host name and fail: "unable to connect
    from node1 to vm")."""
    return [MPIEXEC, "-launcher", "ssh", "-launcher-exec", cluster.rsh_agent,
            "-f", hydra_hostfile(cluster, slots), "-localhost", cluster.head_name,
            "-n", str(n)]


def mpiexec_in_salloc(cluster: SlurmCluster, n: int) -> List[str]:
    """``salloc -N2 mpiexec -n N``: Hydra starts its proxies with srun (one per node)."""
    return ["salloc", "-N2", MPIEXEC, "-localhost", cluster.head_name, "-n", str(n)]


def assert_launch_env(lines, run: Run, *, present: Dict[str, object], absent=()) -> None:
    """Asserts each rank's launcher variables: ``present`` maps a name to its value, to a
    function of the rank's line giving it, or to ``...`` (set, any value); names in
    ``absent`` (prefixes) are unset."""
    for line in lines:
        seen = line["launch_env"]
        for name, want in present.items():
            if want is ...:
                assert name in seen, f"rank {line['rank']}: {name} unset{run.context()}"
                continue
            value = want(line) if callable(want) else want
            assert seen.get(name) == value, \
                f"rank {line['rank']}: {name}={seen.get(name)!r}, expected {value!r}" \
                f"{run.context()}"
        for name in absent:
            assert not any(k.startswith(name) for k in seen), \
                f"rank {line['rank']}: {name}* set: {seen}{run.context()}"


def mpich_world(lines, run: Run) -> None:
    """Asserts that every rank ran MPICH."""
    for line in lines:
        assert (line["mpi_library"] or "").startswith("MPICH Version:"), run.context()


def error_lines(run: Run) -> List[str]:
    return [x for x in run.stderr.splitlines() if x.startswith("mpi-resolver: error:")]


# ------------------------------------------------------------------------------ the library
def test_mpich_library_is_known_without_starting_mpi(mpich: str) -> None:
    """Which MPI mpi4py is linked to can be read before MPI_Init: mpi4py's ABI choice
    ('mpich' / 'openmpi') and MPI_Get_library_version (callable before MPI_Init) through the
    library mpi4py would load, and the installed wheels' metadata. MPI is never started."""
    for python, abi, version, wheel in (
            (mpich, "mpich", "MPICH Version:", {"mpich": "5.0.2"}),
            (OPENMPI_PY, "openmpi", "Open MPI v4.1", {})):
        got = read_library(python)
        print(python, json.dumps(got))  # the timings, with -s
        assert got["mpiabi"][0] == abi, got
        assert got["library_version"][0].startswith(version), got
        assert got["metadata"][0] == wheel, got
        assert got["intel"] is False and got["mpi_imported"] is False, got


# ------------------------------------------------------------------------------ 1: mpiexec
def test_mpich_mpiexec_two_nodes_without_slurm(cluster: SlurmCluster, mpich: str) -> None:
    """mpiexec -f (node1:2, node2:2) -n 4 through the ssh stand-in, no Slurm: source 'mpi',
    ranks 0,1 on node1 and 2,3 on node2 (where they really run), nvidia-smi once per node;
    ``show --json`` gives the same ClusterSpec."""
    cluster.reset_nvidia_smi_calls()
    run = launch(cluster, [*mpiexec_hosts(cluster, 4), *probe_argv([{}])], timeout=TIMEOUT)
    lines = assert_two_nodes_without_slurm(run)
    assert all(line["notes"] == [] for line in lines), run.context()
    mpich_world(lines, run)
    assert_launch_env(lines, run, present={
        "PMI_RANK": lambda line: str(line["rank"]), "PMI_SIZE": "4",
        "MPI_LOCALRANKID": lambda line: str(line["rank"] % 2), "MPI_LOCALNRANKS": "2",
        "PMI_HOSTNAME": lambda line: short(line["host"])},
        absent=("PMIX_", "SLURM_MPI_TYPE", "HYDRA_", "PMI_JOBID"))
    assert all(line["launch_env"]["PMI_FD"].isdigit() for line in lines), run.context()
    assert_smi_calls(cluster, run, {"node1": 1, "node2": 1})

    show = launch(cluster, [*mpiexec_hosts(cluster, 4), *cli_argv("show", "--json")],
                  timeout=TIMEOUT, parse=False)
    assert show.returncode == 0, show.context()
    report = json.loads(show.stdout)  # printed once, by rank 0: one JSON document
    assert report["source"] == "mpi" and report["verified"] is False, show.context()
    assert report["cluster"] == SPEC_2_2, show.context()
    assert [(r["rank"], r["host"], r["address"]) for r in report["ranks"]] == [
        (line["rank"], short(line["host"]), line["address"]) for line in lines], show.context()


# ------------------------------------------------------------------------------ 2: srun pmi2
#: MPICH's OFI netmod over TCP for every srun --mpi=pmi2 launch of two nodes. Why (measured,
#: see srun_pmi.py and the README's launcher section): under srun --mpi=pmi2 MPICH speaks
#: PMI-1, whose requests Slurm 22.05 reads with one read() of at most 1,024 bytes; the default
#: UCX netmod puts 4,096-byte address cards between nodes in put lines of up to about 1,080
#: bytes whose length depends on the memory the card was copied from (696-1,073 bytes seen
#: here, changing with the program, its paths and its environment). A cut line is stored
#: nowhere and MPI_Init hangs or aborts ("mpi/pmi2: value not properly terminated in client
#: request"): that was this test failing in some clean clones and not in others. OFI puts the
#: real address, about 100-byte lines. The other cause of this test's failures was two
#: throw-away clusters sharing /dev/shm (MPICH names its shared memory after the job.step id,
#: which both number from 1); the harness gives every node its own /dev/shm.
PMI2_ENV = {"MPIR_CVAR_CH4_NETMOD": "ofi", "FI_PROVIDER": "tcp"}


def test_mpich_srun_pmi2_cross_checked(cluster: SlurmCluster, mpich: str) -> None:
    """srun -N2 -n4 --mpi=pmi2 (MPICH's OFI netmod, PMI2_ENV): Slurm's variables,
    cross-checked by MPICH and agreeing (also with verify=True); ``check`` exits 0 and says
    so once, with no warning."""
    run = launch(cluster, ["srun", "-N2", "-n4", "--mpi=pmi2",
                           *probe_argv([{}, {"verify": True}])], timeout=TIMEOUT, env=PMI2_ENV)
    assert run.returncode == 0, run.context()
    for variant in (0, 1):
        lines = run.variant(variant)
        spec = assert_sound(lines, n=4, run=run, placement=BLOCK_3_1, source="slurm",
                            verified=True, mpi=True, cvd={0: "0", 1: "1", 2: "2", 3: "0"})
        assert spec == {"worker": ["node1:8888", "node1:8889", "node1:8890", "node2:8888"]}
        mpich_world(lines, run)
    lines = run.variant(0)
    assert_launch_env(lines, run, present={
        "PMI_RANK": lambda line: line["slurm"]["SLURM_PROCID"], "PMI_SIZE": "4",
        "SLURM_MPI_TYPE": "pmi2"},
        absent=("PMIX_", "MPI_LOCALRANKID", "MPI_LOCALNRANKS", "PMI_HOSTNAME", "HYDRA_"))
    jobids = {line["launch_env"].get("PMI_JOBID") for line in lines}  # <job>.<step>
    assert len(jobids) == 1 and re.fullmatch(r"\d+\.0", str(min(jobids))), run.context()

    check = launch(cluster, ["srun", "-N2", "-n4", "--mpi=pmi2", *cli_argv("check")],
                   timeout=TIMEOUT, env=PMI2_ENV)
    assert check.returncode == 0, check.context()
    assert check.stdout.count("OK: Slurm and MPI agree on all 4 ranks") == 1, check.context()
    assert "MISMATCH" not in check.stdout, check.context()
    assert "warning" not in check.stderr, check.context()


def test_mpich_ucx_under_srun_pmi2_is_warned_before_mpi_init(cluster: SlurmCluster,
                                                            mpich: str) -> None:
    """MPICH's default UCX netmod under srun -N2 --mpi=pmi2: ``check`` warns once (rank 0),
    before MPI starts, naming Slurm's 1,024-byte limit and MPIR_CVAR_CH4_NETMOD=ofi. Here
    MPI_Init is made to fail at once (UCX_TLS names no transport, so no card is ever put),
    which shows the warning is out first; the line limit itself is test_harness's test."""
    run = launch(cluster, ["srun", "-l", "-N2", "-n4", "--mpi=pmi2", *cli_argv("check")],
                 timeout=TIMEOUT, env={"UCX_TLS": "no-such-transport"}, parse=False)
    assert run.returncode != 0, run.context()
    warning = "0: mpi-resolver: warning: MPICH Version: 5.0.2 with its UCX netmod under srun " \
              "--mpi=pmi2 on 2 nodes can hang in MPI_Init"
    assert run.stderr.count("mpi-resolver: warning:") == 1, run.context()  # rank 0's only
    assert run.stderr.count(warning) == 1, run.context()
    assert "MPIR_CVAR_CH4_NETMOD=ofi" in run.stderr and "1,024" in run.stderr
    rank0 = [line for line in run.stderr.splitlines() if line.startswith("0: ")]
    assert rank0[0].startswith(warning), run.context()  # before MPI_Init's abort
    assert any("MPI_Init" in line for line in rank0[1:]), run.context()


RENUMBER = ('SLURM_PROCID=$(( (SLURM_PROCID + 1) % SLURM_STEP_NUM_TASKS )) '
            'exec "$0" "$@"')


def test_mpich_srun_pmi2_renumbered_procid_mismatch_on_every_rank(
        cluster: SlurmCluster, mpich: str) -> None:
    """srun --mpi=pmi2 (OFI, PMI2_ENV) through a ``sh -c`` wrapper that renumbers
    SLURM_PROCID (k -> k+1 mod 4): every rank raises MismatchError with the per-rank table;
    ``check`` exits 1 and prints the table once, one 'rank' row per rank."""
    wrap = ["sh", "-c", RENUMBER]
    run = launch(cluster, ["srun", "-N2", "-n4", "--mpi=pmi2", *wrap, *probe_argv([{}])],
                 timeout=TIMEOUT, env=PMI2_ENV)
    assert run.returncode == 3, run.context()
    assert_all_fail(run.variant(0), n=4, run=run, error_type="MismatchError",
                    says=("Slurm and MPI disagree", "SLURM_PROCID=1  rank 0",
                          "SLURM_PROCID=0  rank 3", "MPI numbers the ranks differently",
                          "`srun --mpi=pmi2`"))
    for line in run.variant(0):
        assert line["slurm"]["SLURM_PROCID"] == str((line["rank"] + 1) % 4), run.context()
        assert line["mpi_size"] == 4 and line["mpi_rank"] == line["rank"], run.context()

    check = launch(cluster, ["srun", "-N2", "-n4", "--mpi=pmi2", *wrap, *cli_argv("check")],
                   timeout=TIMEOUT, env=PMI2_ENV)
    assert check.returncode == 1, check.context()
    out = check.stdout
    assert out.count("MISMATCH: Slurm and MPI disagree about this job (4 differences)") == 1, \
        check.context()
    table = out.split("MISMATCH:", 1)[1]
    for rank in range(4):
        assert re.search(rf"^{rank}\s+rank\s+SLURM_PROCID={(rank + 1) % 4}\s+rank {rank}$",
                         table, re.M), check.context()
    assert "OK:" not in out, check.context()


# ------------------------------------------------------------------------------ 3: salloc
def test_mpich_mpiexec_inside_salloc_uses_mpi(cluster: SlurmCluster, mpich: str) -> None:
    """salloc -N2 mpiexec -n 4: Hydra starts its proxies with srun, so every rank inherits
    its proxy's SLURM_PROCID and SLURM_STEP_NUM_TASKS=2. source='auto' uses MPI (a note says
    so) with a placement-true ClusterSpec (placement read from the ranks: Hydra deals them
    round-robin here); verify=True fails on every rank; ``show`` says source mpi and ``check``
    exits 1 naming mpiexec inside the allocation, and `srun --mpi=pmi2`, not pmix."""
    run = launch(cluster, [*mpiexec_in_salloc(cluster, 4), *probe_argv([{}, {"verify": True}])],
                 timeout=TIMEOUT)
    assert run.returncode == 3, run.context()
    lines = run.variant(0)
    assert {line["slurm"]["SLURM_STEP_NUM_TASKS"] for line in lines} == {"2"}, run.context()
    placement = {line["rank"]: short(line["host"]) for line in lines}
    spec = assert_sound(lines, n=4, run=run, placement=placement, source="mpi",
                        verified=False, mpi=True)
    assert set(placement.values()) == {"node1", "node2"}, run.context()
    for line in lines:  # the proxy's task id, not the rank's
        assert line["slurm"]["SLURM_PROCID"] == str(
            cluster.node_names.index(placement[line["rank"]])), run.context()
        assert any("mpiexec" in note and "(hydra)" in note and "using MPI" in note
                   for note in line["notes"]), run.context()
    mpich_world(lines, run)
    assert_launch_env(lines, run, present={
        "PMI_RANK": lambda line: str(line["rank"]), "PMI_SIZE": "4", "MPI_LOCALNRANKS": "2",
        "PMI_HOSTNAME": lambda line: short(line["host"])},
        absent=("PMIX_", "SLURM_MPI_TYPE", "PMI_JOBID"))
    assert_all_fail(run.variant(1), n=4, run=run, error_type="MismatchError",
                    says=("mpirun/mpiexec", "inside a Slurm allocation", "SLURM_PROCID",
                          "`srun --mpi=pmi2`"))

    show = launch(cluster, [*mpiexec_in_salloc(cluster, 4), *cli_argv("show", "--json")],
                  timeout=TIMEOUT, parse=False)
    assert show.returncode == 0, show.context()
    report = json.loads(show.stdout)
    assert report["source"] == "mpi" and report["verified"] is False, show.context()
    assert report["cluster"] == spec, show.context()  # the same placement, again
    assert [r["host"] for r in report["ranks"]] == [placement[r] for r in range(4)]

    check = launch(cluster, [*mpiexec_in_salloc(cluster, 4), *cli_argv("check")],
                   timeout=TIMEOUT)
    assert check.returncode == 1, check.context()
    out = check.stdout
    assert out.count("MISMATCH: Slurm and MPI disagree") == 1, check.context()
    assert "inside a Slurm allocation" in out and "`srun --mpi=pmi2`" in out, check.context()
    assert "`srun --mpi=pmix`" not in out, check.context()
    assert re.search(r"^3\s+size\s+2 tasks\s+4 processes$", out, re.M), check.context()


# ------------------------------------------------------------------------------ 4: wrong pairs
PMIX_ABORT = "Runtime environment uses unsupported PMI version PMIx. Aborting."
INIT = "from mpi4py import MPI; print(MPI.COMM_WORLD.Get_rank(), MPI.COMM_WORLD.Get_size())"


def srun_each_task(cluster: SlurmCluster, plugin: str, argv: List[str], name: str
                   ) -> Tuple[Run, Dict[int, str], Dict[int, str]]:
    """Runs ``srun -N2 -n4 --mpi=PLUGIN argv`` with each task's stdout and stderr in files of
    their own (``srun -o/-e FILE-%t``: four tasks writing at once can split each other's
    lines); returns the run, {task: its stdout} and {task: its stderr}."""
    out = os.path.join(cluster.workdir, f"{name}-%t.out")
    err = os.path.join(cluster.workdir, f"{name}-%t.err")
    run = launch(cluster, ["srun", "-N2", "-n4", f"--mpi={plugin}", "-o", out, "-e", err,
                           *argv], timeout=TIMEOUT, parse=False)
    texts: Tuple[Dict[int, str], Dict[int, str]] = ({}, {})
    for pattern, text in zip((out, err), texts, strict=False):
        for task in range(4):
            with open(pattern.replace("%t", str(task))) as f:
                text[task] = f.read()
    return run, texts[0], texts[1]


def exit_codes(run: Run) -> Dict[int, int]:
    """Returns {task: exit code} from srun's 'task(s) 0,2-3: Exited with exit code N' lines."""
    codes = {}
    for tasks, code in re.findall(r"tasks? ([\d,-]+): Exited with exit code (\d+)",
                                  run.stderr):
        for part in tasks.split(","):
            first, _, last = part.partition("-")
            for task in range(int(first), int(last or first) + 1):
                codes[task] = int(code)
    return codes


def test_wrong_pairing_mpich_under_srun_pmix_aborts_in_mpi_init(
        cluster: SlurmCluster, mpich: str) -> None:
    """MPICH under srun --mpi=pmix: every task aborts in MPI_Init (exit code 16) with
    MPICH's 'unsupported PMI version PMIx' (recorded for the README's wrong pairings)."""
    run, outs, errs = srun_each_task(cluster, "pmix", [MPICH_PY, "-c", INIT], "mpich-pmix")
    where = f"{run.context()}\n--- each task's stderr\n{json.dumps(errs, indent=1)}"
    assert run.returncode != 0, where
    assert exit_codes(run) == {0: 16, 1: 16, 2: 16, 3: 16}, where
    for err in errs.values():
        assert PMIX_ABORT in err, where
        assert "MPI_Init_thread(argc=(nil), argv=(nil), required=3" in err, where
    assert outs == {0: "", 1: "", 2: "", 3: ""}, where


def test_wrong_pairing_debian_openmpi_under_srun_pmi2_aborts_in_mpi_init(
        cluster: SlurmCluster) -> None:
    """Debian's Open MPI (the .venv mpi4py) under srun --mpi=pmi2: every task aborts in
    MPI_Init ('OMPI was not built with SLURM's PMI support'), exit code 1."""
    run, outs, errs = srun_each_task(cluster, "pmi2", [OPENMPI_PY, "-c", INIT],
                                     "openmpi-pmi2")
    where = f"{run.context()}\n--- each task's stderr\n{json.dumps(errs, indent=1)}"
    assert run.returncode == 1, where
    assert exit_codes(run) == {0: 1, 1: 1, 2: 1, 3: 1}, where
    for err in errs.values():
        assert "but OMPI was not built with SLURM's PMI support and therefore cannot" in err, \
            where
        assert "*** An error occurred in MPI_Init_thread" in err, where
    assert outs == {0: "", 1: "", 2: "", 3: ""}, where


def test_mpich_under_srun_mpi_none_is_four_worlds_of_one(cluster: SlurmCluster,
                                                         mpich: str) -> None:
    """MPICH under srun --mpi=none: MPI_Init succeeds silently with a world of 1 in every
    task (why the package never starts MPI in a Slurm task without PMI variables)."""
    run, outs, errs = srun_each_task(cluster, "none", [MPICH_PY, "-c", INIT], "mpich-none")
    where = f"{run.context()}\n--- each task's output\n{json.dumps([outs, errs], indent=1)}"
    assert run.returncode == 0 and exit_codes(run) == {}, where
    assert outs == {task: "0 1\n" for task in range(4)}, where
    assert errs == {task: "" for task in range(4)}, where


# ------------------------------------------------------------------------------ advice
def test_cli_mpich_srun_pmix_names_pmi2_before_mpi_init(cluster: SlurmCluster,
                                                         mpich: str) -> None:
    """mpi-resolver check with MPICH under srun --mpi=pmix: one error that names
    `srun --mpi=pmi2` (exit 2), instead of MPICH's abort in MPI_Init."""
    run = launch(cluster, ["srun", "-N2", "-n4", "--mpi=pmix", *cli_argv("check")],
                 timeout=TIMEOUT, parse=False)
    # needs lead: pmi2 advice (resolution.plan: PMIX_RANK set and mpi4py loads MPICH)
    assert PMIX_ABORT not in run.stderr, run.context()
    assert run.returncode == 2, run.context()
    errors = error_lines(run)
    assert len(errors) == 1 and "`srun --mpi=pmi2`" in errors[0], run.context()
    assert "`srun --mpi=pmix`" not in errors[0] and "MPICH" in errors[0], run.context()


def test_cli_mpich_srun_mpi_none_names_pmi2_only(cluster: SlurmCluster, mpich: str) -> None:
    """mpi-resolver check with MPICH under srun --mpi=none: exit 2, one error; it names
    `srun --mpi=pmi2`, the plugin MPICH speaks, and not --mpi=pmix."""
    run = launch(cluster, ["srun", "-N2", "-n4", "--mpi=none", *cli_argv("check")],
                 timeout=TIMEOUT, parse=False)
    assert run.returncode == 2, run.context()
    errors = error_lines(run)
    assert len(errors) == 1 and "verify=True needs MPI" in errors[0], run.context()
    assert "`srun --mpi=pmi2`" in errors[0], run.context()
    # needs lead: pmi2 advice (srun_advice(None) names pmix first whatever MPI is installed)
    assert "`srun --mpi=pmix`" not in errors[0], run.context()


def test_cli_openmpi_srun_pmi2_names_pmix_before_mpi_init(cluster: SlurmCluster) -> None:
    """mpi-resolver check with Debian's Open MPI under srun --mpi=pmi2: one error that names
    `srun --mpi=pmix` (exit 2), instead of Open MPI's abort in MPI_Init."""
    run = launch(cluster, ["srun", "-N2", "-n4", "--mpi=pmi2", OPENMPI_PY, "-m",
                           "mpi_resolver", "check"], timeout=TIMEOUT, parse=False)
    # needs lead: pmi2 advice (the reverse: PMI_RANK without MPI_LOCALRANKID and mpi4py loads
    # Open MPI, which Debian builds without Slurm's PMI-2)
    assert "OMPI was not built with SLURM's PMI support" not in run.stderr, run.context()
    assert run.returncode == 2, run.context()
    errors = error_lines(run)
    assert len(errors) == 1 and "`srun --mpi=pmix`" in errors[0], run.context()
    assert "`srun --mpi=pmi2`" not in errors[0], run.context()


def test_zz_nothing_left_running(cluster: SlurmCluster) -> None:
    """After every launch: no probe, proxy, mpiexec or job of this cluster still runs."""
    assert_nothing_left(cluster)
