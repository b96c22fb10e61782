"""Long jobs on Slurm: the warning signal and SIGTERM to TensorFlow's coordinated checkpoint,
the requeue, and the next run's resume.

Owns: the signal names ``--signal`` takes (signals), handlers that only note a signal and
the check that nobody took them since (watcher, disposition), the requeue from worker 0
(requeue), what happens between the signal and the exit (termination), the restart count
(resume); and the TensorFlow edge: SlurmTerminationConfig (tf_config) and the Keras 2
callback (keras_callback), both imported only when asked for.
May import the package's core (errors, values, logs). Nothing below the command line and
the rehearsals imports it; ``import mpi_resolver`` does not.
"""
