"""Native tests of the Python JSON validator: the shared vectors
(plugins/testdata/json-validator.json, also run by the Rust and JS plugins),
then what the SDK makes of a validator's answers."""

import json
from pathlib import Path as FilePath

import pytest

from json_validator import Schema, validate
from sluice_sdk import (JSON_FAST_CHECK_BYTES_MAX, InvalidParams, NotJson, Params, Record,
                        check_json, refusal, walk_json)

VECTORS = json.loads((FilePath(__file__).parent / "../testdata/json-validator.json").read_text())


def value_of(record):
    if "value_hex" in record:
        return bytes.fromhex(record["value_hex"])
    return None if record["value"] is None else record["value"].encode()


@pytest.mark.parametrize("case", VECTORS["cases"], ids=lambda c: c["name"])
def test_vectors_refuse_the_expected_records_with_the_expected_reasons(case):
    schema = Schema(Params(case["params"]))
    reasons = [validate(schema, Record(value=value_of(r))) for r in case["records"]]
    assert reasons == [r["reason"] for r in case["records"]]


@pytest.mark.parametrize("case", VECTORS["invalid_params"], ids=lambda c: c["name"])
def test_vectors_invalid_params_name_the_parameter(case):
    with pytest.raises(InvalidParams) as error:
        Schema(Params(case["params"]))
    assert str(error.value) == case["error"]


def answer(check, doc: bytes) -> str:
    try:
        return check(doc)
    except NotJson as e:
        return str(e)


def test_the_walk_alone_gives_the_same_answers_as_the_parser_first():
    # check_json accepts through the json module when it can; documents over
    # JSON_FAST_CHECK_BYTES_MAX are only walked, so the walk must accept them too.
    for case in VECTORS["cases"]:
        for r in case["records"]:
            doc = value_of(r)
            if doc is not None:
                assert answer(walk_json, doc) == answer(check_json, doc), (case["name"], doc[:80])


def test_documents_over_the_fast_check_size_are_walked():
    items = b",".join(rb'{"n": %d, "s": "caf\u00e9"}' % i for i in range(4000))
    doc = b'{"items": [' + items + b"]}"
    assert len(doc) > JSON_FAST_CHECK_BYTES_MAX
    schema = Schema(Params({"types": "$.items:array"}))
    assert validate(schema, Record(value=doc)) is None
    assert validate(schema, Record(value=doc[:-1])) == f"not JSON: expected `,` or the end of the container at byte {len(doc) - 1}"


def test_a_plain_call_reads_like_the_schema():
    schema = Schema(Params({"required": "$.id", "types": "$.id:number"}))
    assert validate(schema, Record(value=b'{"id": 7}')) is None
    assert validate(schema, Record(value=b'{"id": "7"}')) == "field $.id is of type string, expected number"


def test_a_validator_answers_none_or_a_reason():
    assert refusal(None) is None
    assert refusal("") == ""  # an empty reason still refuses, as Err(String::new()) in Rust
    for wrong in (True, False, 0, b"bytes"):
        with pytest.raises(TypeError, match="returns None to accept"):
            refusal(wrong)
