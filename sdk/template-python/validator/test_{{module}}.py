from sluice_sdk import Record

from {{module}} import validate


def test_refuses_records_without_a_key():
    assert validate(Record(key=b"k", value=b"v")) is None
    assert validate(Record(value=b"v")) == "a record needs a key"
