"""python -m mpi_resolver: the same as the mpi-resolver command."""

import sys

from ._cli import main

sys.exit(main())
