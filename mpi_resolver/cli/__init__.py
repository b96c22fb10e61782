"""The ``mpi-resolver`` command line: its arguments (args), the commands ``show``, ``check``,
``tf-config`` and what they print (main), and ``exec``: running a program as this rank
(exec), and ``supervise``: running a batch script's step again where a task fails
(supervise). ``python -m mpi_resolver`` (``__main__``) calls main.

The top of the package: may import every part; nothing in the package imports it.
"""
