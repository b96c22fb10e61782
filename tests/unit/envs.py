"""What tasks see, as plain dicts that stand in for os.environ (shared by the unit tests): a
task of srun -N2 -n4 on node n1, the launchers' variables, and the MPI libraries' version
texts."""

from __future__ import annotations

# What a task of `srun -N2 -n4` sees on node n1 (ranks 0,1,2 there), rank 2 of 4.
SLURM_TASK = {
    "SLURM_JOB_ID": "42",
    "SLURM_STEP_ID": "0",
    "SLURM_PROCID": "2",
    "SLURM_LOCALID": "2",
    "SLURM_STEP_NUM_TASKS": "4",
    "SLURM_STEP_NODELIST": "n[1-2]",
    "SLURM_STEP_TASKS_PER_NODE": "3,1",
    "SLURMD_NODENAME": "n1",
    "SLURM_GTIDS": "0,1,2",
}


# What every rank inherits under `mpirun` started inside `salloc`: the launcher daemon's step.
SALLOC_DAEMON = {
    "SLURM_JOB_ID": "42",
    "SLURM_PROCID": "0",
    "SLURM_STEP_NUM_TASKS": "2",
    "SLURM_STEP_NODELIST": "n[1-2]",
    "SLURM_STEP_TASKS_PER_NODE": "1(x2)",
}


OPEN_MPI = {"OMPI_COMM_WORLD_RANK": "3", "OMPI_COMM_WORLD_SIZE": "4",
            "OMPI_COMM_WORLD_LOCAL_RANK": "1", "OMPI_COMM_WORLD_LOCAL_SIZE": "2"}


HYDRA = {"PMI_RANK": "2", "PMI_SIZE": "4", "MPI_LOCALRANKID": "0"}


SRUN_PMIX = {**SLURM_TASK, "PMIX_RANK": "2", "PMIX_NAMESPACE": "slurm.pmix.42.0"}


SRUN_PMI2 = {**SLURM_TASK, "PMI_RANK": "2", "PMI_SIZE": "4", "PMI_FD": "5"}


SRUN_NONE = dict(SLURM_TASK)


MVAPICH = {"MV2_COMM_WORLD_RANK": "5", "MV2_COMM_WORLD_SIZE": "8",
           "MV2_COMM_WORLD_LOCAL_RANK": "1"}


BATCH = {"SLURM_JOB_ID": "7", "SLURM_PROCID": "0", "SLURM_LOCALID": "0", "SLURM_NTASKS": "4",
         "SLURM_NODELIST": "node[1-2]", "SLURM_TASKS_PER_NODE": "2(x2)",
         "SLURMD_NODENAME": "node1", "SLURM_GTIDS": "0"}


#: What PyPI's mpich 5.0.2 and impi-rt 2021.18.1 answer to MPI_Get_library_version.
MPICH_TEXT = ("MPICH Version:      5.0.2\nMPICH Release date: Fri Sep 25 20:45:26 UTC 2026\n"
              "MPICH ABI:          18:2:6\nMPICH Device:       ch4:ucx ofi\n"
              "MPICH configure:    --with-device=ch4:ucx,ofi --with-pm=hydra:gforker\n"
              "MPICH CC:           cc\n")


OMPI4 = "Open MPI v4.1.4, package: Debian OpenMPI, ident: 4.1.4, repo rev: v4.1.4, May 26, 2022"


OMPI5 = "Open MPI v5.0.8, package: Open MPI, ident: 5.0.8, repo rev: v5.0.8, May 30, 2025"


IMPI = "Intel(R) MPI Library 2021.18.1 for Linux* OS\n"


UUID_A = "GPU-8932f937-d72c-4106-c12f-20bd9faed9f6"


UUID_B = "GPU-2c6ad7e4-3a4b-4c16-9e8f-1f2d3c4b5a69"


MIG_A = "MIG-GPU-8932f937-d72c-4106-c12f-20bd9faed9f6/1/0"


MIG_B = "MIG-c6d4f1ef-42e4-5de3-91c7-45d71c87eb3f"


BLOCK = ["node1", "node1", "node1", "node2"]      # srun -N2 -n4


CYCLIC = ["node1", "node2", "node1", "node1"]     # srun -N2 -n4 --distribution=cyclic
