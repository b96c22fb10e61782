"""The address workers dial (address=, --address): the rule's parsing, the names each rule
gives, and the look-ups behind them (injected, and this machine's loopback interface)."""

from __future__ import annotations

import re
import socket

import pytest

from mpi_resolver.network.address_lookup import fqdn_of, interface_ipv4, ipv4_of, names_by_lookup
from mpi_resolver.network.address_names import node_names
from mpi_resolver.placement.addresses import AddressRule, formatted, parse_address, with_names
from mpi_resolver.core.errors import FormatError, ResolutionError
from mpi_resolver.placement.layout import build_layout_runs
from tests.unit.jobs import ThreadWorld, each_rank

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("value, rule", [
    pytest.param("host", AddressRule("host"), id="host"),
    pytest.param("fqdn", AddressRule("fqdn"), id="fqdn"),
    pytest.param("ip", AddressRule("ip"), id="ip"),
    pytest.param("iface:eth0", AddressRule("iface", "eth0"), id="iface:eth0"),
    pytest.param("iface:" + "i" * 15, AddressRule("iface", "i" * 15),
                 id="an interface name of 15 characters"),
    pytest.param("{host}-ib0", AddressRule("format", "{host}-ib0"), id="{host}-ib0"),
    pytest.param("{host}.ib.cluster", AddressRule("format", "{host}.ib.cluster"),
                 id="{host}.ib.cluster"),
    pytest.param("ib-{host}", AddressRule("format", "ib-{host}"), id="a prefix"),
])
def test_parse_address(value, rule):
    assert parse_address(value) == rule
    assert str(rule) == value
    assert parse_address(rule) is rule  # Options' own rule, passed on (check --deep)


@pytest.mark.parametrize("value, fragment", [
    pytest.param("hostname", "address='hostname': expected 'host', 'fqdn', 'ip', 'iface:NAME'",
                 id="a word"),
    pytest.param("node{", "Single '{'", id="an opening brace alone"),
    pytest.param("", "expected 'host'", id="empty"),
    pytest.param(None, "address=None: expected", id="None"),
    pytest.param(4, "address=4: expected", id="a number"),
    pytest.param("iface:", "'' is not a network interface name", id="iface without a name"),
    pytest.param("iface:" + "i" * 16, "is not a network interface name",
                 id="an interface name of 16 characters"),
    pytest.param("iface:eth 0", "is not a network interface name", id="a space in it"),
    pytest.param("{host}-{rank}", "only '{host}' may appear in braces", id="another field"),
    pytest.param("{host!r}", "only '{host}' may appear in braces", id="a conversion"),
    pytest.param("{host:>9}", "only '{host}' may appear in braces", id="a format spec"),
    pytest.param("{host} ib", "contains ' '", id="a space in the name"),
    pytest.param("{host}:ib", "contains ':'", id="a colon in the name"),
    pytest.param("{host}{", "Single '{'", id="an unmatched brace"),
    pytest.param("{}-ib0", "only '{host}' may appear in braces", id="an empty field"),
    pytest.param("node}", "Single '}'", id="a closing brace alone"),
])
def test_a_bad_address_is_a_format_error_naming_it(value, fragment):
    with pytest.raises(FormatError, match=re.escape(fragment)) as excinfo:
        parse_address(value)
    assert "address=" in str(excinfo.value)


def test_formatted_and_with_names():
    assert formatted(AddressRule("format", "{host}-ib0"), "node7") == "node7-ib0"
    assert formatted(AddressRule("host"), "node7") == "node7"
    layout = build_layout_runs([("n1", 2), ("n2", 1)], jobs={"worker": 3}, port_base=8888)
    named = with_names(layout, {"n1": "10.0.0.1", "n2": "10.0.0.2"})
    assert named.addresses == ["10.0.0.1:8888", "10.0.0.1:8889", "10.0.0.2:8888"]
    assert named.placement == ["n1", "n1", "n2"]  # the hosts stay Slurm's names


# ------------------------------------------------------------------------------ look-ups
@pytest.mark.parametrize("answer, expected", [
    pytest.param("node1.cluster.example", "node1.cluster.example", id="a dotted name"),
    pytest.param("node1", None, id="no domain: an error"),
])
def test_fqdn_of(answer, expected):
    if expected is None:
        with pytest.raises(ResolutionError, match="no fully qualified name for 'node1'"):
            fqdn_of("node1", getfqdn=lambda h: answer)
    else:
        assert fqdn_of("node1", getfqdn=lambda h: answer) == expected


def _infos(*addresses):
    return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (a, 0)) for a in addresses]


@pytest.mark.parametrize("infos, expected", [
    pytest.param(_infos("10.0.0.5"), "10.0.0.5", id="one address"),
    pytest.param(_infos("127.0.1.1", "10.0.0.5"), "10.0.0.5", id="loopback first: skipped"),
    pytest.param(_infos("127.0.1.1"), "resolves only to a loopback address (127.0.1.1)",
                 id="loopback alone: an error"),
    pytest.param(socket.gaierror(-2, "Name or service not known"), "does not resolve",
                 id="no answer: an error"),
])
def test_ipv4_of(infos, expected):
    def resolve(*args):
        if isinstance(infos, Exception):
            raise infos
        return infos
    if "." in expected and expected[0].isdigit():
        assert ipv4_of("node1", resolve=resolve) == expected
    else:
        with pytest.raises(ResolutionError, match=re.escape(expected)):
            ipv4_of("node1", resolve=resolve)


