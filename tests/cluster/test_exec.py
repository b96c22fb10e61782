"""The TF_CONFIG path keeps Slurm's GPU binding, for real on the GRES cluster (node1 with 4
GPUs, node2 with 2): `mpi-resolver exec -- PROGRAM` and `eval "$(mpi-resolver tf-config
--export)"` give each rank the GPUs cluster_spec() would; with `exec --source slurm` the
program starts MPI itself. And workers of nodes with different GPU counts get the same number,
or an error."""

from __future__ import annotations

import json
import re
from typing import List

import pytest

from tests.cluster.conftest import PY
from tests.conftest import fake_mig, write_fake_nvidia_smi
from tests.cluster.test_scenarios import launch, probe
from tests.harness.slurm_cluster import SlurmCluster
from tests.docs.blocks import command, runs_like

SRUN = ("srun", "--mpi=pmix")
#: Prints, as one JSON line, what the program sees: MPI's rank and a sum over every rank,
#: TF_CONFIG and CUDA_VISIBLE_DEVICES.
MPI_PROGRAM = ("import json, os\n"
               "from mpi4py import MPI\n"
               "c = MPI.COMM_WORLD\n"
               "line = json.dumps({'rank': c.Get_rank(), 'sum': c.allreduce(1),\n"
               "                   'tf_config': json.loads(os.environ['TF_CONFIG']),\n"
               "                   'gpus': os.environ.get('CUDA_VISIBLE_DEVICES')})\n"
               "os.write(1, (line + '\\n').encode())  # one write: launchers interleave parts\n")
#: Prints [its task index, CUDA_VISIBLE_DEVICES] as JSON, without MPI.
ENV_PROGRAM = ("import json, os\n"
               "line = json.dumps([json.loads(os.environ['TF_CONFIG'])['task']['index'],\n"
               "                   os.environ.get('CUDA_VISIBLE_DEVICES')])\n"
               "os.write(1, (line + '\\n').encode())\n")
SPEC_1 = {"worker": ["node1:8888", "node1:8889", "node1:8890", "node1:8891"]}
SPEC_2 = {"worker": ["node1:8888", "node1:8889", "node2:8888", "node2:8889"]}


def _lines(stdout: str) -> List[dict]:
    return sorted((json.loads(x) for x in stdout.splitlines() if x.startswith("{")),
                  key=lambda line: line["rank"])


@pytest.mark.parametrize("options, spec, gpus", [
    pytest.param("-w node1 -n4 --gres=gpu:4", SPEC_1, ["0", "1", "2", "3"],
                 id="--gres=gpu:4, four tasks: every task sees 4, each gets one"),
    pytest.param("-N2 --ntasks-per-node=2 --gpus-per-task=1", SPEC_2, ["0", "1", "0", "1"],
                 id="--gpus-per-task=1 on both nodes: Slurm's own binding kept"),
])
def test_exec_runs_an_mpi_program_with_its_tf_config_and_gpus(
        gres_cluster: SlurmCluster, gres_cli_env, options, spec, gpus) -> None:
    run = launch(gres_cluster, [*SRUN, *options.split(), PY, "-m", "mpi_resolver", "exec",
                                "--source", "slurm", "--", PY, "-c", MPI_PROGRAM], env=gres_cli_env,
                 parse=False)
    # The docs' program is the user's train.py (one that reads TF_CONFIG); this one prints it.
    runs_like(command("commands", "srun --mpi=pmix mpi-resolver exec").split(" -- ")[0] + " --",
              run.argv)
    assert run.returncode == 0, run.context()
    lines = _lines(run.stdout)
    assert [line["rank"] for line in lines] == [0, 1, 2, 3], run.context()
    assert all(line["sum"] == 4 for line in lines), run.context()  # MPI works in the program
    for line in lines:
        assert line["tf_config"] == {"cluster": spec,
                                     "task": {"type": "worker", "index": line["rank"]}}
    assert [line["gpus"] for line in lines] == gpus, run.context()
    assert "warning" not in run.stderr, run.context()  # no MPI was started before the program


