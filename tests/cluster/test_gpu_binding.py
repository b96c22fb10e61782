"""Slurm's own GPU binding, for real: GRES GPUs that Slurm allocates and binds to tasks.

``gres_cluster`` has node1 with 4 and node2 with 2 GPUs that Slurm itself hands out (gres.conf
on fake device files), so every srun GPU option below sets CUDA_VISIBLE_DEVICES,
SLURMD_TRES_BIND, SLURM_GPUS_ON_NODE ... exactly as on a GPU cluster. Each case is one launch:
every rank runs tests/cluster/probe.py (MPIClusterResolver twice in one process: source 'auto'
cross-checked by MPI, then source='slurm' alone), or ``python -m mpi_resolver show --json``.

The rule every case checks (``expected_gpus`` computes it from what Slurm gave, and each case
also spells out its literal answer, measured on Slurm 22.05):

- every rank of the job takes the same number of GPUs: the fewest any rank takes left to
  itself (an equal part, len(list) // ranks, of the list its node's ranks see; all of a list
  shorter than its ranks);
- on each node, ranks that see the same list divide it among themselves in rank order;
- ranks of a node that see different lists (Slurm bound GPUs to tasks) keep (the first of)
  their own;
- a list shorter than the ranks that see it is shared, spread over them where each takes
  fewer than all of it, with a one-line note saying "shared";
- a rank never gets a GPU outside what Slurm gave it, nor none where Slurm gave it some; where
  CUDA_VISIBLE_DEVICES is unset (--gpu-bind=none), 0..SLURM_GPUS_ON_NODE-1 is its list;
- num_accelerators() == {"GPU": entries of its CUDA_VISIBLE_DEVICES}; nvidia-smi is never
  run where Slurm's variables say (the fake one counts its calls).

The probe resolves as MPIClusterResolver does without importing TensorFlow (probe.py --no-tf;
6-7 s of CPU a rank saved); where TensorFlow's own resolver is compared (``tf_parity``), it is
replayed in this process from what each rank saw (tf_replay.py). The probe runs only where the
resolver's answer is new; the command line runs every case.
"""

from __future__ import annotations

import json
import os
import shlex
from collections import defaultdict
from dataclasses import dataclass
from typing import Any, Dict, List, Mapping, Optional, Tuple

import pytest

from tests.cluster.conftest import GRES_GPUS, PY, ROOT
from tests.cluster.tf_replay import tensorflow_view
from tests.cluster.test_scenarios import Run, launch, parse_lines, probe_argv, short
from tests.harness.batch import wait_for_job
from tests.harness.slurm_cluster import SlurmCluster

pytestmark = pytest.mark.cluster

SRUN = ("srun", "--mpi=pmix")
CLI = ("-m", "mpi_resolver", "show", "--json")
#: the probe's resolver arguments: source 'auto' (Slurm, cross-checked by MPI), then Slurm alone
VARIANTS = [{}, {"source": "slurm"}]
KINDS = {"divided", "own", "shared", "none"}


# ------------------------------------------------------------------------------ the cases
@dataclass(frozen=True)
class Case:
    """One srun launch on gres_cluster and what every rank must end up with.

    ``slurm``: CUDA_VISIBLE_DEVICES Slurm gives rank i (None: unset), as measured;
    ``hosts``: rank i's node ('1' = node1, '2' = node2); ``want``: CUDA_VISIBLE_DEVICES after
    cluster_spec(); ``shared``: the ranks that share a list, which must carry a "shared" note.
    """

    options: str
    slurm: Tuple[Optional[str], ...]
    hosts: str
    want: Tuple[str, ...]
    shared: Tuple[int, ...] = ()
    #: run the probe (TensorFlow in every rank), not only the command line
    probe: bool = True
    #: TensorFlow's resolver, from what each rank saw, must give the same CUDA_VISIBLE_DEVICES
    #: and ClusterSpec
    tf_parity: bool = False
    #: source='slurm' must give ``want`` too; False where a rank alone cannot know the other
    #: ranks' lists (nodes that differ): then only the rule's invariants are checked
    slurm_exact: bool = True

    @property
    def id(self) -> str:
        """'node1:n4_gpus-per-task=1', 'node1+node2:n4_gpus=6' (test ids)."""
        nodes, _, options = self.options.partition(" ")[2].partition(" ")
        return nodes.replace(",", "+") + ":" + "_".join(o.lstrip("-") for o in options.split())

    def host(self, rank: int) -> str:
        return f"node{self.hosts[rank]}"


