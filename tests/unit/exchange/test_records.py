"""_records: a rank's record, as the exchange sends it."""

from __future__ import annotations

import pytest

from mpi_resolver.core.errors import FormatError
from mpi_resolver.gpus.lists import SlurmGpus
from mpi_resolver.launch.launchers import detect_launch
from mpi_resolver.exchange.records import RECORD_BYTES, RankRecord, local_record, make_record

pytestmark = pytest.mark.unit


def test_wire_is_the_json_record_made_once():
    record = RankRecord(rank=3, size=4, host="node2", launcher="1", visible=("0", "1"), probed=2)
    first = record.wire
    assert first == record.to_json().encode()
    assert record.wire is first  # cached: each rank serialises its record once
    assert RankRecord.from_json(first.decode()) == record


def test_mig_names_from_nvidia_smi_survive_the_wire():
    record = RankRecord(rank=0, size=2, host="node1", launcher="1", probed=("MIG-a", "MIG-b"))
    assert RankRecord.from_json(record.to_json()) == record


def test_a_record_too_long_for_mig_names_drops_them():
    names = tuple(f"MIG-{i:04d}a4f1ef-42e4-5de3-91c7-45d71c87eb3f" for i in range(30))
    record = local_record({}, detect_launch({}), 0, 1, "n1", lambda: (None, names, False))
    assert record.probed is None and "too long" in (record.error or "")
    assert len(record.wire) <= RECORD_BYTES

TASK = {"SLURM_PROCID": "2", "SLURM_STEP_NUM_TASKS": "4", "SLURMD_NODENAME": "n1",
        "SLURM_JOB_ID": "7", "SLURM_STEP_ID": "0", "SLURM_STEP_NODELIST": "n[1-2]",
        "SLURM_STEP_TASKS_PER_NODE": "3,1", "PMIX_RANK": "2", "SLURM_LOCALID": "2",
        "SLURMD_TRES_BIND": "gpu:single:2", "SLURM_GPUS_ON_NODE": "2",
        "SLURM_GPUS_PER_TASK": "1"}


def test_the_json_is_compact_and_has_every_field_in_order():
    record = RankRecord(rank=3, size=4, host="node2", launcher="pmix")
    assert record.to_json() == (
        '{"rank":3,"size":4,"host":"node2","launcher":"pmix","procid":null,"num_tasks":null,'
        '"nodename":null,"step":null,"slurm_ranks":false,"visible":null,"probed":null,'
        '"cpu_only":false,"gpu_bind":null,"gpus_on_node":null,"tasks_per_gpu":null,'
        '"slurm_gpus_per_task":null,"plan":null,"port":null,"error":null}')


@pytest.mark.parametrize("text", ['{"rank": 1', '{"rank": 1, "bogus": 2}', "[1, 2]"])
def test_an_unreadable_record_is_a_format_error_quoting_it(text):
    with pytest.raises(FormatError) as caught:
        RankRecord.from_json(text)
    assert str(caught.value).startswith("a rank sent an unreadable record (")
    assert str(caught.value).endswith(f": {text!r}")


@pytest.mark.parametrize("length, quoted", [
    pytest.param(200, 200, id="200 characters: quoted whole"),
    pytest.param(201, 200, id="201 characters: the first 200 quoted"),
])
def test_an_unreadable_record_is_quoted_up_to_200_characters(length, quoted):
    text = "[" * length  # not JSON
    with pytest.raises(FormatError) as caught:
        RankRecord.from_json(text)
    assert str(caught.value).endswith(f"): {text[:quoted]!r}")


def test_make_record_reads_the_task_s_variables():
    record = make_record(2, 4, "n1", TASK, detect_launch(TASK), ("1",), 8, None, True,
                         "slurm+check", 20001)
    assert record == RankRecord(
        rank=2, size=4, host="n1", launcher="pmix", procid="2", num_tasks="4", nodename="n1",
        step=record.step, slurm_ranks=True, visible=("1",), probed=8, cpu_only=True,
        gpu_bind="single:2", gpus_on_node=2, tasks_per_gpu=2, slurm_gpus_per_task=1,
        plan="slurm+check", port=20001, error=None)
    assert record.step is not None and len(record.step) == 8
    assert record.slurm_gpus() == SlurmGpus(bind="single:2", on_node=2, tasks_per_gpu=2,
                                            per_task=1)
    outside = make_record(0, 1, "h", {}, detect_launch({}), None, None, None)
    assert outside.step is None and outside.slurm_ranks is False and outside.cpu_only is False


def test_local_record_carries_what_discovery_found_or_the_error_it_met():
    found = local_record(TASK, detect_launch(TASK), 2, 4, "n1", lambda: (("1",), 4, False),
                         plan="slurm+check", port=20001)
    assert (found.visible, found.probed, found.cpu_only, found.size, found.port,
            found.error) == (("1",), 4, False, 4, 20001, None)
    cpu = local_record(TASK, detect_launch(TASK), 2, 4, "n1", lambda: (None, 0, True))
    assert cpu.cpu_only is True

    def fails():
        from mpi_resolver.core.errors import ResolutionError
        raise ResolutionError("nvidia-smi failed")

    failed = local_record(TASK, detect_launch(TASK), 2, 4, "n1", fails)
    assert (failed.error, failed.visible, failed.probed, failed.cpu_only) == (
        "nvidia-smi failed", None, None, False)
    given = local_record(TASK, detect_launch(TASK), 2, 4, "n1", lambda: 1 / 0, error="before")
    assert given.error == "before"  # discovery is not even tried


@pytest.mark.parametrize("extra, too_long", [(0, False), (1, True)])
def test_a_record_longer_than_the_exchange_allows_says_so(extra, too_long):
    base = len(local_record({}, detect_launch({}), 0, 1, "h", lambda: (("0",), None, False)).wire)
    host = "h" * (1 + RECORD_BYTES - base + extra)  # a record of 1,024 bytes, then 1,025
    record = local_record({}, detect_launch({}), 0, 1, host, lambda: (("0",), None, False))
    if too_long:
        assert record.visible is None and record.error == (
            f"its record is {RECORD_BYTES + 1} bytes, more than the {RECORD_BYTES} the exchange "
            "allows (CUDA_VISIBLE_DEVICES or nvidia-smi's list of MIG devices too long?); pass "
            "gpus_per_node, or set CUDA_VISIBLE_DEVICES to this task's own GPUs.")
    else:
        assert len(record.wire) == RECORD_BYTES and record.error is None
        assert record.visible == ("0",)
