"""Native tests of the Python JSON filter: the shared vectors
(plugins/testdata/json-filter.json, also run by the Rust and JS plugins),
then the export class on a columnar batch as the host sends it."""

import json
from pathlib import Path as FilePath

import pytest

from json_filter import Predicate, keep
from sluice_sdk import InvalidParams, Params, Record

VECTORS = json.loads((FilePath(__file__).parent / "../testdata/json-filter.json").read_text())


def value_of(record):
    if "value_hex" in record:
        return bytes.fromhex(record["value_hex"])
    return None if record["value"] is None else record["value"].encode()


@pytest.mark.parametrize("case", VECTORS["cases"], ids=lambda c: c["name"])
def test_vectors_keep_the_expected_records(case):
    predicate = Predicate(Params(case["params"]))
    kept = [keep(predicate, Record(value=value_of(r))) for r in case["records"]]
    assert kept == [r["keep"] for r in case["records"]]


@pytest.mark.parametrize("case", VECTORS["invalid_params"], ids=lambda c: c["name"])
def test_vectors_invalid_params_name_the_parameter(case):
    with pytest.raises(InvalidParams) as error:
        Predicate(Params(case["params"]))
    assert str(error.value) == case["error"]


def test_a_plain_call_reads_like_the_view():
    predicate = Predicate(Params({"field": "$.region", "op": "==", "value": '"eu"'}))
    assert keep(predicate, Record(value=b'{"region": "eu"}'))
    assert not keep(predicate, Record(key=b"eu"))
