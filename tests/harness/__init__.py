"""Test harness: a throw-away Slurm cluster with one network namespace per node."""
from .slurm_cluster import ClusterError, SlurmCluster

__all__ = ["ClusterError", "SlurmCluster"]
