"""The vocabulary every other part speaks: the package's errors (errors), the one rule for
whole numbers, ports and GPU counts (values), plain-text tables (tables), the package's
logger (logs), and the reductions that make every rank agree on one answer (agreement).

Owns nothing about Slurm, MPI, GPUs or TensorFlow: these modules are pure and import only
the standard library. It may import nothing else of the package; everything may import it.
"""
