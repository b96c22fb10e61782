"""The TensorFlow edge of the long jobs, beside the JAX edge (``mpi_resolver.jax``):
SlurmTerminationConfig, TensorFlow's TerminationConfig for Slurm (termination_config), its
PreemptionCheckpointHandler with periodic saves (handler), the checkpoints kept and the newest
whole one restored (checkpoints), the coordination service as the workers' meeting point
(coordinator), TensorFlow's quirks worked around (quirks), and the Keras 2 callbacks for
``model.fit``: SlurmBackupAndRestore (keras_callback) and StepWatchdogCallback
(watchdog_callback).

May import the long-job core (long_jobs/) and the package's core only: never the resolution,
MPI or the JAX edge. Every module here imports TensorFlow; importing
``mpi_resolver.tensorflow`` does not, and ``import mpi_resolver`` loads these names only when
they are first used. Only rehearsal/ (deep_tf) and the users' scripts import it.
"""