def test_exec_with_mpi_then_a_program_that_starts_mpi_fails_as_the_warning_says(
        gres_cluster: SlurmCluster, gres_cli_env) -> None:
    """Measured with Open MPI 4.1.4 under srun --mpi=pmix: after the resolution's MPI (ended
    before exec), the program's own MPI_Init fails; rank 0 has said why, once."""
    run = launch(gres_cluster, [*SRUN, "-N2", "--ntasks-per-node=1", PY, "-m", "mpi_resolver",
                                "exec", "--gpus-per-node", "0", "--", PY, "-c", MPI_PROGRAM],
                 env=gres_cli_env, parse=False)
    assert run.returncode != 0, run.context()
    assert run.stderr.count("mpi-resolver: warning: the resolution used MPI") == 1, run.context()
    assert "MPI_Init" in run.stderr, run.context()


def test_eval_tf_config_export_keeps_the_gpu_binding(gres_cluster: SlurmCluster,
                                                      gres_cli_env) -> None:
    """--gres=gpu:4 with four tasks: without the GPUs in the export every worker would see
    all four; with them each sees the one cluster_spec() gives it."""
    shell = (f'eval "$({PY} -m mpi_resolver tf-config --export)"; '
             'printf \'{"gpus": "%s", "tf_config": %s}\\n\' "$CUDA_VISIBLE_DEVICES" "$TF_CONFIG"')
    run = launch(gres_cluster, [*SRUN, "-w", "node1", "-n4", "--gres=gpu:4", "bash", "-c",
                                shell], env=gres_cli_env, parse=False)
    assert run.returncode == 0, run.context()
    lines = sorted((json.loads(x) for x in run.stdout.splitlines() if x.startswith("{")),
                   key=lambda line: line["tf_config"]["task"]["index"])
    assert [line["tf_config"]["task"]["index"] for line in lines] == [0, 1, 2, 3], run.context()
    assert all(line["tf_config"]["cluster"] == SPEC_1 for line in lines), run.context()
    assert [line["gpus"] for line in lines] == ["0", "1", "2", "3"], run.context()



# ------------------------------------------------------------------- GPU counts that differ
UNEVEN = ("-N2", "--ntasks-per-node=4", "--gpus=6")  # Slurm: node1 0,1,2,3 x4; node2 0,1 x4
EVENED = ["0", "1", "2", "3", "0", "0", "1", "1"]


def test_workers_of_nodes_with_4_and_2_gpus_each_get_one(gres_cluster: SlurmCluster, gres_rank_env,
                                                          gres_cli_env) -> None:
    """srun --gpus=6 on node1 (4 GPUs) and node2 (2), four tasks each: through the resolver,
    show --json and exec every task gets one GPU, two tasks per GPU on node2; with
    --uneven-gpus node2's tasks keep both (what TensorFlow's strategy calls undefined)."""
    run = probe(gres_cluster, [*SRUN, *UNEVEN], [{}, {"uneven_gpus": True}], tf=False,
                env=gres_rank_env)
    assert run.returncode == 0, run.context()
    assert [line["cuda_visible_devices"] for line in run.variant(0)] == EVENED, run.context()
    assert [line["num_accelerators"] for line in run.variant(0)] == [{"GPU": 1}] * 8
    assert [line["cuda_visible_devices"] for line in run.variant(1)] == \
        EVENED[:4] + ["0,1"] * 4, run.context()
    shown = launch(gres_cluster, [*SRUN, *UNEVEN, PY, "-m", "mpi_resolver", "show", "--json"],
                   env=gres_cli_env, parse=False)
    assert shown.returncode == 0, shown.context()
    rows = json.loads(shown.stdout)["ranks"]
    assert [row["gpus"] for row in rows] == EVENED, shown.context()
    assert [row["gpu_binding"] for row in rows] == ["divided"] * 4 + ["shared"] * 4
    ran = launch(gres_cluster, [*SRUN, *UNEVEN, PY, "-m", "mpi_resolver", "exec", "--", PY,
                                "-c", ENV_PROGRAM], env=gres_cli_env, parse=False)
    assert ran.returncode == 0, ran.context()
    seen = sorted(json.loads(x) for x in ran.stdout.splitlines())
    assert [gpus for _, gpus in seen] == EVENED, ran.context()
    assert ran.stderr.count("mpi-resolver: warning: the resolution used MPI") == 1


