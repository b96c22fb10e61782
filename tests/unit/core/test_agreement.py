"""_agreement: what the exchange's two reductions carry and what every rank reads from them.
Each case reduces (element-wise minimum, as MPI's MIN) the reports of a few ranks."""

from __future__ import annotations

from dataclasses import replace
from typing import List, Sequence

import pytest

from mpi_resolver.core.agreement import (PLANS, FirstAgreement, FirstReport, SecondAgreement,
                                     SecondReport, plan_code)

pytestmark = pytest.mark.unit

WELL = FirstReport(plan=1, step=0xABC, own_checks_ok=True, no_error=True, placed=True,
                   picked_port=True, aimed_base=20000)


def reduce_min(vectors: Sequence[List[int]]) -> List[int]:
    return [min(column) for column in zip(*vectors, strict=True)]


def first(*reports: FirstReport) -> FirstAgreement:
    return FirstAgreement.from_agreed(reduce_min([r.to_vector() for r in reports]))


def test_plans_are_numbered_and_an_unknown_one_gets_a_number_of_its_own():
    assert [plan_code(p) for p in PLANS] == [0, 1, 2, 3]
    assert plan_code(None) == plan_code("other") == len(PLANS)


def test_ranks_alike_agree_on_everything():
    agreed = first(WELL, WELL, WELL)
    assert agreed.all_well and agreed.slurm_placement_holds and agreed.base == 20000


@pytest.mark.parametrize("change, field", [
    pytest.param(dict(plan=2), "same_plan", id="another plan"),
    pytest.param(dict(step=0xABD), "same_step", id="another step"),
    pytest.param(dict(step=-1), "same_step", id="not in the step"),
    pytest.param(dict(own_checks_ok=False), "all_checks_ok", id="a failed own check"),
    pytest.param(dict(no_error=False), "no_errors", id="an error"),
    pytest.param(dict(picked_port=False, aimed_base=-1), "same_port_picking",
                 id="one rank with a fixed port"),
])
def test_one_rank_that_differs_spoils_all_well_for_every_rank(change, field):
    agreed = first(WELL, replace(WELL, **change), WELL)
    assert getattr(agreed, field) is False
    assert agreed.all_well is False
    assert getattr(first(WELL, WELL), field) is True  # the other side


@pytest.mark.parametrize("bases, base", [
    pytest.param([20000, 20000], 20000, id="one base"),
    pytest.param([20000, 20001], None, id="two bases: none"),
    pytest.param([-1, -1], None, id="no rank aimed: none"),
    pytest.param([0, 0], 0, id="0 is a base (the sign pairs keep it)"),
])
def test_the_base_is_the_one_every_rank_aimed_at(bases, base):
    assert first(*[replace(WELL, aimed_base=b) for b in bases]).base == base


def test_slurm_placement_holds_only_where_it_holds_on_every_rank():
    assert first(WELL, replace(WELL, placed=False)).slurm_placement_holds is False
    assert first(WELL, replace(WELL, placed=False)).all_well is True  # not a disagreement


@pytest.mark.parametrize("reports, expected", [
    pytest.param([(2, True, True, True), (1, True, True, True)],
                 SecondAgreement(per_task=1, nodes_ok=True, names_own=True, all_aimed=True),
                 id="the smallest GPUs per task"),
    pytest.param([(1, False, True, True), (1, True, True, True)],
                 SecondAgreement(per_task=1, nodes_ok=False, names_own=True, all_aimed=True),
                 id="a node not ok"),
    pytest.param([(1, True, False, True), (1, True, True, True)],
                 SecondAgreement(per_task=1, nodes_ok=True, names_own=False, all_aimed=True),
                 id="a host name shared by a hash"),
    pytest.param([(1, True, True, False), (1, True, True, True)],
                 SecondAgreement(per_task=1, nodes_ok=True, names_own=True, all_aimed=False),
                 id="a rank that moved to another port"),
])
def test_second_agreement(reports, expected):
    vectors = [SecondReport(per_task=p, node_ok=n, own_name=o, aimed=a).to_vector()
               for p, n, o, a in reports]
    assert SecondAgreement.from_agreed(reduce_min(vectors)) == expected


def test_reports_are_built_by_keyword_only():
    with pytest.raises(TypeError):
        FirstReport(1, 2, True, True, True, True)  # type: ignore[misc]
