"""The resolver's arguments: accepted values, and errors that name the argument."""

from __future__ import annotations


import pytest

from mpi_resolver.core.errors import FormatError, ResolutionError
from mpi_resolver.options import Options, make_options, parse_jobs

pytestmark = pytest.mark.unit


def test_make_options_defaults():
    assert make_options() == Options(jobs=None, port_base=8888, gpus_per_node=None,
                                     gpus_per_task=None, tasks_per_node=None, source="auto",
                                     verify="auto", timeout=60.0)


@pytest.mark.parametrize("kwargs, field, expected", [
    pytest.param({"jobs": {"ps": 1, "worker": 3}}, "jobs", {"ps": 1, "worker": 3},
                 id="jobs as a dict of counts"),
    pytest.param({"jobs": {"chief": 1, "worker_2": 2}}, "jobs", {"chief": 1, "worker_2": 2},
                 id="job names may hold digits and underscores after the first letter"),
    pytest.param({"port_base": 1}, "port_base", 1, id="port_base 1 is the lowest"),
    pytest.param({"port_base": 65535}, "port_base", 65535, id="port_base 65535 is the highest"),
    pytest.param({"gpus_per_node": 0}, "gpus_per_node", 0,
                 id="gpus_per_node 0 for CPU-only nodes"),
    pytest.param({"gpus_per_node": 8}, "gpus_per_node", 8, id="gpus_per_node 8"),
    pytest.param({"gpus_per_task": 0}, "gpus_per_task", 0, id="gpus_per_task 0"),
    pytest.param({"gpus_per_task": 2}, "gpus_per_task", 2, id="gpus_per_task 2"),
    pytest.param({"tasks_per_node": 2}, "tasks_per_node", 2, id="tasks_per_node as one count"),
    pytest.param({"tasks_per_node": {"n1": 2, "n2.example.org": 1}}, "tasks_per_node",
                 {"n1": 2, "n2.example.org": 1}, id="tasks_per_node as a dict of host counts"),
    pytest.param({"source": "slurm"}, "source", "slurm", id="source slurm"),
    pytest.param({"source": "mpi"}, "source", "mpi", id="source mpi"),
    pytest.param({"source": "auto"}, "source", "auto", id="source auto"),
    pytest.param({"verify": True}, "verify", True, id="verify True"),
    pytest.param({"verify": False}, "verify", False, id="verify False"),
    pytest.param({"verify": "auto"}, "verify", "auto", id="verify auto"),
    pytest.param({"timeout": 0.5}, "timeout", 0.5, id="timeout a fraction of a second"),
    pytest.param({"timeout": 5}, "timeout", 5.0, id="timeout an int becomes a float"),
])
def test_make_options_accepts(kwargs, field, expected):
    value = getattr(make_options(**kwargs), field)
    assert value == expected
    assert type(value) is type(expected)