def test_a_node_without_gpus_beside_gpu_nodes_fails_check_naming_both(
        gres_cluster: SlurmCluster, gres_cli_env) -> None:
    """node2's tasks see no GPU (CUDA_VISIBLE_DEVICES emptied, as on a CPU-only node):
    `check` exits 2 naming the nodes and their counts; --uneven-gpus lets it pass."""
    cpu_on_node2 = ('if [ "$SLURMD_NODENAME" = node2 ]; then export CUDA_VISIBLE_DEVICES=; '
                    'unset SLURM_GPUS_ON_NODE; fi; exec "$@"')
    argv = [*SRUN, "-N2", "--ntasks-per-node=2", "--gres=gpu:2", "bash", "-c", cpu_on_node2,
            "cpu-on-node2", PY, "-m", "mpi_resolver", "check"]
    run = launch(gres_cluster, argv, env=gres_cli_env, parse=False)
    assert run.returncode == 2, run.context()
    errors = [x for x in run.stderr.splitlines() if x.startswith("mpi-resolver: error:")]
    assert len(errors) == 1, run.context()
    assert ("workers would get different numbers of GPUs: 0 GPU(s) per task on node2; 1 "
            "GPU(s) per task on node1." in errors[0]), run.context()
    allowed = launch(gres_cluster, [*argv, "--uneven-gpus"], env=gres_cli_env, parse=False)
    assert allowed.returncode == 0, allowed.context()



def test_the_guide_s_mpi4py_check_and_srun_mpi_list(gres_cluster: SlurmCluster,
                                                    gres_cli_env) -> None:
    """README, "On a GPU cluster": `srun --mpi=pmix -n2 python -m mpi4py.bench helloworld`
    shows ranks 0 and 1 of 2 (mpi4py wired to Slurm's MPI), and `srun --mpi=list` names
    pmix."""
    run = launch(gres_cluster, [*SRUN, "-n2", PY, "-m", "mpi4py.bench", "helloworld"],
                 env=gres_cli_env, parse=False)
    assert run.returncode == 0, run.context()
    assert sorted(re.findall(r"I am process (\d) of (\d)", run.stdout)) == [("0", "2"),
                                                                          ("1", "2")]
    listed = launch(gres_cluster, ["srun", "--mpi=list"], env=gres_cli_env, parse=False)
    assert listed.returncode == 0 and "pmix" in listed.stdout + listed.stderr, listed.context()


def test_mig_devices_reach_every_rank_through_the_exchange(cluster: SlurmCluster,
                                                           tmp_path) -> None:
    """An nvidia-smi that lists one GPU in MIG mode with 2 MIG devices, first on PATH on both
    nodes, CUDA_VISIBLE_DEVICES unset: each node's first rank runs it, and MPI's exchange
    carries the UUIDs to the node's other rank; each rank gets its own MIG device."""
    smi = write_fake_nvidia_smi(tmp_path / "mig-bin", 1, mig=2)
    first = f'export PATH={smi}:"$PATH"; exec "$@"'
    shown = launch(cluster, [*SRUN, "-N2", "--ntasks-per-node=2", "bash", "-c", first, "-",
                             PY, "-m", "mpi_resolver", "show", "--json"], parse=False)
    assert shown.returncode == 0, shown.context()
    doc = json.loads(shown.stdout)
    assert [row["gpus"] for row in doc["ranks"]] == [fake_mig(0, 0), fake_mig(0, 1)] * 2, \
        shown.context()
    assert any("CUDA lets a process use only one MIG device" in n for n in doc["notes"])
