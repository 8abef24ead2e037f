"""Validator plugins (`sluice.validator`, produce time) end to end with real clients and the
real wasm plugins built from plugins/:

- deployed through the CLI (`sluice plugin deploy`) and the admin API (PUT), bound with
  `sluice topic create -c sluice.validator=...` and with confluent-kafka's AdminClient;
- confluent-kafka produces a batch with good and bad records: every record of it fails with
  INVALID_RECORD and nothing of it is appended; batches of good records land;
- over the raw wire (Produce v8) the refusal carries a record error per refused record
  (KIP-467: index and the plugin's reason) and a message naming the validator;
- kafka-python sees the same refusal;
- the failure policy: a validator that traps, loops or exhausts its memory fails the
  produce with POLICY_VIOLATION and appends nothing under `reject` (the default), appends
  the batch unvalidated under `allow`; the broker keeps serving;
- bad parameters and a plugin of the wrong kind are INVALID_CONFIG naming the key; the
  binding survives a restart; `sluice plugin test` shows what a validator refuses; the
  plugin's calls and CPU time reach /metrics.
"""

from __future__ import annotations

import json
import subprocess
import urllib.request

import pytest
from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import NewTopic
from kafka import KafkaProducer
from plugin_support import plugin_dir, wasm

import kafka_wire as kw
from clients import Record, admin_op, consume_partition, create_topic, produce_all, producer, watermarks
from conftest import sluice_bin
from kafka_wire import KafkaConnection

SCHEMA = {"sluice.validator": "json-validator", "sluice.validator.params": "required=$.id,types=$.id:number"}


def start(broker_factory, tmp_path, **settings):
    d = plugin_dir(
        tmp_path,
        {"json-validator": "json-validator", "hostile-validator": "hostile-validator", "json-filter": "json-filter"},
    )
    return broker_factory(settings={"plugin.dir": str(d), **settings})


def sluice(broker, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    where = ["--admin-url", broker.admin_url] if args[0] == "plugin" else ["--brokers", broker.bootstrap]
    proc = subprocess.run(
        [sluice_bin(), *args, *where],
        capture_output=True,
        text=True,
        timeout=120,
    )
    if check:
        assert proc.returncode == 0, f"{args}: rc={proc.returncode} {proc.stderr}"
    return proc


def produce_batch(bootstrap: str, topic: str, values: list[bytes]) -> list[tuple[KafkaError | None, int]]:
    """Produces `values` as one batch (linger long enough to gather them) and returns each
    record's delivery error (or None) and offset, in order."""
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 200, "acks": "all", "retries": 0})
    reports: list[tuple[KafkaError | None, int]] = [None] * len(values)  # type: ignore[list-item]

    def report(i):
        return lambda err, msg: reports.__setitem__(i, (err, msg.offset()))

    for i, v in enumerate(values):
        p.produce(topic, value=v, partition=0, on_delivery=report(i))
    assert p.flush(60) == 0
    return reports


def values_at(bootstrap: str, topic: str) -> list[bytes]:
    low, high = watermarks(bootstrap, topic, 0)
    return (
        [m.value() for m in consume_partition(bootstrap, topic, 0, high - low, start_offset=low)] if high > low else []
    )


def raw_produce_v8(bootstrap: str, topic: str, values: list[bytes]) -> kw.PartitionResult:
    records = b"".join(kw.record(i, None, v) for i, v in enumerate(values))
    with KafkaConnection(bootstrap) as conn:
        return conn.produce_many({topic: [(0, kw.batch_with_header(records, records_count=len(values)))]}, 8)[0]


