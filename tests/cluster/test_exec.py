"""The TF_CONFIG path keeps Slurm's GPU binding, for real on the GRES cluster (node1 with 4
GPUs, node2 with 2): `mpi-resolver exec -- PROGRAM` and `eval "$(mpi-resolver tf-config
--export)"` give each rank the GPUs cluster_spec() would, and under srun the program can start
MPI itself (exec resolves from Slurm's variables, without MPI)."""

from __future__ import annotations

import json
from typing import Dict, List

import pytest

from tests.cluster.conftest import PY, hiding
from tests.cluster.test_scenarios import launch
from tests.harness.slurm_cluster import SlurmCluster

SRUN = ("srun", "--mpi=pmix")
#: Prints, as one JSON line, what the program sees: MPI's rank and a sum over every rank,
#: TF_CONFIG and CUDA_VISIBLE_DEVICES.
MPI_PROGRAM = ("import json, os\n"
               "from mpi4py import MPI\n"
               "c = MPI.COMM_WORLD\n"
               "print(json.dumps({'rank': c.Get_rank(), 'sum': c.allreduce(1),\n"
               "                  'tf_config': json.loads(os.environ['TF_CONFIG']),\n"
               "                  'gpus': os.environ.get('CUDA_VISIBLE_DEVICES')}), flush=True)\n")
SPEC_1 = {"worker": ["node1:8888", "node1:8889", "node1:8890", "node1:8891"]}
SPEC_2 = {"worker": ["node1:8888", "node1:8889", "node2:8888", "node2:8889"]}


@pytest.fixture(scope="module")
def cli_env(gres_cluster: SlurmCluster) -> Dict[str, str]:
    """The command line's variables: a `tensorflow` that fails to import comes first."""
    return hiding(gres_cluster, "tensorflow", "the mpi_resolver command line imported TensorFlow")


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
        gres_cluster: SlurmCluster, cli_env, options, spec, gpus) -> None:
    run = launch(gres_cluster, [*SRUN, *options.split(), PY, "-m", "mpi_resolver", "exec",
                                "--", PY, "-c", MPI_PROGRAM], env=cli_env, parse=False)
    assert run.returncode == 0, run.context()
    lines = _lines(run.stdout)
    assert [line["rank"] for line in lines] == [0, 1, 2, 3], run.context()
    assert all(line["sum"] == 4 for line in lines), run.context()  # MPI works in the program
    for line in lines:
        assert line["tf_config"] == {"cluster": spec,
                                     "task": {"type": "worker", "index": line["rank"]}}
    assert [line["gpus"] for line in lines] == gpus, run.context()
    assert "warning" not in run.stderr, run.context()  # no MPI was started before the program


def test_eval_tf_config_export_keeps_the_gpu_binding(gres_cluster: SlurmCluster,
                                                      cli_env) -> None:
    """--gres=gpu:4 with four tasks: without the GPUs in the export every worker would see
    all four; with them each sees the one cluster_spec() gives it."""
    shell = (f'eval "$({PY} -m mpi_resolver tf-config --export)"; '
             'printf \'{"gpus": "%s", "tf_config": %s}\\n\' "$CUDA_VISIBLE_DEVICES" "$TF_CONFIG"')
    run = launch(gres_cluster, [*SRUN, "-w", "node1", "-n4", "--gres=gpu:4", "bash", "-c",
                                shell], env=cli_env, parse=False)
    assert run.returncode == 0, run.context()
    lines = sorted((json.loads(x) for x in run.stdout.splitlines() if x.startswith("{")),
                   key=lambda line: line["tf_config"]["task"]["index"])
    assert [line["tf_config"]["task"]["index"] for line in lines] == [0, 1, 2, 3], run.context()
    assert all(line["tf_config"]["cluster"] == SPEC_1 for line in lines), run.context()
    assert [line["gpus"] for line in lines] == ["0", "1", "2", "3"], run.context()