def test_interface_ipv4_of_loopback_and_of_no_such_interface():
    assert interface_ipv4("lo", "here") == "127.0.0.1"
    with pytest.raises(ResolutionError, match=r"here has no IPv4 address on interface "
                                              r"'nosuch0'.*its interfaces: .*\blo\b"):
        interface_ipv4("nosuch0", "here")


def test_names_by_lookup_looks_each_host_up_once(monkeypatch):
    asked = []
    monkeypatch.setattr("mpi_resolver.network.address_lookup.fqdn_of",
                        lambda h: asked.append(h) or f"{h}.example")
    assert names_by_lookup("fqdn", ["a", "b", "a"]) == {"a": "a.example", "b": "b.example"}
    assert asked == ["a", "b"]


# ------------------------------------------------------------------------------ node_names
PLACEMENT = ["n1", "n1", "n2"]


def test_node_names_without_mpi():
    rule = AddressRule("format", "{host}-ib0")
    assert node_names(rule, ["n1", "n2"], PLACEMENT, 0, None) == {"n1": "n1-ib0",
                                                                  "n2": "n2-ib0"}
    looked = node_names(AddressRule("ip"), ["n1", "n2"], PLACEMENT, 0, None,
                        lookup=lambda kind, hosts: {h: f"{kind}-{h}" for h in hosts})
    assert looked == {"n1": "ip-n1", "n2": "ip-n2"}
    assert node_names(AddressRule("host"), ["n1", "n2"], PLACEMENT, 0, None) == {
        "n1": "n1", "n2": "n2"}
    with pytest.raises(ResolutionError, match=r"address='iface:ib0' needs MPI"):
        node_names(AddressRule("iface", "ib0"), ["n1", "n2"], PLACEMENT, 0, None)


def _world_names(rule, interface=None, lookup=None):
    world = ThreadWorld(3)
    more = {k: v for k, v in (("interface", interface), ("lookup", lookup)) if v}
    return each_rank(3, lambda r: node_names(rule, ["n1", "n2"], PLACEMENT, r,
                                             lambda: world.transport(r), **more))


def test_iface_gathers_each_node_s_own_address():
    """Each rank says its own node's address; a node's first rank names it."""
    found = _world_names(AddressRule("iface", "ib0"),
                         interface=lambda name, host: {"n1": "10.1.0.1", "n2": "10.1.0.2"}[host])
    assert found == [{"n1": "10.1.0.1", "n2": "10.1.0.2"}] * 3


def test_iface_missing_on_one_node_fails_every_rank_naming_it():
    def interface(name, host):
        if host == "n2":
            raise ResolutionError(f"address='iface:{name}': {host} has no IPv4 address")
        return "10.1.0.1"
    found = _world_names(AddressRule("iface", "ib0"), interface=interface)
    assert [str(e) for e in found] == [
        "rank 2: address='iface:ib0': n2 has no IPv4 address"] * 3


def test_lookups_that_differ_between_ranks_are_an_error():
    answers = iter([{"n1": "10.0.0.1"}, {"n1": "10.0.0.1"}, {"n1": "10.9.9.9"}])
    found = _world_names(AddressRule("ip"), lookup=lambda kind, hosts: next(answers))
    assert all(isinstance(e, ResolutionError) and str(e).startswith(
        "address='ip': the ranks' name service gave them different answers") for e in found), \
        found


def test_lookups_that_agree_pass():
    found = _world_names(AddressRule("fqdn"),
                         lookup=lambda kind, hosts: {h: f"{h}.example" for h in hosts})
    assert found == [{"n1": "n1.example", "n2": "n2.example"}] * 3


def test_make_options_names_a_bad_address():
    from mpi_resolver.options import make_options

    with pytest.raises(FormatError, match="address='ib0'"):
        make_options(address="ib0")


@pytest.mark.parametrize("address, expected", [
    pytest.param("host", ["node1:8888", "node1:8889", "node2:8888"], id="host: Slurm's names"),
    pytest.param("{host}-ib0", ["node1-ib0:8888", "node1-ib0:8889", "node2-ib0:8888"],
                 id="{host}-ib0"),
])
def test_the_cluster_spec_carries_the_chosen_address(address, expected):
    from tests.unit.jobs import run_job, srun_env

    placement = ["node1", "node1", "node2"]
    envs = [srun_env(r, ["node1", "node2"], [2, 1], placement) for r in range(3)]
    for rank in range(3):
        res = run_job(envs, placement, rank=rank, address=address)
        assert res.cluster() == {"worker": expected}
        assert res.layout.host_of(rank)[0] == placement[rank]


def test_iface_through_the_resolution_over_mpi():
    """address='iface:lo': each rank's own loopback address, gathered over the exchange."""
    from tests.unit.jobs import run_job, srun_env

    placement = ["node1", "node1", "node2"]
    envs = [srun_env(r, ["node1", "node2"], [2, 1], placement) for r in range(3)]
    for rank in range(3):
        res = run_job(envs, placement, rank=rank, address="iface:lo")
        assert res.cluster() == {"worker": ["127.0.0.1:8888", "127.0.0.1:8889",
                                            "127.0.0.1:8888"]}
