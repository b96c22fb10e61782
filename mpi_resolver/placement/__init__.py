"""Where tasks are: Slurm's hostlist and tasks-per-node grammar (hostlist), one host or two
(host_names), the placement of ranks on nodes and the ClusterSpec's layout (layout), and
the ``address=`` rule that names a node (addresses, parsed, not looked up).

Pure: no environment, no MPI, no TensorFlow. May import core only. The launchers, the
exchange, the network checks and the resolution import it; it must import none of them
(the node-list grammar sits below every launcher).
"""
