"""MPIClusterResolver: TensorFlow's SlurmClusterResolver with MPI behind its extension points.

Importing this module imports TensorFlow; ``import mpi_resolver`` does not (it loads this
module the first time ``mpi_resolver.MPIClusterResolver`` is asked for).
"""

from __future__ import annotations

import os
from typing import Any, Dict, List, Optional, Union

from mpi_resolver.placement.addresses import DEFAULT_ADDRESS
from mpi_resolver.core.errors import MissingDependencyError
from mpi_resolver.options import DEFAULT_SOURCE, DEFAULT_TIMEOUT, DEFAULT_VERIFY
from mpi_resolver.options import make_options
from mpi_resolver.resolve.resolution import Resolution
from mpi_resolver.resolve.this_process import cuda_started, narrow, resolve_process

try:
    import tensorflow as tf
except ImportError as e:  # pragma: no cover - exercised only without TensorFlow
    raise MissingDependencyError(
        f"TensorFlow could not be imported ({e}). Install it with `pip install tensorflow` "
        "(or tensorflow-cpu). The command line `mpi-resolver` works without it.") from e


def _cuda_started() -> Optional[str]:
    """Returns why CUDA has started in this process: TensorFlow listed its physical devices
    (its CUDA then started with CUDA_VISIBLE_DEVICES as it was), or libcuda is loaded; None
    where it has not."""
    from tensorflow.python.eager import context

    if getattr(context.context(), "_physical_devices", None) is not None:
        return "TensorFlow already listed this process's devices"
    return cuda_started()


def _make_cluster_spec(cluster: Dict[str, List[str]]) -> "tf.train.ClusterSpec":
    """Returns tf.train.ClusterSpec(cluster); large ones are built through their ClusterDef
    proto: the same object, in a third of the time TensorFlow's dict path takes for 40,000
    tasks."""
    if sum(len(tasks) for tasks in cluster.values()) < 512:
        return tf.train.ClusterSpec(cluster)  # small: the dict path is quicker
    cluster_def = tf.train.ClusterDef()
    for name in sorted(cluster):
        cluster_def.job.add(name=name).tasks.update(enumerate(cluster[name]))
    return tf.train.ClusterSpec(cluster_def)


