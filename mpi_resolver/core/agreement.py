"""The exchange's two reductions, named: what each rank puts in, and what the element-wise
minimum over every rank tells all of them alike (pure).

A value that every rank must share goes in twice, as x and -x: the minimum of both gives the
smallest and the largest value, which are equal exactly where every rank sent the same. A
flag goes in once (1 or 0): its minimum is 1 exactly where every rank set it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import List, Optional, Sequence

#: The plans a rank may follow (Plan.uses), numbered for the first reduction.
PLANS = ("slurm", "slurm+check", "mpi", "mpi+check")


def plan_code(uses: Optional[str]) -> int:
    """Returns the number of a plan (an unknown one gets a number of its own)."""
    return PLANS.index(uses) if uses in PLANS else len(PLANS)


def _same(values: Sequence[int], at: int) -> bool:
    """True where every rank sent the same value at ``at`` (the pair x, -x)."""
    return values[at] == -values[at + 1]


@dataclass(frozen=True, kw_only=True)
class FirstReport:
    """What one rank puts into the first reduction."""

    plan: int                 # plan_code(Plan.uses)
    step: int                 # its Slurm step's digest as a number, -1 outside a step
    own_checks_ok: bool       # its own Slurm-against-MPI checks passed (or were not asked for)
    no_error: bool            # it met no error before the exchange
    placed: bool              # Slurm's placement puts it on the host it runs on
    picked_port: bool         # port_base='auto': it picked a port
    aimed_base: int = -1      # the base its picked port aims at, -1 for none

    def to_vector(self) -> List[int]:
        """Returns the vector to reduce (MIN)."""
        picked = int(self.picked_port)
        return [self.plan, -self.plan, self.step, -self.step, int(self.own_checks_ok),
                int(self.no_error), int(self.placed), picked, -picked, self.aimed_base,
                -self.aimed_base]


@dataclass(frozen=True, kw_only=True)
class FirstAgreement:
    """What the first reduction tells every rank alike."""

    same_plan: bool
    same_step: bool
    all_checks_ok: bool
    no_errors: bool
    slurm_placement_holds: bool   # on every rank
    same_port_picking: bool       # all picked ports, or none did
    base: Optional[int]           # the one base all picked ports aim at, else None

    @classmethod
    def from_agreed(cls, agreed: Sequence[int]) -> "FirstAgreement":
        """Returns the agreement read from the reduced FirstReport vector."""
        base = agreed[9] if _same(agreed, 9) and agreed[9] >= 0 else None
        return cls(same_plan=_same(agreed, 0), same_step=_same(agreed, 2),
                   all_checks_ok=agreed[4] == 1, no_errors=agreed[5] == 1,
                   slurm_placement_holds=agreed[6] == 1, same_port_picking=_same(agreed, 7),
                   base=base)

    @property
    def all_well(self) -> bool:
        """True where no rank's record needs to be seen: same plan and step, no failed
        check, no error, and one way of picking ports."""
        return (self.same_plan and self.same_step and self.all_checks_ok and self.no_errors
                and self.same_port_picking)


@dataclass(frozen=True, kw_only=True)
class NodeSummary:
    """What the records of one node say for the second reduction (gpu_resolution)."""

    per_task: int         # the GPUs per task its ranks could divide, or gpu_counts.NO_LIMIT
    fewest: int           # the fewest GPUs a rank of it takes left to itself
    most: int             # the most
    problem: bool         # GPU lists that conflict, or that cannot be given


@dataclass(frozen=True, kw_only=True)
class SecondReport:
    """What one rank puts into the second reduction, after its node's records came."""

    per_task: int         # the GPUs per task its node can divide (or gpu_counts.NO_LIMIT)
    node_ok: bool         # its node's GPU lists neither conflict nor fail to allocate
    own_name: bool        # its host's name is its own (no two names share one hash)
    aimed: bool           # it got the port it aimed at (or picked none)
    fewest: int = 0       # the fewest GPUs a rank of its node takes (NodeSummary)
    most: int = 0         # the most

    def to_vector(self) -> List[int]:
        """Returns the vector to reduce (MIN)."""
        return [self.per_task, int(self.node_ok), int(self.own_name), int(self.aimed),
                self.fewest, -self.most]


@dataclass(frozen=True, kw_only=True)
class SecondAgreement:
    """What the second reduction tells every rank alike."""

    per_task: int         # the job's GPUs per task of divided lists
    nodes_ok: bool
    names_own: bool
    all_aimed: bool
    fewest: int = 0       # the fewest GPUs any rank of the job takes left to itself
    most: int = 0         # the most

    @classmethod
    def from_agreed(cls, agreed: Sequence[int]) -> "SecondAgreement":
        """Returns the agreement read from the reduced SecondReport vector."""
        return cls(per_task=agreed[0], nodes_ok=agreed[1] == 1, names_own=agreed[2] == 1,
                   all_aimed=agreed[3] == 1, fewest=agreed[4], most=-agreed[5])

    @property
    def mixed_gpus(self) -> bool:
        """True where some ranks of the job have GPUs and others none."""
        return self.fewest == 0 < self.most