def ranks(*values: Optional[str]) -> Tuple[Optional[str], ...]:
    return tuple(values)


ONE_NODE = [
    Case("-w node1 -n4 --gpus-per-task=1", ranks("0", "1", "2", "3"), "1111",
         ("0", "1", "2", "3")),
    Case("-w node1 -n2 --gpus-per-task=2", ranks("0,1", "2,3"), "11", ("0,1", "2,3")),
    Case("-w node1 -n4 --gpus=4 --gpu-bind=single:1", ranks("0", "1", "2", "3"), "1111",
         ("0", "1", "2", "3")),
    Case("-w node1 -n4 --ntasks-per-gpu=2 --gpus=2", ranks("0", "0", "1", "1"), "1111",
         ("0", "0", "1", "1"), shared=(0, 1, 2, 3)),
    Case("-w node1 -n2 --gpus-per-node=4 --gpu-bind=map_gpu:3,1", ranks("3", "1"), "11",
         ("3", "1")),
    Case("-w node1 -n4 --gpus-per-node=4", ranks(*["0,1,2,3"] * 4), "1111",
         ("0", "1", "2", "3"), tf_parity=True),
    # the same step as --gpus-per-node=4 (measured): the command line only
    Case("-w node1 -n4 --gres=gpu:4", ranks(*["0,1,2,3"] * 4), "1111", ("0", "1", "2", "3"),
         probe=False),
    Case("-w node1 -n4 --gpus=4", ranks(*["0,1,2,3"] * 4), "1111", ("0", "1", "2", "3"),
         probe=False),
    # CUDA_VISIBLE_DEVICES unset, SLURM_GPUS_ON_NODE=4: no nvidia-smi, not even TensorFlow's
    Case("-w node1 -n4 --gpus-per-task=1 --gpu-bind=none", ranks(None, None, None, None),
         "1111", ("0", "1", "2", "3")),
]

TWO_NODES = [
    # a node with one task of the step gets no SLURMD_TRES_BIND: rank 3 sees 0, unbound
    Case("-w node1,node2 -n4 --gpus-per-task=1", ranks("0", "1", "2", "0"), "1112",
         ("0", "1", "2", "0"), slurm_exact=False),
    # one list per node, divided: 2 // 2 on node1 sets 1 GPU per task for node2's rank too
    Case("-w node1,node2 -n3 --gpus-per-node=2", ranks("0,1", "0,1", "0,1"), "112",
         ("0", "1", "0"), slurm_exact=False),
    # lists that differ by node: 4 // 3 on node1, so node2's lone rank gets 1 of its 2
    Case("-w node1,node2 -n4 --gpus=6", ranks("0,1,2,3", "0,1,2,3", "0,1,2,3", "0,1"),
         "1112", ("0", "1", "2", "0"), slurm_exact=False),
    # single:1 with 3 tasks on 2 GPUs: ranks 0 and 2 both get GPU 0 (shared), rank 1 its own;
    # node2's lone rank sees both of its GPUs (no binding) and takes one, as every other rank
    Case("-w node1,node2 -n4 --gpus-per-node=2 --gpu-bind=single:1",
         ranks("0", "1", "0", "0,1"), "1112", ("0", "1", "0", "0"), shared=(0, 2),
         slurm_exact=False),
    # the command line only
    Case("-w node1,node2 --ntasks-per-node=2 --gpus-per-node=2", ranks(*["0,1"] * 4), "1122",
         ("0", "1", "0", "1"), probe=False, slurm_exact=False),
    Case("-w node1,node2 --ntasks-per-node=2 --gpus-per-task=1", ranks("0", "1", "0", "1"),
         "1122", ("0", "1", "0", "1"), probe=False, slurm_exact=False),
    Case("-w node1,node2 -n6 --gpus-per-task=1", ranks("0", "1", "2", "3", "0", "1"), "111122",
         ("0", "1", "2", "3", "0", "1"), probe=False, slurm_exact=False),
    Case("-w node1,node2 -n4 --ntasks-per-gpu=2 --gpus=2", ranks("0", "0", "0", "0"), "1122",
         ("0", "0", "0", "0"), shared=(0, 1, 2, 3), probe=False, slurm_exact=False),
]

