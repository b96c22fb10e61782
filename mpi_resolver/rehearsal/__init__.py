"""Rehearsing the long job before it runs: ``check --connect`` (connect_pairs: who dials
whom; connect_probe: the sockets; connect_check: over MPI), ``check --deep`` (deep_check:
the phases and their report; deep_tf: TensorFlow's strategy and first all-reduce, and the
signal still reaching the package's watcher), and ``check --checkpoint-dir`` (checkpoint_files
and checkpoint_check: the pure verdict; checkpoint_probe: the files over MPI).

May import everything below it, resolve/, long_jobs/ and the tensorflow/ and jax/ edges
included. Only cli/ imports it.
"""
