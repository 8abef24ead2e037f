"""confluent-kafka (Python on the librdkafka bundled in its wheel) against a real broker.

Covers: a producer with acks=all and each compression codec (none, gzip, snappy, lz4, zstd)
whose records (keys, null keys and values, empty values, duplicate and null-valued headers,
explicit CreateTime timestamps, compressible and random payloads) are read back byte-exact by
an assign()-based consumer, with contiguous offsets; key partitioning over several
partitions; 10 topics x 32 partitions; four producers appending to one partition at once;
a 900 KB record; AdminClient create (with topic configs, validate_only, already-exists, invalid names and
configs), delete,
describe_configs (topic and broker), incremental_alter_configs' APPEND and SUBTRACT of a
list-typed key (KIP-339), list_topics and list_offsets (earliest, latest and KIP-734's
max_timestamp over out-of-order timestamps in compressed batches). The stored
batches are fetched raw to check each codec was really used.
"""

from __future__ import annotations

import os
import threading
import time

import pytest
from confluent_kafka import TIMESTAMP_CREATE_TIME, KafkaError, TopicPartition
from confluent_kafka.admin import (
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewTopic,
    OffsetSpec,
    ResourceType,
)

import kafka_wire as kw
from clients import (
    Record,
    admin,
    admin_op,
    consume_partition,
    create_topic,
    produce_all,
    produce_with_backpressure,
    producer,
    topic_names,
    watermarks,
)
from conftest import wait_until
from kafka_wire import KafkaConnection

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
RECORDS_PER_CODEC = 600
# Explicit CreateTimes, recent enough that retention (log.retention.ms, 7 days) keeps them.
BASE_TS_MS = int(time.time() * 1000) - 3_600_000


def sample_records(count: int) -> list[Record]:
    """Records exercising every field shape the wire format has."""
    out = []
    for i in range(count):
        kind = i % 6
        key = None if kind == 0 else b"" if kind == 1 else f"key-{i}".encode()
        if kind == 2:
            value = None
        elif kind == 3:
            value = b""
        elif kind == 4:
            value = os.urandom(50 + i % 400)
        else:
            value = (f"compressible payload {i % 7} " * (1 + i % 40)).encode()
        headers: tuple = ()
        if i % 3 == 0:
            headers = (("trace", f"t-{i}".encode()), ("dup", b"1"), ("dup", b"2"), ("nullhdr", None), ("empty", b""))
        out.append(Record(key, value, headers, BASE_TS_MS + i * 13))
    return out


def assert_same_records(messages, records: list[Record], first_offset: int = 0):
    assert len(messages) == len(records)
    for i, (msg, rec) in enumerate(zip(messages, records, strict=True)):
        where = f"record {i} (offset {msg.offset()})"
        assert msg.offset() == first_offset + i, where
        assert msg.key() == rec.key, where
        assert msg.value() == rec.value, where
        assert tuple(msg.headers() or ()) == rec.headers, where
        assert msg.timestamp() == (TIMESTAMP_CREATE_TIME, rec.timestamp_ms), where


CODEC_IDS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}


def assert_stored_with_codec(bootstrap: str, topic: str, codec: str):
    """The producer really compressed with `codec` (librdkafka silently falls back to plain
    batches when its probe of ApiVersions says the broker lacks the codec) and the broker
    kept the batches as sent. librdkafka may send a batch plain when compressing would not
    shrink it, so: some batch in `codec`, none in another codec."""
    with KafkaConnection(bootstrap) as conn:
        fetched = conn.fetch(topic, 0, 0, version=11)
    codecs = kw.batch_compression_codecs(fetched.records)
    assert CODEC_IDS[codec] in codecs and set(codecs) <= {0, CODEC_IDS[codec]}, codecs


@pytest.mark.parametrize("codec", CODECS)
def test_acks_all_roundtrip_per_codec(broker, topic_name, codec):
    create_topic(broker.bootstrap, topic_name)
    records = sample_records(RECORDS_PER_CODEC)
    p = producer(broker.bootstrap, compression_type=codec, batch_num_messages=100)
    delivered = produce_all(p, topic_name, records)
    assert [d.offset for d in delivered] == list(range(len(records)))
    assert watermarks(broker.bootstrap, topic_name, 0) == (0, len(records))

    messages = consume_partition(broker.bootstrap, topic_name, 0, len(records))
    assert_same_records(messages, records)
    assert_stored_with_codec(broker.bootstrap, topic_name, codec)
    # A consumer starting mid-log (inside a compressed batch) starts at exactly that offset.
    middle = len(records) // 2 + 7
    tail = consume_partition(broker.bootstrap, topic_name, 0, len(records) - middle, start_offset=middle)
    assert_same_records(tail, records[middle:], first_offset=middle)