CASES = ONE_NODE + TWO_NODES
PROBED = [c for c in CASES if c.probe]


# ------------------------------------------------------------------------------ the rule
def visible(line: Mapping[str, Any]) -> Tuple[str, ...]:
    """Returns the GPUs Slurm gave a rank: its CUDA_VISIBLE_DEVICES as launched, else
    0..SLURM_GPUS_ON_NODE-1, else none."""
    cvd = line["original_cvd"]
    if cvd is not None:
        return tuple(x for x in cvd.split(",") if x)
    on_node = line["slurm_gpu"]["SLURM_GPUS_ON_NODE"]
    return tuple(str(i) for i in range(int(on_node))) if on_node else ()


def expected_gpus(lists: Mapping[int, Tuple[str, ...]],
                  hosts: Mapping[int, str]) -> Dict[int, Tuple[str, str]]:
    """Returns {rank: (CUDA_VISIBLE_DEVICES, gpu_binding)} by the rule in the module docstring
    from every rank's list and host. A rank alone on its node is 'divided' (it may be 'own').
    Every rank takes the same number: the fewest any takes left to itself (an equal part of a
    list, or all of a list shorter than its ranks, which it then shares, spread over them)."""
    nodes: Dict[str, Dict[Tuple[str, ...], List[int]]] = defaultdict(dict)
    for rank in sorted(lists):
        nodes[hosts[rank]].setdefault(lists[rank], []).append(rank)
    each = min((len(gpus) // len(rs) if len(gpus) >= len(rs) else len(gpus)
                for by_list in nodes.values() for gpus, rs in by_list.items()), default=0)
    out: Dict[int, Tuple[str, str]] = {}
    for by_list in nodes.values():
        for gpus, rs in by_list.items():
            m = len(gpus)
            for i, rank in enumerate(rs):
                if not gpus:
                    out[rank] = ("", "none")
                elif m < len(rs):
                    start = i * m // len(rs) if each < m else 0
                    out[rank] = (",".join(gpus[(start + j) % m] for j in range(each)), "shared")
                elif len(by_list) > 1 and len(rs) == 1:
                    out[rank] = (",".join(gpus[:each]), "own")
                else:
                    out[rank] = (",".join(gpus[i * each:(i + 1) * each]), "divided")
    return out


def test_rule_gives_every_literal_answer() -> None:
    """The rule, applied to what Slurm gives (measured), gives each case's literal answer."""
    for case in CASES:
        lists = {r: tuple(cvd.split(",")) if cvd else
                 tuple(str(i) for i in range(GRES_GPUS[case.host(r)]))
                 for r, cvd in enumerate(case.slurm)}
        got = expected_gpus(lists, {r: case.host(r) for r in range(len(case.slurm))})
        assert tuple(got[r][0] for r in sorted(got)) == case.want, case.options
        assert {r for r, (_, kind) in got.items() if kind == "shared"} == set(case.shared), \
            case.options


# ------------------------------------------------------------------------------ launching
@dataclass
class Probed:
    run: Run
    smi_calls: Dict[str, int]


@pytest.fixture(scope="module")
def probe_runs(gres_cluster: SlurmCluster, gres_rank_env: Dict[str, str]):
    """Returns run(case): the probe under srun --mpi=pmix OPTIONS, launched once per case."""
    done: Dict[str, Probed] = {}

    def run(case: Case) -> Probed:
        if case.options not in done:
            gres_cluster.reset_nvidia_smi_calls()
            r = launch(gres_cluster, [*SRUN, *case.options.split(),
                                      *probe_argv(VARIANTS, tf=False)],
                       env=gres_rank_env)
            done[case.options] = Probed(r, {n: gres_cluster.nvidia_smi_calls(n)
                                            for n in gres_cluster.node_names})
        return done[case.options]
    return run


