"""_gpu_counts: how many GPUs each task takes, and the one number every worker takes (pure)."""

from __future__ import annotations

import pytest

from mpi_resolver.core.errors import ResolutionError
from mpi_resolver.gpus.counts import (NO_LIMIT, divided_fit, even_count, group_lists,
                                      job_counts, share_count)

pytestmark = pytest.mark.unit

FOUR = ("0", "1", "2", "3")


@pytest.mark.parametrize("m, ranks, count", [
    (0, 1, 0), (0, 3, 0), (1, 2, 1), (2, 3, 2), (2, 2, 1), (3, 2, 1), (4, 2, 2), (5, 1, 5)])
def test_share_count_is_an_equal_part_where_there_are_enough_else_all(m, ranks, count):
    assert share_count(m, ranks) == count


@pytest.mark.parametrize("by_list, fit", [
    pytest.param({FOUR: [0, 1]}, 2, id="4 for 2"),
    pytest.param({FOUR: [0, 1, 2, 3]}, 1, id="4 for 4"),
    pytest.param({("0",): [0]}, 1, id="1 for 1"),
    pytest.param({("0",): [0, 1]}, NO_LIMIT, id="fewer GPUs than ranks: no fit"),
    pytest.param({(): []}, NO_LIMIT, id="no ranks"),
    pytest.param({("0",): [0], ("1",): [1]}, NO_LIMIT, id="two lists: not divided"),
])
def test_divided_fit(by_list, fit):
    assert divided_fit(by_list) == fit


def test_counts_text_names_three_hosts_then_how_many_more_and_ranges():
    lists = {"c1": [()], "c2": [()], "c3": [()], "g1": [("0",), ("1", "2")]}
    with pytest.raises(ResolutionError) as caught:
        even_count({h: group_lists(p) for h, p in lists.items()}, None)
    assert str(caught.value).startswith(
        "workers would get different numbers of GPUs: 0 GPU(s) per task on c1, c2, c3; 1 to 2 "
        "GPU(s) per task on g1. ")  # three hosts: no "and 0 more"; g1's ranks differ


@pytest.mark.parametrize("lists, counts", [
    pytest.param({"a": [FOUR] * 2, "b": [("0",)] * 2}, (1, 2),
                 id="2 each on a, the one shared on b"),
    pytest.param({"a": [("0",), ()]}, (0, 1), id="a rank without"),
    pytest.param({}, (0, 0), id="no ranks"),
])
def test_job_counts_are_the_fewest_and_most(lists, counts):
    assert job_counts({h: group_lists(p) for h, p in lists.items()}) == counts


@pytest.mark.parametrize("counts, expected", [
    pytest.param((1, 3), 1, id="the fewest"),
    pytest.param((0, 0), 0, id="none anywhere: 0"),
    pytest.param((2, 2), 2, id="alike"),
])
def test_even_count_is_the_fewest_where_no_rank_is_left_without(counts, expected):
    assert even_count({"a": group_lists([FOUR])}, counts) == expected


def test_even_count_from_the_lists_themselves():
    assert even_count({"a": group_lists([FOUR] * 2), "b": group_lists([FOUR] * 4)}, None) == 1
