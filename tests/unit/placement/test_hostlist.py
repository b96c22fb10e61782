"""Slurm's hostlist and tasks-per-node grammars: tables of inputs and their exact expansions."""

from __future__ import annotations

import re
import tracemalloc

import pytest

from mpi_resolver.placement import hostlist
from mpi_resolver.core.errors import FormatError, ResolutionError
from mpi_resolver.placement.hostlist import MAX_HOSTS, expand_hostlist, expand_tasks_per_node

pytestmark = pytest.mark.unit


# --------------------------------------------------------------------------------------------
# expand_hostlist: valid lists
# --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("text, expected", [
    # TensorFlow's own cases (slurm_cluster_resolver_test.py, test_expand_hostlist).
    pytest.param("n1", ["n1"], id="tf: a single name is itself"),
    pytest.param("n[1,3]", ["n1", "n3"], id="tf: a bracket list gives each item"),
    pytest.param("n[1-3]", ["n1", "n2", "n3"], id="tf: a bracket range gives every number"),
    pytest.param("n[1-2],m5,o[3-4,6,7-9]",
                 ["n1", "n2", "m5", "o3", "o4", "o6", "o7", "o8", "o9"],
                 id="tf: ranges, lists and plain names mix"),
    pytest.param("n[0001-0003],m5,o[009-011]",
                 ["n0001", "n0002", "n0003", "m5", "o009", "o010", "o011"],
                 id="tf: zero padding is kept across a carry"),
    # Our own cases.
    pytest.param("node-01.cluster_a", ["node-01.cluster_a"],
                 id="a name with dots, dashes and underscores is kept whole"),
    pytest.param("a,b,c", ["a", "b", "c"], id="several comma parts keep their order"),
    pytest.param("n[08-11]", ["n08", "n09", "n10", "n11"],
                 id="zero padding is kept for 08 to 11"),
    pytest.param("n[1-010]", ["n1", "n2", "n3", "n4", "n5", "n6", "n7", "n8", "n9", "n10"],
                 id="the width comes from the low end, not the padded high end"),
    pytest.param("n[01-2]", ["n01", "n02"], id="a padded low end pads the whole range"),
    pytest.param("n[7]", ["n7"], id="a one-item group gives one name"),
    pytest.param("n[5-5]", ["n5"], id="a range of one number gives one name"),
    pytest.param("n1[2-3]", ["n12", "n13"], id="a prefix ending in a digit is kept"),
    pytest.param("rack[1-2]-n[01-02]", ["rack1-n01", "rack1-n02", "rack2-n01", "rack2-n02"],
                 id="two bracket groups: the first varies slowest"),
    pytest.param("n[1-2][3-4]", ["n13", "n14", "n23", "n24"],
                 id="two adjacent bracket groups combine every pair"),
    pytest.param("a[1-2]b[3]", ["a1b3", "a2b3"], id="text between groups is kept"),
    pytest.param("r[1-2]c[1-2]n[1-2]",
                 ["r1c1n1", "r1c1n2", "r1c2n1", "r1c2n2",
                  "r2c1n1", "r2c1n2", "r2c2n1", "r2c2n2"],
                 id="three bracket groups expand as nested loops"),
    pytest.param("n1,n1", ["n1", "n1"], id="a repeated name is kept twice"),
    pytest.param("n[1-3,2]", ["n1", "n2", "n3", "n2"],
                 id="a number repeated inside a group is kept in order"),
    pytest.param("m[2-3],n1,m[1-2]", ["m2", "m3", "n1", "m1", "m2"],
                 id="the list order is kept, not sorted"),
])
def test_expand_hostlist_gives_every_name_in_order(text, expected):
    assert expand_hostlist(text) == expected


