"""Long jobs on Slurm: the warning signal and SIGTERM to TensorFlow's coordinated checkpoint,
the requeue, and the next run's resume; periodic checkpoints, restarts and hung steps for the
endings nobody announces.

Owns: the signal names ``--signal`` takes (signals), handlers that only note a signal and
the check that nobody took them since (watcher, disposition), the requeue from worker 0
(requeue), what happens between the signal and the exit (termination), the restart count and
the newest checkpoint that restores (resume); periodic saves: how often (interval), at which
steps (schedule), and which job wrote a directory (manifest); ``mpi-resolver supervise``'s
restart policy (restarts), the launchers' reports of a failed task it reads (step_report) and
srun's options it rewrites to leave a node out (srun_options); a hung step's rule (watchdog),
where a hung worker is (hang_site) and the watchdog that ends it (step_watchdog); and the
TensorFlow edge: SlurmTerminationConfig (tf_config), its handler (tf_handler), checkpoints
(tf_checkpoints), meeting point (tf_coordinator) and the TensorFlow quirks it works around
(tf_quirks), and the Keras 2 callbacks (keras_callback, watchdog_callback), imported only
when asked for.
May import the package's core (errors, values, logs). Nothing below the command line and
the rehearsals imports it; ``import mpi_resolver`` does not.
"""
