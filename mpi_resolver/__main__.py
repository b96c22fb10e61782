"""python -m mpi_resolver: the same as the mpi-resolver command."""

import sys

from mpi_resolver.cli.main import main

sys.exit(main())