# --------------------------------------------------------------------------------------------
# expand_hostlist: malformed lists
# --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("text, fragment", [
    pytest.param("", "empty", id="an empty string is refused"),
    pytest.param("n[3-1]", "reversed range '3-1'", id="a reversed range is refused"),
    pytest.param("n[1-3", "never closed", id="an unclosed bracket is refused"),
    pytest.param("n1]", "']' without '['", id="a closing bracket without an opening one"),
    pytest.param("n[1-2]]", "']' without '['", id="an extra closing bracket is refused"),
    pytest.param("n[[1]]", "nested", id="nested brackets are refused"),
    pytest.param("n[]", "bad range ''", id="an empty group is refused"),
    pytest.param("n[1,]", "bad range ''", id="an empty item inside a group is refused"),
    pytest.param("n[a-b]", "bad range 'a-b'", id="letters in a range are refused"),
    pytest.param("n[1--2]", "bad range '1--2'", id="a double dash is refused"),
    pytest.param("n[-2]", "bad range '-2'", id="a range without a low end is refused"),
    pytest.param("n[2-]", "bad range '2-'", id="a range without a high end is refused"),
    pytest.param("n[１-2]", "bad range", id="non-ASCII digits in a range are refused"),
    pytest.param("a[1-2]b", "'b' follows the last ']'",
                 id="text after the last group is refused as Slurm does"),
    pytest.param("n[1-2]:x", "follows the last ']'",
                 id="a port-like suffix after the last group is refused"),
    pytest.param("n1,,n2", "empty element", id="an empty element between commas is refused"),
    pytest.param(",n1", "empty element", id="a leading comma is refused"),
    pytest.param("n1,", "empty element", id="a trailing comma is refused"),
    pytest.param("n 1", "contains ' '", id="a space inside a name is refused"),
    pytest.param("n1, n2", "contains ' '", id="a space after a comma is refused"),
    pytest.param("n\t1", "contains '\\t'", id="a tab inside a name is refused"),
    pytest.param("n1\n", "contains '\\n'", id="a trailing newline is refused"),
    pytest.param("n\x001", "contains '\\x00'", id="a NUL byte is refused"),
    pytest.param("host:8888", "contains ':'", id="a colon (host:port) is refused"),
    pytest.param("a:b[1-2]", "contains ':'", id="a colon before a group is refused"),
    pytest.param("a[1]:[2]", "contains ':'", id="a colon between groups is refused"),
    pytest.param("nöde1", "contains 'ö'", id="a non-ASCII letter is refused"),
])
def test_expand_hostlist_refuses_malformed_lists(text, fragment):
    with pytest.raises(FormatError, match="hostlist") as excinfo:
        expand_hostlist(text)
    assert fragment in str(excinfo.value)
    if text:  # every message quotes the whole list first, whichever element is wrong
        assert str(excinfo.value).startswith(f"hostlist {text!r}"), excinfo.value


@pytest.mark.parametrize("value", [
    pytest.param(None, id="None is refused"),
    pytest.param(b"n1", id="bytes are refused"),
    pytest.param(["n1"], id="a list is refused"),
])
def test_expand_hostlist_refuses_what_is_not_a_string(value):
    with pytest.raises(FormatError, match="hostlist must be a string"):
        expand_hostlist(value)


def test_format_error_is_a_resolution_error_and_a_value_error():
    with pytest.raises(ResolutionError):
        expand_hostlist("n[3-1]")
    with pytest.raises(ValueError):
        expand_hostlist("n[3-1]")


@pytest.mark.parametrize("text", [
    pytest.param("n[0-999999999999]", id="one range of a trillion hosts"),
    pytest.param("n[0-999999][0-999999]", id="two groups whose product is a trillion"),
    pytest.param("a[0-1048575],b[0-1048575]", id="two parts that together pass the limit"),
])
def test_expand_hostlist_refuses_more_than_max_hosts_before_building_any(text):
    tracemalloc.start()
    try:
        with pytest.raises(FormatError, match=re.escape(f"{MAX_HOSTS}")):
            expand_hostlist(text)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 1 << 20  # bytes: no list of a million names was built first


@pytest.mark.parametrize("text, ok", [
    pytest.param("n[1-10]", True, id="a range of exactly the limit is accepted"),
    pytest.param("n[1-11]", False, id="a range one above the limit is refused"),
    pytest.param("n[1-5][1-2]", True, id="a product of exactly the limit is accepted"),
    pytest.param("n[1-4][1-3]", False, id="a product above the limit is refused"),
    pytest.param("n[1-5],m[1-5]", True, id="parts adding up to the limit are accepted"),
    pytest.param("n[1-5],m[1-6]", False, id="parts adding up above the limit are refused"),
    pytest.param("n[1-5,1-6]", False, id="items of one group adding up above the limit"),
    pytest.param(",".join(f"h{i}" for i in range(10)), True,
                 id="ten plain names are accepted"),
    pytest.param(",".join(f"h{i}" for i in range(11)), False,
                 id="eleven plain names are refused"),
])
def test_max_hosts_limits_the_whole_list(monkeypatch, text, ok):
    monkeypatch.setattr(hostlist, "MAX_HOSTS", 10)
    if ok:
        assert len(expand_hostlist(text)) == 10
    else:
        with pytest.raises(FormatError, match="MAX_HOSTS"):
            expand_hostlist(text)


def test_a_huge_number_in_a_range_is_a_format_error():
    with pytest.raises(FormatError, match="hostlist"):
        expand_hostlist("n[" + "1" * 5000 + "]")


D18, D19 = "0" * 17 + "8", "0" * 18 + "8"  # 18 and 19 digits, both worth 8


@pytest.mark.parametrize("text, expected", [
    pytest.param(f"n[{D18}]", [f"n{D18}"], id="18 digits"),
    pytest.param(f"n[7-{D18}]", ["n7", "n8"], id="18 digits at the high end"),
])
def test_numbers_of_18_digits_are_read(text, expected):
    assert expand_hostlist(text) == expected