# ------------------------------------------------------------------------------ checks
def assert_slurm_gave(lines: List[Dict[str, Any]], case: Case, run: Run) -> None:
    """Asserts that Slurm gave every rank what the case says (the harness's contract)."""
    where = run.context()
    n = len(case.slurm)
    assert sorted(line["rank"] for line in lines) == list(range(n)), \
        f"expected one line from each of ranks 0..{n - 1}{where}"
    gave = {line["rank"]: (short(line["host"]), line["original_cvd"]) for line in lines}
    want = {r: (case.host(r), case.slurm[r]) for r in range(n)}
    assert gave == want, (f"Slurm's placement and CUDA_VISIBLE_DEVICES differ from what was "
                          f"measured: got {gave}, expected {want}{where}")


def assert_gpus(lines: List[Dict[str, Any]], case: Case, run: Run, *, exact: bool,
                mpi: bool) -> None:
    """Asserts every rank's GPUs: the rule's invariants always; with ``exact`` the case's
    literal answer, the rule's answer from what Slurm gave, and the "shared" notes."""
    where = run.context()
    errors = [line for line in lines if "error" in line]
    assert not errors, f"ranks failed: {json.dumps(errors, indent=1)[:6000]}{where}"
    n = len(lines)
    rule = expected_gpus({line["rank"]: visible(line) for line in lines},
                         {line["rank"]: short(line["host"]) for line in lines})
    for line in lines:
        rank, got = line["rank"], line["cuda_visible_devices"]
        gave = visible(line)
        what = (f"rank {rank} on {line['host']} (Slurm gave CUDA_VISIBLE_DEVICES="
                f"{line['original_cvd']!r}, {json.dumps(line['slurm_gpu'])}), source "
                f"{line['kwargs'].get('source', 'auto')}")
        assert isinstance(got, str), f"{what}: CUDA_VISIBLE_DEVICES is {got!r}{where}"
        entries = [x for x in got.split(",") if x]
        assert set(entries) <= set(gave), \
            f"{what}: got GPUs {got!r}, not all of them Slurm's{where}"
        assert entries or not gave, f"{what}: got no GPU although Slurm gave {gave}{where}"
        assert len(entries) == len(set(entries)), f"{what}: {got!r} repeats a GPU{where}"
        assert line["num_accelerators"] == {"GPU": len(entries)}, \
            f"{what}: num_accelerators() {line['num_accelerators']} for {got!r}{where}"
        assert line["stable"] is True, f"{what}: a second cluster_spec() differs{where}"
        assert (line["task_type"], line["task_id"]) == ("worker", rank), where
        assert len(line["cluster"]["worker"]) == n, where
        if mpi:
            assert (line["source"], line["verified"], line["mpi_size"]) == ("slurm", True, n), \
                f"{what}: expected Slurm's view cross-checked by MPI (size {n}){where}"
        else:  # (MPI may run in this process: the probe's earlier variant started it)
            assert (line["source"], line["verified"]) == ("slurm", False), \
                f"{what}: expected Slurm's view alone, not cross-checked{where}"
        if not exact:
            continue
        assert got == case.want[rank], \
            f"{what}: got CUDA_VISIBLE_DEVICES={got!r}, expected {case.want[rank]!r}{where}"
        assert got == rule[rank][0], f"{what}: got {got!r}, the rule gives {rule[rank]}{where}"
        notes = [note for note in line["notes"] if "shared" in note]
        if rank in case.shared:
            assert notes, f"{what}: shares {got} but no note says 'shared': " \
                          f"{line['notes']}{where}"
            assert all("\n" not in note for note in notes), f"{what}: {notes}{where}"
        elif not case.shared:
            assert not notes, f"{what}: nothing is shared, yet: {notes}{where}"


def assert_tf_parity(lines: List[Dict[str, Any]], run: Run) -> None:
    """Asserts that TensorFlow's resolver on the same rank gives the same GPUs and spec."""
    where = run.context()
    for line in lines:
        theirs = line["tf"] or tensorflow_view(line, GRES_GPUS[short(line["host"])])
        assert "error" not in theirs, \
            f"rank {line['rank']}: TensorFlow's resolver: {theirs}{where}"
        for key in ("cuda_visible_devices", "num_accelerators", "cluster", "task_id"):
            assert theirs[key] == line[key], \
                f"rank {line['rank']}: {key}: TensorFlow {theirs[key]!r}, ours {line[key]!r}{where}"