def test_confluent_kafka_sees_invalid_record_and_nothing_of_the_batch_is_appended(broker_factory, tmp_path, topic_name):
    broker = start(broker_factory, tmp_path)
    create_topic(broker.bootstrap, topic_name, config=SCHEMA)
    good = [b'{"id": 1}', b'{"id": 2, "x": "y"}']
    assert [err for err, _ in produce_batch(broker.bootstrap, topic_name, good)] == [None, None]

    mixed = [b'{"id": 3}', b'{"id": "four"}', b"not json", b'{"id": 5}']
    reports = produce_batch(broker.bootstrap, topic_name, mixed)
    # librdkafka reads the record errors (KIP-467): the refused records fail with
    # INVALID_RECORD, the rest of the batch with "an invalid record in the same batch caused
    # the failure of this message too" (the reasons are in the response; the raw test below
    # reads them).
    codes = [err.code() if err else None for err, _ in reports]
    assert codes == [
        KafkaError._INVALID_DIFFERENT_RECORD,
        KafkaError.INVALID_RECORD,
        KafkaError.INVALID_RECORD,
        KafkaError._INVALID_DIFFERENT_RECORD,
    ], reports

    assert values_at(broker.bootstrap, topic_name) == good, "nothing of the refused batch is appended"

    more = [b'{"id": 6}']
    assert [err for err, _ in produce_batch(broker.bootstrap, topic_name, more)] == [None]
    assert values_at(broker.bootstrap, topic_name) == good + more


def test_the_raw_response_carries_one_record_error_per_refused_record(broker_factory, tmp_path, topic_name):
    broker = start(broker_factory, tmp_path)
    create_topic(broker.bootstrap, topic_name, config=SCHEMA)
    result = raw_produce_v8(broker.bootstrap, topic_name, [b'{"id": 1}', b"[1]", b'{"name": "x"}', b'{"id": 2}'])
    assert result.error_code == kw.INVALID_RECORD, result
    assert result.record_errors == [
        (1, "the value is a JSON array, not an object"),
        (2, "required field $.id is missing or null"),
    ], result
    assert "validator json-validator refused 2 of 4 records" in (result.error_message or ""), result
    assert values_at(broker.bootstrap, topic_name) == []

    # kafka-python: the same refusal, as its exception.
    kp = KafkaProducer(bootstrap_servers=broker.bootstrap, acks="all", retries=0, linger_ms=50)
    future = kp.send(topic_name, b"not json", partition=0)
    with pytest.raises(Exception, match="InvalidRecord|INVALID_RECORD|87"):
        future.get(timeout=30)
    kp.close()


@pytest.mark.parametrize(
    ("value", "what"),
    [(b"panic", "trap"), (b"loop", "plugin.call.timeout.ms"), (b"bomb", "plugin.memory.bytes.max")],
)
def test_a_failing_validator_rejects_by_default_and_allows_when_told(broker_factory, tmp_path, topic_name, value, what):
    broker = start(broker_factory, tmp_path)
    create_topic(broker.bootstrap, topic_name, config={"sluice.validator": "hostile-validator"})
    result = raw_produce_v8(broker.bootstrap, topic_name, [b"fine", value])
    assert result.error_code == kw.POLICY_VIOLATION, result
    assert what in (result.error_message or ""), result
    assert values_at(broker.bootstrap, topic_name) == []

    refused = raw_produce_v8(broker.bootstrap, topic_name, [b"bad"])
    assert (refused.error_code, refused.record_errors) == (kw.INVALID_RECORD, [(0, "bad on purpose")]), refused

    sluice(broker, "topic", "alter-config", topic_name, "--set", "sluice.validator.on.failure=allow")
    allowed = raw_produce_v8(broker.bootstrap, topic_name, [b"fine", value])
    assert allowed.error_code == 0, allowed
    assert values_at(broker.bootstrap, topic_name) == [b"fine", value]
    # Refusals still refuse under `allow`: the policy is about the plugin failing.
    assert raw_produce_v8(broker.bootstrap, topic_name, [b"bad"]).error_code == kw.INVALID_RECORD

    # The broker keeps serving other topics.
    other = f"{topic_name}-other"
    create_topic(broker.bootstrap, other)
    produce_all(producer(broker.bootstrap), other, [Record(None, b"still here")])
    assert values_at(broker.bootstrap, other) == [b"still here"]


