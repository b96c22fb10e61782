"""Who started this process and how: the launcher (launchers: srun, mpirun of Open MPI,
MPICH's Hydra, Intel MPI), the MPI library mpi4py loads and the PMI it speaks
(mpi_library), Slurm's step variables and the batch step (slurm_step), and MPICH's and
Intel MPI's faults under ``srun --mpi=pmi2`` (srun_pmi).

Reads variables passed in, never os.environ itself, and never starts MPI. May import core,
placement and options; independent of gpus/ (neither imports the other). The exchange, the
network checks and the resolution import it.
"""