@pytest.mark.parametrize("kwargs, name", [
    pytest.param({"jobs": [("worker", 2)]}, "jobs", id="jobs as a list is refused"),
    pytest.param({"jobs": "worker=2"}, "jobs", id="jobs as a string is refused"),
    pytest.param({"jobs": {}}, "jobs", id="jobs empty is refused"),
    pytest.param({"jobs": {"worker": 0}}, "jobs['worker']", id="a job of 0 tasks is refused"),
    pytest.param({"jobs": {"worker": -1}}, "jobs['worker']",
                 id="a job of -1 tasks is refused"),
    pytest.param({"jobs": {"worker": 2.0}}, "jobs['worker']",
                 id="a job count of 2.0 is refused"),
    pytest.param({"jobs": {"worker": "2"}}, "jobs['worker']",
                 id="a job count of '2' is refused"),
    pytest.param({"jobs": {"worker": True}}, "jobs['worker']",
                 id="a job count of True is refused"),
    pytest.param({"jobs": {"": 1}}, "jobs", id="an empty job name is refused"),
    pytest.param({"jobs": {"1x": 1}}, "jobs", id="a job name starting with a digit is refused"),
    pytest.param({"jobs": {"a b": 1}}, "jobs", id="a job name with a space is refused"),
    pytest.param({"jobs": {"a:b": 1}}, "jobs", id="a job name with a colon is refused"),
    pytest.param({"jobs": {1: 1}}, "jobs", id="a job name that is not a string is refused"),
    pytest.param({"port_base": 0}, "port_base", id="port_base 0 is refused"),
    pytest.param({"port_base": 65536}, "port_base", id="port_base 65536 is refused"),
    pytest.param({"port_base": -1}, "port_base", id="port_base -1 is refused"),
    pytest.param({"port_base": "8888"}, "port_base", id="port_base '8888' is refused"),
    pytest.param({"port_base": True}, "port_base", id="port_base True is refused"),
    pytest.param({"port_base": 8888.0}, "port_base", id="port_base 8888.0 is refused"),
    pytest.param({"gpus_per_node": -1}, "gpus_per_node", id="gpus_per_node -1 is refused"),
    pytest.param({"gpus_per_node": "2"}, "gpus_per_node", id="gpus_per_node '2' is refused"),
    pytest.param({"gpus_per_node": False}, "gpus_per_node",
                 id="gpus_per_node False is refused"),
    pytest.param({"gpus_per_task": -1}, "gpus_per_task", id="gpus_per_task -1 is refused"),
    pytest.param({"gpus_per_task": 1.5}, "gpus_per_task", id="gpus_per_task 1.5 is refused"),
    pytest.param({"tasks_per_node": 0}, "tasks_per_node", id="tasks_per_node 0 is refused"),
    pytest.param({"tasks_per_node": True}, "tasks_per_node",
                 id="tasks_per_node True is refused"),
    pytest.param({"tasks_per_node": "2"}, "tasks_per_node",
                 id="tasks_per_node '2' is refused"),
    pytest.param({"tasks_per_node": {}}, "tasks_per_node", id="tasks_per_node {} is refused"),
    pytest.param({"tasks_per_node": {"bad host": 1}}, "tasks_per_node",
                 id="a tasks_per_node host with a space is refused"),
    pytest.param({"tasks_per_node": {"n1:8888": 1}}, "tasks_per_node",
                 id="a tasks_per_node host with a port is refused"),
    pytest.param({"tasks_per_node": {"": 1}}, "tasks_per_node",
                 id="an empty tasks_per_node host is refused"),
    pytest.param({"tasks_per_node": {1: 1}}, "tasks_per_node",
                 id="a tasks_per_node host that is not a string is refused"),
    pytest.param({"tasks_per_node": {"n1": 0}}, "tasks_per_node['n1']",
                 id="a tasks_per_node count of 0 is refused"),
    pytest.param({"tasks_per_node": {"n1": 2, "n2": "1"}}, "tasks_per_node['n2']",
                 id="a tasks_per_node count of '1' is refused"),
    pytest.param({"source": "x"}, "source", id="source 'x' is refused"),
    pytest.param({"source": "SLURM"}, "source", id="source in upper case is refused"),
    pytest.param({"source": None}, "source", id="source None is refused"),
    pytest.param({"verify": "yes"}, "verify", id="verify 'yes' is refused"),
    pytest.param({"verify": 1}, "verify", id="verify 1 is refused"),
    pytest.param({"verify": 0}, "verify", id="verify 0 is refused"),
    pytest.param({"verify": None}, "verify", id="verify None is refused"),
    pytest.param({"verify": "true"}, "verify", id="verify 'true' is refused"),
    pytest.param({"timeout": 0}, "timeout", id="timeout 0 is refused"),
    pytest.param({"timeout": -1}, "timeout", id="timeout -1 is refused"),
    pytest.param({"timeout": float("nan")}, "timeout", id="timeout nan is refused"),
    pytest.param({"timeout": float("inf")}, "timeout", id="timeout inf is refused"),
    pytest.param({"timeout": "5"}, "timeout", id="timeout '5' is refused"),
    pytest.param({"timeout": True}, "timeout", id="timeout True is refused"),
    pytest.param({"timeout": None}, "timeout", id="timeout None is refused"),
])
def test_make_options_refuses_and_names_the_argument(kwargs, name):
    with pytest.raises(ResolutionError) as excinfo:
        make_options(**kwargs)
    assert str(excinfo.value).startswith(name), excinfo.value


@pytest.mark.parametrize("verify", [
    pytest.param(1.0, id="verify 1.0 is refused"),
    pytest.param(0.0, id="verify 0.0 is refused"),
])
def test_make_options_refuses_float_verify(verify):
    with pytest.raises(ResolutionError, match="verify"):
        make_options(verify=verify)


@pytest.mark.parametrize("value, ok", [
    (True, True), (False, True), ("yes", False), (1, False), (None, False)])
def test_uneven_gpus_is_true_or_false(value, ok):
    if ok:
        assert make_options(uneven_gpus=value).uneven_gpus is value
        return
    with pytest.raises(ResolutionError) as excinfo:
        make_options(uneven_gpus=value)
    assert str(excinfo.value) == f"uneven_gpus={value!r}: expected True or False."


