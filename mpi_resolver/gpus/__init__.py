"""The GPU rules: a task's GPU list as Slurm and CUDA write it (lists), MIG devices (mig), one
count for every worker (counts), nvidia-smi and the device files (discovery), the
allocation of a node's GPUs to its tasks (allocation), the notes a resolution prints
(notes), and whether CUDA started too early (cuda_state).

May import core only: the rules take counts and lists, not Slurm's variables or MPI, so
that they can be tested as tables. Resolving a job's GPUs from the ranks' records, which
needs the exchange, is resolve.gpu_resolution's; nothing here may import exchange/ or resolve/.
"""