@pytest.mark.parametrize("text", [
    pytest.param(f"n[{D19}]", id="19 digits"),
    pytest.param(f"n[{D19}-{D19}]", id="19 digits at both ends"),
    pytest.param(f"n[7-{D19}]", id="19 digits at the high end"),
])
def test_numbers_of_19_digits_are_refused(text):
    with pytest.raises(FormatError) as excinfo:
        expand_hostlist(text)
    assert "has more than 18 digits" in str(excinfo.value)


# --------------------------------------------------------------------------------------------
# expand_tasks_per_node
# --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("text, expected", [
    # TensorFlow's own cases (slurm_cluster_resolver_test.py, test_expand_tasks_per_node).
    pytest.param("2", [2], id="tf: one count"),
    pytest.param("2,1,3", [2, 1, 3], id="tf: plain counts keep their order"),
    pytest.param("3(x2),2,1", [3, 3, 2, 1], id="tf: a repeat then plain counts"),
    pytest.param("3(x2),2,11(x4)", [3, 3, 2, 11, 11, 11, 11], id="tf: two-digit counts repeat"),
    pytest.param("13(x10)", [13] * 10, id="tf: a two-digit repeat count"),
    # Our own cases.
    pytest.param("1(x1)", [1], id="a repeat of one is one entry"),
    pytest.param("0", [0], id="a zero count is the grammar's business, not refused here"),
    pytest.param("007", [7], id="leading zeros are read as decimal"),
])
def test_expand_tasks_per_node_gives_one_count_per_node(text, expected):
    assert expand_tasks_per_node(text) == expected


@pytest.mark.parametrize("text, fragment", [
    pytest.param("", "empty", id="an empty string is refused"),
    pytest.param("3(x0)", "repeats 0 times", id="a repeat count of zero is refused"),
    pytest.param("x", "bad element 'x'", id="a letter is refused"),
    pytest.param("3(2)", "bad element '3(2)'", id="a repeat without x is refused"),
    pytest.param("-1", "bad element '-1'", id="a negative count is refused"),
    pytest.param("1,,2", "bad element ''", id="an empty element is refused"),
    pytest.param("3(x2", "bad element '3(x2'", id="an unclosed repeat is refused"),
    pytest.param("3(x2))", "bad element", id="an extra parenthesis is refused"),
    pytest.param("３", "bad element '３'", id="a full-width digit is refused"),
    pytest.param("2 ,1", "bad element '2 '", id="a space is refused"),
    pytest.param("1.5", "bad element '1.5'", id="a fraction is refused"),
])
def test_expand_tasks_per_node_refuses_malformed_lists(text, fragment):
    with pytest.raises(FormatError, match="tasks-per-node") as excinfo:
        expand_tasks_per_node(text)
    assert fragment in str(excinfo.value)


def test_expand_tasks_per_node_refuses_what_is_not_a_string():
    with pytest.raises(FormatError, match="tasks-per-node list must be a string"):
        expand_tasks_per_node(3)


@pytest.mark.parametrize("text, ok", [
    pytest.param("1(x10)", True, id="a repeat of exactly the limit is accepted"),
    pytest.param("1(x11)", False, id="a repeat above the limit is refused"),
    pytest.param("1(x5),2(x6)", False, id="repeats adding up above the limit are refused"),
])
def test_max_hosts_limits_the_tasks_per_node_list(monkeypatch, text, ok):
    monkeypatch.setattr(hostlist, "MAX_HOSTS", 10)
    if ok:
        assert len(expand_tasks_per_node(text)) == 10
    else:
        with pytest.raises(FormatError, match="MAX_HOSTS"):
            expand_tasks_per_node(text)


def test_a_huge_repeat_count_is_refused_before_building_the_list():
    tracemalloc.start()
    try:
        with pytest.raises(FormatError, match="tasks-per-node"):
            expand_tasks_per_node("1(x999999999999)")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 1 << 20  # bytes


def test_a_huge_number_in_tasks_per_node_is_a_format_error():
    with pytest.raises(FormatError, match="tasks-per-node"):
        expand_tasks_per_node("1" * 5000)


@pytest.mark.parametrize("text, expected", [
    pytest.param(D18, [8], id="18 digits"), pytest.param(f"2(x{D18})", [2] * 8, id="repeat")])
def test_tasks_per_node_numbers_of_18_digits_are_read(text, expected):
    assert expand_tasks_per_node(text) == expected


@pytest.mark.parametrize("text", [D19, f"2(x{D19})", f"{D19}(x2)"])
def test_tasks_per_node_numbers_of_19_digits_are_refused(text):
    with pytest.raises(FormatError) as excinfo:
        expand_tasks_per_node(text)
    assert "has more than 18 digits" in str(excinfo.value)
