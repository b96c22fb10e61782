"""Properties of the hostlist grammar: it fails only with FormatError, and agrees with Slurm.

The agreement test runs Debian's ``scontrol show hostnames`` (no daemon needed, only a
slurm.conf, which a temporary directory provides through SLURM_CONF for that process only).
"""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from mpi_resolver.core.errors import FormatError
from mpi_resolver.placement.hostlist import expand_hostlist, expand_tasks_per_node

pytestmark = pytest.mark.unit

_GRAMMAR_CHARS = "[],-()x0123456789ab "

#: Text rich in the grammars' own characters, with arbitrary characters mixed in.
noisy_text = st.text(
    alphabet=st.one_of(st.sampled_from(_GRAMMAR_CHARS), st.sampled_from(_GRAMMAR_CHARS),
                       st.characters()),
    max_size=40)


@settings(max_examples=500, deadline=None, database=None)
@given(text=noisy_text)
@example(text="n[3-1]")
@example(text="n[0-999999999999]")
@example(text="3(x0)")
def test_expand_hostlist_fails_only_with_format_error(text):
    try:
        hosts = expand_hostlist(text)
    except FormatError:
        return
    assert hosts, "a list that parses names at least one host"
    for host in hosts:
        assert isinstance(host, str) and host
        assert ":" not in host and not any(c.isspace() for c in host)


@settings(max_examples=500, deadline=None, database=None)
@given(text=noisy_text)
@example(text="3(x2),1")
@example(text="1(x999999999999)")
def test_expand_tasks_per_node_fails_only_with_format_error(text):
    try:
        counts = expand_tasks_per_node(text)
    except FormatError:
        return
    assert counts and all(isinstance(n, int) and n >= 0 for n in counts)


# --------------------------------------------------------------------------------------------
# Agreement with Slurm's own parser
# --------------------------------------------------------------------------------------------

_LOWER = "abcdefghijklmnopqrstuvwxyz"
_DIGITS = "0123456789"


@st.composite
def _number(draw, low=0, high=40):
    """A number as Slurm writes it in a range: possibly zero-padded."""
    value = draw(st.integers(low, high))
    width = draw(st.integers(1, 4))
    return value, str(value).zfill(width)


@st.composite
def _range_item(draw):
    """``N`` or ``N-M`` with M >= N, each end possibly zero-padded."""
    lo, lo_text = draw(_number())
    if draw(st.booleans()):
        return lo_text
    hi, hi_text = draw(_number(lo, lo + 6))
    return f"{lo_text}-{hi_text}"


@st.composite
def _part(draw):
    """One comma part: a prefix and 0-2 bracket groups, text allowed between groups only."""
    prefix = draw(st.sampled_from(_LOWER)) + draw(
        st.text(alphabet=_LOWER + _DIGITS + "-", max_size=5))
    text = prefix
    groups = draw(st.integers(0, 2))
    for g in range(groups):
        if g:
            text += draw(st.text(alphabet=_LOWER + _DIGITS + "-", max_size=3))
        items = draw(st.lists(_range_item(), min_size=1, max_size=3))
        text += "[" + ",".join(items) + "]"
    return text


valid_hostlists = st.lists(_part(), min_size=1, max_size=4).map(",".join)


@pytest.fixture(scope="module")
def scontrol_env(tmp_path_factory):
    """The environment for a throw-away ``scontrol``: SLURM_CONF names a minimal slurm.conf."""
    scontrol = shutil.which("scontrol")
    if scontrol is None:
        pytest.skip("scontrol is not installed (Debian package slurm-client / slurm-wlm)")
    conf_dir = tmp_path_factory.mktemp("slurm-conf")
    conf = conf_dir / "slurm.conf"
    conf.write_text("ClusterName=x\nSlurmctldHost=localhost\nNodeName=n1 CPUs=1\n"
                    "PartitionName=p Nodes=n1\n")
    env = dict(os.environ, SLURM_CONF=str(conf))
    return scontrol, env


def _slurm_hostnames(scontrol_env, text):
    scontrol, env = scontrol_env
    proc = subprocess.run([scontrol, "show", "hostnames", text], capture_output=True,
                          text=True, env=env, timeout=30, check=False)
    assert proc.returncode == 0 and "Invalid" not in proc.stdout + proc.stderr, (
        f"scontrol refused {text!r}: {proc.stdout!r} {proc.stderr!r}")
    return proc.stdout.split()


def test_scontrol_reference_works(scontrol_env):
    assert _slurm_hostnames(scontrol_env, "rack[1-2]-n[01-02]") == [
        "rack1-n01", "rack1-n02", "rack2-n01", "rack2-n02"]


@settings(max_examples=300, deadline=None, database=None)
@given(text=valid_hostlists)
@example(text="n[1-010]")
@example(text="n[01-2]")
@example(text="n[1-3,2],n1")
@example(text="rack[1-2]-n[01-02]")
@example(text="n[1-2][3-4]")
@example(text="n[0001-0003],m5,o[009-011]")
def test_expand_hostlist_agrees_with_scontrol(scontrol_env, text):
    assert expand_hostlist(text) == _slurm_hostnames(scontrol_env, text)
