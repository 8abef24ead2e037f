from sluice_sdk import Output, Record

from {{module}} import transform


def test_passes_records_through():
    out = Output()
    record = Record(key=b"k", value=b"v", headers=[(b"h", b"1")], timestamp=7)
    transform(record, out)
    assert out.records() == [Record(key=b"k", value=b"v", headers=[(b"h", b"1")], timestamp=7)]