# --------------------------------------------------------------------------------------------
# parse_jobs (the command line's --jobs)
# --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("text, expected", [
    pytest.param("ps=1,worker=3", {"ps": 1, "worker": 3}, id="two jobs"),
    pytest.param("worker=4", {"worker": 4}, id="one job"),
    pytest.param(" ps = 1 , worker=3 ", {"ps": 1, "worker": 3},
                 id="spaces around names and counts are dropped"),
    pytest.param("worker=3,ps=1", {"worker": 3, "ps": 1}, id="the order given is kept"),
])
def test_parse_jobs(text, expected):
    result = parse_jobs(text)
    assert result == expected
    assert list(result) == list(expected)


@pytest.mark.parametrize("text, fragment", [
    pytest.param("ps", "bad element 'ps'", id="a name without a count is refused"),
    pytest.param("ps=x", "bad element 'ps=x'", id="a count that is not a number is refused"),
    pytest.param("ps=-1", "bad element 'ps=-1'", id="a negative count is refused"),
    pytest.param("ps=1,ps=2", "'ps' twice", id="a job named twice is refused"),
    pytest.param("=3", "bad element '=3'", id="a count without a name is refused"),
    pytest.param("", "bad element ''", id="an empty list is refused"),
    pytest.param("ps=1,,worker=3", "bad element ''", id="an empty element is refused"),
    pytest.param("a=b=2", "bad element 'a=b=2'", id="two '=' in an element are refused"),
])
def test_parse_jobs_refuses_malformed_lists(text, fragment):
    with pytest.raises(FormatError, match="--jobs") as excinfo:
        parse_jobs(text)
    assert fragment in str(excinfo.value)


def test_parse_jobs_refuses_a_superscript_count():
    with pytest.raises(FormatError, match="--jobs"):
        parse_jobs("ps=²")


@pytest.mark.parametrize("value, ok", [
    ("auto", True), (8888, True), ("AUTO", False), ("8888", False), (0, False), (65536, False)])
def test_options_take_a_port_or_auto(value, ok) -> None:
    if ok:
        assert make_options(port_base=value).port_base == value
    else:
        with pytest.raises(ResolutionError, match=r"port_base=.*1\.\.65535\) or 'auto'"):
            make_options(port_base=value)


@pytest.mark.parametrize("name", ["gpus_per_node", "gpus_per_task"])
def test_gpu_counts_on_both_sides_of_the_limit(name):
    """A node has at most 4096 GPUs: a larger count is a typo that would build a huge list."""
    assert getattr(make_options(**{name: 4096}), name) == 4096
    with pytest.raises(ResolutionError, match=f"{name}=4097: more GPUs than a node can have"):
        make_options(**{name: 4097})


@pytest.mark.parametrize("given, env, port_base, gpus", [
    pytest.param({}, {}, 8888, None, id="nothing: TensorFlow's 8888, GPUs as found"),
    pytest.param({}, {"MPI_RESOLVER_PORT_BASE": "auto", "MPI_RESOLVER_GPUS_PER_NODE": "4"},
                 "auto", 4, id="the variables"),
    pytest.param({}, {"MPI_RESOLVER_PORT_BASE": " 23000 ", "MPI_RESOLVER_GPUS_PER_NODE": "0"},
                 23000, 0, id="blanks around a number"),
    pytest.param({}, {"MPI_RESOLVER_PORT_BASE": "", "MPI_RESOLVER_GPUS_PER_NODE": " "},
                 8888, None, id="empty: not set"),
    pytest.param({"port_base": 9000, "gpus_per_node": 2},
                 {"MPI_RESOLVER_PORT_BASE": "auto", "MPI_RESOLVER_GPUS_PER_NODE": "4"},
                 9000, 2, id="the script's arguments win"),
])
def test_port_base_and_gpus_per_node_from_the_environment(given, env, port_base, gpus):
    opts = make_options(env=env, **given)
    assert (opts.port_base, opts.gpus_per_node) == (port_base, gpus)


@pytest.mark.parametrize("env, words", [
    ({"MPI_RESOLVER_PORT_BASE": "eighty"}, ["MPI_RESOLVER_PORT_BASE='eighty'", "port_base",
                                            "'auto'"]),
    ({"MPI_RESOLVER_PORT_BASE": "70000"}, ["MPI_RESOLVER_PORT_BASE='70000'", "port_base"]),
    ({"MPI_RESOLVER_GPUS_PER_NODE": "-1"}, ["MPI_RESOLVER_GPUS_PER_NODE='-1': gpus_per_node="]),
    ({"MPI_RESOLVER_GPUS_PER_NODE": "two"}, ["MPI_RESOLVER_GPUS_PER_NODE='two': gpus_per_node="]),
])
def test_a_bad_variable_is_named_with_what_it_should_be(env, words):
    with pytest.raises(ResolutionError) as e:
        make_options(env=env)
    assert str(e.value).startswith(words[0]), e.value
    for word in words[1:]:
        assert word in str(e.value)