# ------------------------------------------------------------------------------ the probe
@pytest.mark.parametrize("case", PROBED, ids=lambda c: c.id)
def test_probe_srun_pmix(gres_cluster: SlurmCluster, probe_runs, case: Case) -> None:
    """srun --mpi=pmix OPTIONS probe: every rank's GPUs by the rule, cross-checked by MPI and
    from Slurm's variables alone; nvidia-smi never runs."""
    probed = probe_runs(case)
    run = probed.run
    assert run.returncode == 0, run.context()
    mpi_lines, slurm_lines = run.variant(0), run.variant(1)
    assert_slurm_gave(mpi_lines, case, run)
    assert_gpus(mpi_lines, case, run, exact=True, mpi=True)
    assert_gpus(slurm_lines, case, run, exact=case.slurm_exact, mpi=False)
    if case.tf_parity:
        assert_tf_parity(mpi_lines, run)
        assert_tf_parity(slurm_lines, run)
    assert probed.smi_calls == {n: 0 for n in gres_cluster.node_names}, \
        f"nvidia-smi ran {probed.smi_calls}{run.context()}"


MPI_NONE = [
    Case("-w node1 -n2 --gpus-per-node=4 --gpu-bind=map_gpu:3,1", ranks("3", "1"), "11",
         ("3", "1")),
    Case("-w node1 -n2 --ntasks-per-gpu=2 --gpus=1", ranks("0", "0"), "11", ("0", "0"),
         shared=(0, 1)),
]


@pytest.mark.parametrize("case", MPI_NONE, ids=lambda c: c.id)
def test_probe_srun_mpi_none_source_slurm(gres_cluster: SlurmCluster, gres_rank_env,
                                          case: Case) -> None:
    """srun --mpi=none OPTIONS probe, source='slurm': no MPI at all, the same GPUs."""
    gres_cluster.reset_nvidia_smi_calls()
    run = launch(gres_cluster, ["srun", "--mpi=none", *case.options.split(),
                                *probe_argv([{"source": "slurm"}], tf=False)],
                 env=gres_rank_env)
    assert run.returncode == 0, run.context()
    lines = run.variant(0)
    assert_slurm_gave(lines, case, run)
    assert_gpus(lines, case, run, exact=True, mpi=False)
    assert all(line["mpi_size"] is None for line in lines), run.context()
    assert {n: gres_cluster.nvidia_smi_calls(n) for n in gres_cluster.node_names} == \
        {n: 0 for n in gres_cluster.node_names}, run.context()


def test_sbatch_gpus_per_task(gres_cluster: SlurmCluster, gres_rank_env) -> None:
    """sbatch -n2 --gpus-per-task=2 with a plain `srun --mpi=pmix probe` inside: the step
    inherits the job's binding (0,1 / 2,3), SLURM_GPUS_PER_TASK=2, SLURM_JOB_GPUS=0,1,2,3."""
    case = Case("-w node1 -n2 --gpus-per-task=2", ranks("0,1", "2,3"), "11", ("0,1", "2,3"))
    c = gres_cluster
    out = os.path.join(c.workdir, "gpu-job.out")
    script = os.path.join(c.workdir, "gpu-job.sbatch")
    with open(script, "w") as f:
        f.write("#!/bin/sh\n"
                "#SBATCH -w node1\n#SBATCH -n2\n#SBATCH --gpus-per-task=2\n"
                "#SBATCH --job-name=mpir-gpu-probe\n"
                f"#SBATCH --output={out}\n#SBATCH --time=2\n"
                f"srun --mpi=pmix {shlex.join(probe_argv(VARIANTS, tf=False))}\n")
    c.reset_nvidia_smi_calls()
    try:
        sub = launch(c, ["sbatch", "--parsable", script], env=gres_rank_env, timeout=30,
                     parse=False)
        assert sub.returncode == 0 and sub.stdout.strip().isdigit(), sub.context()
        state = wait_for_job(c, sub.stdout.strip())
    finally:
        c.run(["scancel", "--name=mpir-gpu-probe"], timeout=30)  # no-op when it ended
    with open(out) as f:
        text = f.read()
    run = Run(sub.argv, sub.returncode, text, f"job: {state}\n{sub.stderr}", parse_lines(text))
    assert state == "COMPLETED 0:0", run.context()
    lines = run.variant(0)
    assert_slurm_gave(lines, case, run)
    for line in lines:
        got = {k: line["slurm_gpu"][k] for k in ("SLURM_GPUS_PER_TASK", "SLURM_JOB_GPUS")}
        assert got == {"SLURM_GPUS_PER_TASK": "2", "SLURM_JOB_GPUS": "0,1,2,3"}, run.context()
    assert_gpus(lines, case, run, exact=True, mpi=True)
    assert_gpus(run.variant(1), case, run, exact=True, mpi=False)
    assert c.nvidia_smi_calls("node1") == 0, run.context()


