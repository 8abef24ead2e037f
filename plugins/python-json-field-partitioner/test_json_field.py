"""Native tests of the Python JSON field partitioner: the shared vectors
(plugins/testdata/json-field-partitioner.json, also run by the Rust and JS
plugins)."""

import json
from pathlib import Path as FilePath

import pytest

import json_field
from sluice_sdk import InvalidParams, Params, Record, murmur2

VECTORS = json.loads(
    (FilePath(__file__).parent / "../testdata/json-field-partitioner.json").read_text())


def bytes_of(record, name):
    if f"{name}_hex" in record:
        return bytes.fromhex(record[f"{name}_hex"])
    text = record.get(name)
    return None if text is None else text.encode()


@pytest.mark.parametrize("case", VECTORS["cases"], ids=lambda c: c["name"])
def test_vectors_place_every_record(case):
    path = json_field.init(Params(case["params"]))
    placed = [json_field.partition(path, Record(bytes_of(r, "key"), bytes_of(r, "value")),
                                   case["partition_count"]) for r in case["records"]]
    assert placed == [r["partition"] for r in case["records"]]


def test_murmur2_matches_kafka():
    for key, expected in VECTORS["murmur2"]:
        assert murmur2(key.encode()) == expected, key


@pytest.mark.parametrize("case", VECTORS["invalid_params"], ids=lambda c: c["name"])
def test_vectors_invalid_params_name_the_parameter(case):
    with pytest.raises(InvalidParams) as error:
        json_field.init(Params(case["params"]))
    assert str(error.value) == case["error"]
