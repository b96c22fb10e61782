"""The MPI library mpi4py loads, as MPI_Get_library_version describes it (pure: reads text)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import FrozenSet, Optional


#: The srun --mpi plugin each family's MPI_Init works under (Debian's Open MPI: PMIx only).
PLUGIN_OF_FAMILY = {"openmpi": "pmix", "mpich": "pmi2", "intel": "pmi2", "mvapich": "pmi2"}


@dataclass(frozen=True)
class MpiLibrary:
    """The MPI library mpi4py loads (readable before MPI_Init); ``components``: Open MPI's
    PMIx components found beside it ('ext3x', 's2')."""

    version: str
    components: FrozenSet[str] = frozenset()

    @property
    def family(self) -> Optional[str]:
        """Returns 'openmpi', 'intel', 'mvapich', 'mpich' or None."""
        text = self.version
        if "Open MPI" in text:
            return "openmpi"
        if "Intel(R) MPI" in text:
            return "intel"
        if "MVAPICH" in text:
            return "mvapich"
        if text.startswith("MPICH"):
            return "mpich"
        return None

    @property
    def name(self) -> str:
        """Returns the library's name and version: 'MPICH Version: 5.0.2', 'Open MPI v4.1.4'."""
        first = (self.version.strip().splitlines() or ["?"])[0]
        return " ".join(first.split(",", 1)[0].split())

    @property
    def plugin(self) -> Optional[str]:
        """Returns the srun --mpi plugin to advise for this library ('pmix', 'pmi2'), or None."""
        return PLUGIN_OF_FAMILY.get(self.family or "")

    def speaks(self, plugin: str) -> Optional[bool]:
        """Returns whether MPI_Init works under ``srun --mpi=<plugin>`` ('pmix' or 'pmi2'), or
        None where that cannot be told.

        MPICH speaks PMI-2, and PMIx only if configured --with-pmix; Intel MPI both (with the
        system's libpmix); MVAPICH PMI-2; Open MPI PMIx, and PMI-2 only before version 5 and
        with its s2 component (Debian's has none).
        """
        family = self.family
        if family == "mpich":
            return plugin == "pmi2" or "--with-pmix" in self.version
        if family == "intel":
            return True
        if family == "mvapich":
            return True if plugin == "pmi2" else None
        if family == "openmpi":
            if plugin == "pmix":
                return True
            major = re.search(r"Open MPI v([0-9]+)\.", self.version)
            if major is not None and int(major.group(1)) >= 5:
                return False
            return "s2" in self.components if self.components else None
        return None
