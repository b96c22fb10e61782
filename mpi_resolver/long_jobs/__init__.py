"""Long jobs on Slurm, framework-free: everything between Slurm's signals, the failures nobody
announces and the next run that neither TensorFlow nor JAX has a say in. The two framework
edges, ``mpi_resolver.tensorflow`` and ``mpi_resolver.jax``, build on it side by side, and
``mpi-resolver supervise`` (cli/) is its edge in the batch step.

Owns: the signal names ``--signal`` takes (signals), handlers that only note a signal and
the check that nobody took them since (watcher, disposition, reach), what happens between
the signal and the exit (termination) and the exit itself (process_end), the requeue
(requeue), where a run resumes (resume); periodic saves: how often (interval), at which
steps (schedule), the settings from the batch script (job_settings), and which job wrote a
directory (manifest); ``mpi-resolver supervise``'s restart policy (restarts), the launchers'
reports of a failed task it reads (step_report) and srun's options it rewrites to leave a
node out (srun_options); a hung step's rule (watchdog), where a hung worker is (hang_site)
and the watchdog that ends it (step_watchdog).

May import the package's core (errors, values, logs, settings) only: never TensorFlow, JAX,
mpi4py or the resolution, so that a training script of either framework and supervise import
it alike; ``import mpi_resolver`` does not.
"""