# ------------------------------------------------------------------------------ command line
@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_cli_show_json(gres_cluster: SlurmCluster, gres_cli_env, probe_runs, case: Case) -> None:
    """srun --mpi=pmix OPTIONS python -m mpi_resolver show --json: rank 0 prints one document
    whose gpus column is every rank's answer (the probe's, where the probe ran)."""
    run = launch(gres_cluster, [*SRUN, *case.options.split(), PY, *CLI], env=gres_cli_env,
                 parse=False)
    assert run.returncode == 0, run.context()
    where = run.context()
    try:
        report = json.loads(run.stdout)
    except ValueError:
        pytest.fail(f"show --json did not print one JSON document{where}")
    assert {"cluster", "ranks", "notes"} <= set(report), where
    rows = report["ranks"]
    n = len(case.slurm)
    assert [row["rank"] for row in rows] == list(range(n)), where
    for row in rows:
        assert {"rank", "host", "address", "gpus", "gpu_binding"} <= set(row), where
        assert row["gpu_binding"] in KINDS, f"rank {row['rank']}: {row['gpu_binding']!r}{where}"
        assert short(row["host"]) == case.host(row["rank"]), where
    assert tuple(row["gpus"] for row in rows) == case.want, where
    lists = {r: tuple(cvd.split(",")) if cvd else
             tuple(str(i) for i in range(GRES_GPUS[case.host(r)])) for r, cvd in
             enumerate(case.slurm)}
    rule = expected_gpus(lists, {r: case.host(r) for r in range(n)})
    for row in rows:
        kind = rule[row["rank"]][1]
        alone = case.hosts.count(case.hosts[row["rank"]]) == 1
        allowed = {"divided", "own"} if alone and kind != "shared" else {kind}
        assert row["gpu_binding"] in allowed, \
            f"rank {row['rank']}: gpu_binding {row['gpu_binding']!r}, expected {allowed}{where}"
    if case.shared:
        assert any("shared" in note for note in report["notes"]), where
    if case.probe:
        probed = probe_runs(case).run.variant(0)
        assert [row["gpus"] for row in rows] == [line.get("cuda_visible_devices")
                                                 for line in probed], \
            f"show --json and the probe differ{where}"
        assert [row["address"] for row in rows] == [line.get("address") for line in probed], \
            where


# ------------------------------------------------------------------------------ CPU only
def test_cpu_only_nodes(cpu_cluster: SlurmCluster) -> None:
    """srun -N2 -n3 --mpi=pmix on nodes without GRES and without nvidia-smi: no GPU for any
    rank, {"GPU": 0}, and a note that says the job runs on CPU."""
    assert not any(os.path.exists(f"/dev/nvidia{i}") for i in range(8)), \
        "this machine has /dev/nvidia*: the CPU-only case cannot be made here"
    run = launch(cpu_cluster, [*SRUN, "-N2", "-n3", *probe_argv(VARIANTS, tf=False)],
                 env={"PYTHONPATH": str(ROOT)})
    assert run.returncode == 0, run.context()
    for variant in (0, 1):
        lines = run.variant(variant)
        assert [line["rank"] for line in lines] == [0, 1, 2], run.context()
        for line in lines:
            what = f"rank {line['rank']} on {line['host']}, {line['kwargs']}"
            assert "error" not in line, f"{what}: {line.get('error')}{run.context()}"
            assert line["original_cvd"] is None, run.context()
            assert line["cuda_visible_devices"] == "", f"{what}: {line['cuda_visible_devices']!r}" \
                                                       f"{run.context()}"
            assert line["num_accelerators"] == {"GPU": 0}, f"{what}{run.context()}"
            assert any("CPU-only" in note or "no GPUs" in note for note in line["notes"]), \
                f"{what}: no note says CPU-only / no GPUs: {line['notes']}{run.context()}"
