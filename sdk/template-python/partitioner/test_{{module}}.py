from sluice_sdk import Record

from {{module}} import partition


def test_same_key_same_partition():
    first = partition(Record(key=b"customer-1"), 12)
    assert first == partition(Record(key=b"customer-1"), 12)
    assert 0 <= first < 12


def test_keyless_records_go_to_partition_0():
    assert partition(Record(value=b"{}"), 12) == 0
