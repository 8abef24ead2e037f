from sluice_sdk import Record

from {{module}} import keep


def test_keeps_keyed_records_only():
    assert keep(Record(key=b"k", value=b"v"))
    assert not keep(Record(value=b"v"))