class MPIClusterResolver(tf.distribute.cluster_resolver.SlurmClusterResolver):
    """A SlurmClusterResolver that checks Slurm against MPI, or uses MPI where there is no Slurm.

    The arguments are TensorFlow's (jobs, port_base, gpus_per_node, gpus_per_task,
    tasks_per_node, auto_set_gpu, rpc_layer), with the same meaning, and six of its own
    (source, verify, comm, timeout, uneven_gpus, address).

    Args:
      jobs: as TensorFlow's: job names and how many tasks each (default: one 'worker' job).
      port_base: as TensorFlow's, or 'auto': ports free on each node, so that jobs sharing a
        node do not collide (docs/placement.md). With a number, this rank's port must be
        free. Not given: MPI_RESOLVER_PORT_BASE where set, else 8888 (TensorFlow's).
      gpus_per_node: as TensorFlow's (default: MPI_RESOLVER_GPUS_PER_NODE where set, else as
        Slurm, CUDA_VISIBLE_DEVICES or nvidia-smi say).
      gpus_per_task: as TensorFlow's.
      tasks_per_node: as TensorFlow's.
      auto_set_gpu: as TensorFlow's: set CUDA_VISIBLE_DEVICES for this task.
      rpc_layer: as TensorFlow's.
      source: 'slurm' (step variables only; never imports mpi4py), 'mpi' (the communicator
        only) or 'auto' (Slurm's variables in a Slurm step, MPI otherwise).
      verify: 'auto' (cross-check when both are there), True (insist) or False.
      comm: an mpi4py communicator instead of COMM_WORLD.
      timeout: seconds before the MPI exchange gives up with a ResolutionError.
      uneven_gpus: False (default): every task gets the same number of GPUs, as
        MultiWorkerMirroredStrategy needs; True: each as many as its node gives (parameter
        servers).
      address: what the ClusterSpec names each node by: 'host' (default, as TensorFlow),
        'fqdn', 'ip', 'iface:NAME' (that interface's IPv4 address on each node; needs MPI)
        or a name with '{host}' in it, such as '{host}-ib0' (see
        mpi_resolver.placement.addresses).

    Raises:
      ResolutionError: anything that keeps the job from resolving (FormatError for malformed
        variables and arguments, MismatchError when Slurm and MPI disagree).
    """

    def __init__(self, jobs: Optional[Dict[str, int]] = None,
                 port_base: Union[int, str, None] = None,
                 gpus_per_node: Optional[int] = None, gpus_per_task: Optional[int] = None,
                 tasks_per_node: Any = None, auto_set_gpu: bool = True,
                 rpc_layer: str = "grpc", *, source: str = DEFAULT_SOURCE,
                 verify: Any = DEFAULT_VERIFY, comm: Any = None,
                 timeout: float = DEFAULT_TIMEOUT, uneven_gpus: bool = False,
                 address: str = DEFAULT_ADDRESS) -> None:
        opts = make_options(jobs=jobs, port_base=port_base, gpus_per_node=gpus_per_node,
                            gpus_per_task=gpus_per_task, tasks_per_node=tasks_per_node,
                            source=source, verify=verify, timeout=timeout,
                            uneven_gpus=uneven_gpus, address=address, env=os.environ)
        self._resolution = resolve_process(opts, comm=comm, auto_set_gpu=auto_set_gpu,
                                           started=_cuda_started)
        self._cluster_spec = None
        # TensorFlow's own GPU arithmetic is not used (cluster_spec and num_accelerators are
        # ours); give it numbers that pass its check (tasks x GPUs per task <= GPUs per node).
        own = len(self._resolution.own_gpus)
        super().__init__(jobs=opts.jobs, port_base=self._resolution.layout.port_base,
                         gpus_per_node=own * max(self._resolution.task_configuration.values()),
                         gpus_per_task=own, tasks_per_node=None,
                         auto_set_gpu=auto_set_gpu, rpc_layer=rpc_layer)

    @property
    def resolution(self) -> Resolution:
        """Returns the resolution behind this resolver (layout, source, records, notes)."""
        return self._resolution

    def _resolve_own_rank(self) -> int:
        """Returns this process's rank: SLURM_PROCID, or the MPI rank."""
        return self._resolution.rank

    def _resolve_num_tasks(self) -> int:
        """Returns the number of tasks: SLURM_STEP_NUM_TASKS, or the MPI size."""
        return self._resolution.num_tasks

    def _resolve_hostlist(self) -> List[str]:
        """Returns the job's hosts, in the order of their first rank."""
        return list(self._resolution.task_configuration)

    def _resolve_task_configuration(self) -> Dict[str, int]:
        """Returns {host: number of tasks on it}, from Slurm or from where MPI ranks run."""
        return self._resolution.task_configuration

    def cluster_spec(self) -> "tf.train.ClusterSpec":
        """Returns the ClusterSpec; sets task_type, task_id and CUDA_VISIBLE_DEVICES as TF does."""
        self.task_type, self.task_id = self._resolution.task
        if self._auto_set_gpu:
            narrow(self._resolution, _cuda_started)
        if self._cluster_spec is None:
            self._cluster_spec = _make_cluster_spec(self._resolution.cluster())
        return self._cluster_spec

    def num_accelerators(self, task_type: Optional[str] = None, task_id: Optional[int] = None,
                         config_proto: Any = None) -> Dict[str, int]:
        """Returns {'GPU': the number of GPUs this rank gets} (Slurm's binding included)."""
        del task_type, task_id, config_proto  # as TensorFlow's: this process's own GPUs
        return {"GPU": len(self._resolution.own_gpus)}

    def tf_config(self) -> dict:
        """Returns this rank's TF_CONFIG structure ({'cluster': ..., 'task': ...})."""
        return self._resolution.tf_config()