def test_key_partitioning_over_partitions(broker, topic_name):
    create_topic(broker.bootstrap, topic_name, partitions=4)
    records = [Record(f"user-{i % 20}".encode(), f"event-{i}".encode()) for i in range(400)]
    delivered = produce_all(producer(broker.bootstrap), topic_name, records, partition=None)
    by_partition: dict[int, list] = {}
    for d in delivered:
        by_partition.setdefault(d.partition, []).append(d)
    assert len(by_partition) > 1, "20 keys all hashed to one partition"
    partition_of_key = {}
    for part, items in by_partition.items():
        messages = consume_partition(broker.bootstrap, topic_name, part, len(items))
        assert sorted(m.offset() for m in messages) == list(range(len(items)))
        assert {(m.key(), m.value()) for m in messages} == {(d.record.key, d.record.value) for d in items}
        for m in messages:
            assert partition_of_key.setdefault(m.key(), part) == part, "a key landed on two partitions"


def test_many_partitions_and_topics(broker, topic_name):
    topics = [f"{topic_name}-{i}" for i in range(10)]
    for t in topics:
        create_topic(broker.bootstrap, t, partitions=32)
    md = admin(broker.bootstrap).list_topics(timeout=30)
    assert all(len(md.topics[t].partitions) == 32 for t in topics)
    p = producer(broker.bootstrap)
    for t in topics:
        for part in range(32):
            produce_with_backpressure(p, t, value=f"{t}/{part}".encode(), partition=part)
    assert p.flush(60) == 0
    for t in topics[:2]:
        for part in (0, 17, 31):
            (msg,) = consume_partition(broker.bootstrap, t, part, 1)
            assert msg.value() == f"{t}/{part}".encode()
    assert watermarks(broker.bootstrap, topics[-1], 31) == (0, 1)