def test_deploy_bind_over_cli_and_admin_api_then_restart(broker_factory, tmp_path, topic_name):
    broker = broker_factory(settings={"plugin.dir": str(tmp_path / "plugins")})
    built = tmp_path / "json-validator.wasm"
    built.write_bytes(wasm("json-validator"))
    deployed = json.loads(sluice(broker, "plugin", "deploy", str(built), "--output", "json").stdout)
    assert (deployed["kind"], deployed["wit_version"], deployed["wasi"]) == ("validator", "0.2.0", False)
    request = urllib.request.Request(
        f"{broker.admin_url}/v1/plugins/policy", data=wasm("record-policy-validator"), method="PUT"
    )
    with urllib.request.urlopen(request, timeout=60) as answer:
        assert json.loads(answer.read())["kind"] == "validator"

    sluice(broker, "topic", "create", topic_name, "-c", "sluice.validator=json-validator")
    capped = f"{topic_name}-capped"
    create_topic(
        broker.bootstrap, capped, config={"sluice.validator": "policy", "sluice.validator.params": "max.value.bytes=8"}
    )
    assert raw_produce_v8(broker.bootstrap, topic_name, [b"[]"]).record_errors == [
        (0, "the value is a JSON array, not an object")
    ]
    assert raw_produce_v8(broker.bootstrap, capped, [b"ok", b"far too long"]).record_errors == [
        (1, "the value is 12 bytes, over max.value.bytes=8")
    ]

    broker.restart()
    assert raw_produce_v8(broker.bootstrap, topic_name, [b"[]"]).error_code == kw.INVALID_RECORD
    assert raw_produce_v8(broker.bootstrap, topic_name, [b'{"a": 1}']).error_code == 0
    described = json.loads(sluice(broker, "plugin", "describe", "json-validator", "--output", "json").stdout)
    assert described["stats"]["calls"] >= 2 and described["stats"]["records_in"] >= 2, described
    with urllib.request.urlopen(f"{broker.admin_url}/metrics", timeout=10) as answer:
        metrics = answer.read().decode()
    assert 'sluice_plugin_cpu_seconds_total{plugin="json-validator"' in metrics, metrics[:2000]
    # The topic's own counters (since the restart): one record refused, one passed.
    labels = f'topic="{topic_name}",role="validator",plugin="json-validator"'
    assert f"sluice_topic_plugin_records_in_total{{{labels}}} 2" in metrics, metrics[-3000:]
    assert f"sluice_topic_plugin_records_out_total{{{labels}}} 1" in metrics, metrics[-3000:]


def test_bad_bindings_are_invalid_config_naming_the_key(broker_factory, tmp_path, topic_name):
    broker = start(broker_factory, tmp_path)

    def create_error(config):
        new = NewTopic(topic_name, num_partitions=1, replication_factor=1, config=config)
        return admin_op(broker.bootstrap, "create_topics", [new], operation_timeout=30, request_timeout=30)[topic_name]

    err = create_error({"sluice.validator": "json-validator", "sluice.validator.params": "root=list"})
    assert err.code() == KafkaError.INVALID_CONFIG and "sluice.validator.params" in err.str(), err
    err = create_error({"sluice.validator": "json-filter"})
    assert err.code() == KafkaError.INVALID_CONFIG and "not a validator" in err.str(), err
    err = create_error({"sluice.validator": "missing"})
    assert err.code() == KafkaError.INVALID_CONFIG and "no plugin named `missing`" in err.str(), err
    err = create_error({"sluice.validator": "json-validator", "sluice.validator.on.failure": "maybe"})
    assert err.code() == KafkaError.INVALID_CONFIG and "sluice.validator.on.failure" in err.str(), err


def test_plugin_test_shows_what_a_validator_refuses(tmp_path):
    built = tmp_path / "v.wasm"
    built.write_bytes(wasm("json-validator"))
    samples = tmp_path / "samples.jsonl"
    samples.write_text('{"value": {"id": 1}}\n{"value": [1]}\nnot json at all\n')
    out = subprocess.run(
        [sluice_bin(), "plugin", "test", str(built), "--records", str(samples), "--output", "json"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert doc["kind"] == "validator" and doc["refused"] == 2 and doc["total"] == 3, doc
    assert [r["refused"] for r in doc["records"]][0] is None
    assert doc["records"][1]["refused"] == "the value is a JSON array, not an object"
