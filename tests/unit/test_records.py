"""_records: a rank's record, as the exchange sends it."""

from __future__ import annotations

from mpi_resolver._records import RankRecord


def test_wire_is_the_json_record_made_once():
    record = RankRecord(rank=3, size=4, host="node2", launcher="1", visible=("0", "1"), probed=2)
    first = record.wire
    assert first == record.to_json().encode()
    assert record.wire is first  # cached: each rank serialises its record once
    assert RankRecord.from_json(first.decode()) == record