def test_concurrent_producers_share_a_partition(broker, topic_name):
    """Four producers append to one partition at once: every record gets exactly one offset,
    offsets are contiguous, and each producer's records keep their order."""
    create_topic(broker.bootstrap, topic_name)
    per_producer = 2000
    results: dict[int, list] = {}

    def run(n: int):
        records = [Record(f"p{n}".encode(), f"p{n}-{i}".encode()) for i in range(per_producer)]
        results[n] = produce_all(producer(broker.bootstrap, linger_ms=1), topic_name, records)

    threads = [threading.Thread(target=run, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert sorted(results) == [0, 1, 2, 3], "a producer thread failed"
    offsets = sorted(d.offset for ds in results.values() for d in ds)
    assert offsets == list(range(4 * per_producer))
    messages = consume_partition(broker.bootstrap, topic_name, 0, 4 * per_producer)
    for n in range(4):
        mine = [m.value() for m in messages if m.key() == f"p{n}".encode()]
        assert mine == [f"p{n}-{i}".encode() for i in range(per_producer)]


def test_large_record_near_message_max_bytes(broker, topic_name):
    create_topic(broker.bootstrap, topic_name)
    big = os.urandom(900_000)
    produce_all(producer(broker.bootstrap), topic_name, [Record(b"big", big), Record(b"small", b"s")])
    messages = consume_partition(broker.bootstrap, topic_name, 0, 2)
    assert [(m.key(), m.value()) for m in messages] == [(b"big", big), (b"small", b"s")]


@pytest.fixture
def admin_broker(broker_factory):
    return broker_factory({"auto.create.topics.enable": "false", "message.max.bytes": "3000000"})


def error_code(result) -> int | None:
    """The code of an admin_op result that is a KafkaError, else None."""
    return result.code() if isinstance(result, KafkaError) else None


def test_admin_create_with_configs_and_describe(admin_broker, topic_name):
    bootstrap = admin_broker.bootstrap
    create_topic(bootstrap, topic_name, partitions=3, config={"retention.ms": "3600000", "cleanup.policy": "delete"})
    md = admin(bootstrap).list_topics(timeout=30)
    assert len(md.topics[topic_name].partitions) == 3

    resource = ConfigResource(ResourceType.TOPIC, topic_name)
    entries = admin_op(bootstrap, "describe_configs", [resource])[resource]
    assert entries["retention.ms"].value == "3600000"
    source = entries["retention.ms"].source
    assert getattr(source, "value", source) == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    assert entries["cleanup.policy"].value == "delete"


def test_admin_create_validate_only_creates_nothing(admin_broker, topic_name):
    bootstrap = admin_broker.bootstrap
    result = admin_op(
        bootstrap, "create_topics", [NewTopic(topic_name, num_partitions=2, replication_factor=1)], validate_only=True
    )
    assert result == {topic_name: None}
    assert topic_name not in topic_names(bootstrap)
    # And really creating it afterwards works.
    create_topic(bootstrap, topic_name, partitions=2)
    assert topic_name in topic_names(bootstrap)


def test_admin_create_existing_and_invalid(admin_broker, topic_name):
    bootstrap = admin_broker.bootstrap
    create_topic(bootstrap, topic_name)
    result = admin_op(bootstrap, "create_topics", [NewTopic(topic_name, num_partitions=1, replication_factor=1)])
    assert error_code(result[topic_name]) == KafkaError.TOPIC_ALREADY_EXISTS
    bad = f"{topic_name}-badcfg"
    result = admin_op(
        bootstrap,
        "create_topics",
        [NewTopic(bad, num_partitions=1, replication_factor=1, config={"retention.ms": "not-a-number"})],
    )
    assert error_code(result[bad]) == KafkaError.INVALID_CONFIG
    assert bad not in topic_names(bootstrap)


@pytest.mark.parametrize("name", ["bad/name", "..", "x" * 250, "spaces are bad"])
def test_admin_create_invalid_topic_name(admin_broker, name):
    result = admin_op(admin_broker.bootstrap, "create_topics", [NewTopic(name, num_partitions=1, replication_factor=1)])
    assert error_code(result[name]) == KafkaError.TOPIC_EXCEPTION
    assert name not in topic_names(admin_broker.bootstrap)


def test_admin_describe_configs_of_unknown_topic(admin_broker, topic_name):
    resource = ConfigResource(ResourceType.TOPIC, topic_name)
    result = admin_op(admin_broker.bootstrap, "describe_configs", [resource])[resource]
    assert error_code(result) == KafkaError.UNKNOWN_TOPIC_OR_PART


def test_admin_delete_topics(admin_broker, topic_name):
    bootstrap = admin_broker.bootstrap
    create_topic(bootstrap, topic_name, partitions=2)
    produce_all(producer(bootstrap), topic_name, [Record(b"k", b"v")])
    assert admin_op(bootstrap, "delete_topics", [topic_name], operation_timeout=30) == {topic_name: None}
    wait_until(lambda: topic_name not in topic_names(bootstrap), 10, "deleted topic to leave metadata")
    result = admin_op(bootstrap, "delete_topics", [topic_name], operation_timeout=30)
    assert error_code(result[topic_name]) == KafkaError.UNKNOWN_TOPIC_OR_PART
    # The name is free again, and the new topic starts empty.
    create_topic(bootstrap, topic_name)
    assert watermarks(bootstrap, topic_name, 0) == (0, 0)


def test_admin_describe_broker_configs(admin_broker):
    md = admin(admin_broker.bootstrap).list_topics(timeout=30)
    (broker_id,) = md.brokers.keys()
    resource = ConfigResource(ResourceType.BROKER, str(broker_id))
    entries = admin_op(admin_broker.bootstrap, "describe_configs", [resource])[resource]
    assert entries["message.max.bytes"].value == "3000000"
    assert entries["auto.create.topics.enable"].value == "false"
    assert entries["num.partitions"].value == "1"
    assert "log.retention.ms" in entries


def test_list_topics(admin_broker, topic_name):
    bootstrap = admin_broker.bootstrap
    create_topic(bootstrap, topic_name, partitions=5)
    md = admin(bootstrap).list_topics(timeout=30)
    assert len(md.brokers) == 1
    (b,) = md.brokers.values()
    assert (b.host, b.port) == ("127.0.0.1", admin_broker.port)
    assert md.controller_id == b.id
    assert md.cluster_id, "Metadata v2+ should carry a cluster id"
    t = md.topics[topic_name]
    assert t.error is None
    assert sorted(t.partitions) == list(range(5))
    for p in t.partitions.values():
        assert (p.leader, p.replicas, p.isrs) == (b.id, [b.id], [b.id])
    # Asking for an unknown topic with auto-create off reports it unknown.
    unknown = admin(bootstrap).list_topics(topic=f"{topic_name}-nope", timeout=30).topics[f"{topic_name}-nope"]
    assert unknown.error is not None and unknown.error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART


def test_timestamps_default_to_produce_time(broker, topic_name):
    create_topic(broker.bootstrap, topic_name)
    before_ms = int(time.time() * 1000)
    produce_all(producer(broker.bootstrap), topic_name, [Record(b"k", b"now")])
    after_ms = int(time.time() * 1000)
    (msg,) = consume_partition(broker.bootstrap, topic_name, 0, 1)
    kind, ts = msg.timestamp()
    assert kind == TIMESTAMP_CREATE_TIME
    assert before_ms - 1000 <= ts <= after_ms + 1000


def test_admin_list_offsets_by_max_timestamp(admin_broker, topic_name):
    """OffsetSpec.max_timestamp() (ListOffsets v7+, KIP-734): the first record carrying the
    largest timestamp, here in the middle of a gzip batch, with that timestamp."""
    create_topic(admin_broker.bootstrap, topic_name)
    timestamps = [BASE_TS_MS + d for d in (500, 9_000, 200, 9_000, 7_000, 100)]
    records = [Record(b"k", f"v{i}".encode(), (), ts) for i, ts in enumerate(timestamps)]
    produce_all(producer(admin_broker.bootstrap, compression_type="gzip", linger_ms=200), topic_name, records)
    tp = TopicPartition(topic_name, 0)
    client = admin(admin_broker.bootstrap)  # kept: the futures die with their client
    got = {}
    for name, spec in [("earliest", OffsetSpec.earliest()), ("latest", OffsetSpec.latest()),
                       ("max", OffsetSpec.max_timestamp())]:  # fmt: skip
        result = client.list_offsets({tp: spec}, request_timeout=10)[tp].result(timeout=30)
        got[name] = (result.offset, result.timestamp)
    assert got["earliest"][0] == 0 and got["latest"][0] == len(records)
    assert got["max"] == (1, BASE_TS_MS + 9_000)


def test_admin_incremental_alter_configs_append_and_subtract(admin_broker, topic_name):
    """KIP-339: APPEND adds the list values not yet present (starting from the effective
    value), SUBTRACT removes; a key that is not a list is INVALID_CONFIG."""
    bootstrap = admin_broker.bootstrap
    create_topic(bootstrap, topic_name)
    resource = ConfigResource(ResourceType.TOPIC, topic_name)

    def alter(*entries):
        resource.incremental_configs = list(entries)
        return admin_op(bootstrap, "incremental_alter_configs", [resource])[resource]

    def policy():
        """The effective policy, as a sorted list (DescribeConfigs renders it canonically)."""
        value = admin_op(bootstrap, "describe_configs", [resource])[resource]["cleanup.policy"].value
        return ",".join(sorted(value.split(",")))

    assert policy() == "delete"
    assert alter(ConfigEntry("cleanup.policy", "compact", incremental_operation=AlterConfigOpType.APPEND)) is None
    assert policy() == "compact,delete"
    assert alter(ConfigEntry("cleanup.policy", "compact", incremental_operation=AlterConfigOpType.APPEND)) is None
    assert policy() == "compact,delete", "a value already present is not added again"
    assert alter(ConfigEntry("cleanup.policy", "delete", incremental_operation=AlterConfigOpType.SUBTRACT)) is None
    assert policy() == "compact"
    error = alter(ConfigEntry("retention.ms", "5", incremental_operation=AlterConfigOpType.APPEND))
    assert error.code() == KafkaError.INVALID_CONFIG, error
    assert policy() == "compact", "nothing of a refused request is applied"
