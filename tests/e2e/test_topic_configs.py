"""Topic-level configs that change what clients observe, through confluent-kafka and raw fetches.

Covers: time retention (`retention.ms` with small `segment.bytes` and a short
`log.retention.check.interval.ms`): whole old segments go away while the broker runs, the log
start offset moves up, fetching below it is OFFSET_OUT_OF_RANGE, and recent records stay;
size retention (`retention.bytes`); `message.timestamp.type=LogAppendTime`: consumers see
the broker's append time, not the producer's; with a small `segment.bytes`, a consumer reads
across dozens of segments and ListOffsets by timestamp (offsets_for_times) finds the first
offset at or after each time, whichever segment holds it.
"""

from __future__ import annotations

import time

from confluent_kafka import TIMESTAMP_LOG_APPEND_TIME, TopicPartition

import kafka_wire as kw
from clients import Record, consume_partition, consumer, create_topic, produce_all, producer, watermarks
from conftest import wait_until
from kafka_wire import KafkaConnection

RETENTION_DEADLINE_S = 20
SEGMENT_BYTES = 64 * 1024


def retention_broker(broker_factory):
    return broker_factory({"log.retention.check.interval.ms": "200"})


def test_time_retention_deletes_old_segments(broker_factory, topic_name):
    broker = retention_broker(broker_factory)
    create_topic(broker.bootstrap, topic_name, config={"retention.ms": "600000", "segment.bytes": str(SEGMENT_BYTES)})
    two_hours_ago_ms = int(time.time() * 1000) - 2 * 3_600_000
    old = [Record(None, b"o" * 1000, (), two_hours_ago_ms + i) for i in range(300)]
    produce_all(producer(broker.bootstrap, batch_size=16384), topic_name, old)
    fresh = [Record(None, f"fresh-{i}".encode()) for i in range(10)]
    produce_all(producer(broker.bootstrap), topic_name, fresh)

    low = wait_until(
        lambda: watermarks(broker.bootstrap, topic_name, 0)[0],
        RETENTION_DEADLINE_S,
        "retention to advance the log start",
    )
    low, high = watermarks(broker.bootstrap, topic_name, 0)
    assert 0 < low <= len(old), (low, high)
    assert high == len(old) + len(fresh)
    messages = consume_partition(broker.bootstrap, topic_name, 0, high - low, start_offset=low)
    assert [m.value() for m in messages[-len(fresh) :]] == [r.value for r in fresh]
    with KafkaConnection(broker.bootstrap) as conn:
        assert conn.fetch(topic_name, 0, 0).error_code == kw.OFFSET_OUT_OF_RANGE


def test_size_retention_keeps_the_newest_bytes(broker_factory, topic_name):
    broker = retention_broker(broker_factory)
    config = {"retention.bytes": str(4 * SEGMENT_BYTES), "segment.bytes": str(SEGMENT_BYTES)}
    create_topic(broker.bootstrap, topic_name, config=config)
    records = [Record(None, bytes([i % 256]) * 1000) for i in range(1000)]  # ~1 MB, ~16 segments
    produce_all(producer(broker.bootstrap, batch_size=16384), topic_name, records)

    # Kafka's rule: drop the oldest segments while the rest still holds >= retention.bytes,
    # so what stays is retention.bytes plus less than a segment (plus batch overhead).
    def kept_bytes() -> int:
        low, high = watermarks(broker.bootstrap, topic_name, 0)
        assert high == len(records)
        return (high - low) * 1000

    bound = 4 * SEGMENT_BYTES + 2 * SEGMENT_BYTES
    wait_until(lambda: kept_bytes() <= bound, RETENTION_DEADLINE_S, f"size retention to keep <= {bound} bytes")
    assert kept_bytes() >= 3 * SEGMENT_BYTES, f"kept only {kept_bytes()} bytes"


def test_log_append_time_topics(broker, topic_name):
    create_topic(broker.bootstrap, topic_name, config={"message.timestamp.type": "LogAppendTime"})
    before_ms = int(time.time() * 1000)
    produce_all(producer(broker.bootstrap), topic_name, [Record(None, b"x", (), 1_000_000)])
    after_ms = int(time.time() * 1000)
    (msg,) = consume_partition(broker.bootstrap, topic_name, 0, 1)
    kind, ts = msg.timestamp()
    assert kind == TIMESTAMP_LOG_APPEND_TIME
    assert before_ms - 1000 <= ts <= after_ms + 1000


def test_reads_and_time_lookups_across_many_segments(broker, topic_name):
    create_topic(broker.bootstrap, topic_name, config={"segment.bytes": "16384"})
    base_ms = int(time.time() * 1000) - 600_000
    records = [Record(f"k{i}".encode(), f"v{i}".encode() * 20, (), base_ms + 10 * i) for i in range(3000)]
    produce_all(producer(broker.bootstrap, batch_size=4096), topic_name, records)
    segments = list((broker.data_dir / "topics" / topic_name / "0").glob("*.log"))
    assert len(segments) >= 20, f"only {len(segments)} segments: the test would not cross many"

    messages = consume_partition(broker.bootstrap, topic_name, 0, len(records))
    assert [(m.offset(), m.value()) for m in messages] == [(i, r.value) for i, r in enumerate(records)]

    c = consumer(broker.bootstrap)
    try:
        for wanted in (0, 1, 777, 1500, 2999):
            for ts in (base_ms + 10 * wanted, base_ms + 10 * wanted - 5):
                (tp,) = c.offsets_for_times([TopicPartition(topic_name, 0, ts)], timeout=30)
                assert tp.error is None and tp.offset == wanted, (ts, tp)
        (tp,) = c.offsets_for_times([TopicPartition(topic_name, 0, base_ms + 10 * 3000)], timeout=30)
        assert tp.offset == -1, tp  # after the newest record: none (Kafka answers -1)
    finally:
        c.close()


def test_min_insync_replicas_refuses_acks_all_above_the_in_sync_replicas(broker, topic_name):
    """Kafka's `min.insync.replicas` (set on every topic by many deployment scripts): taken
    and described up to REPLICAS_MAX (32); as in Kafka, a value above the one replica a single
    broker has refuses acks=all produces NOT_ENOUGH_REPLICAS (nothing appended), while acks=1
    is taken; above REPLICAS_MAX is INVALID_CONFIG, saying why."""
    from confluent_kafka import KafkaError, KafkaException, Producer
    from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic_name, 1, config={"min.insync.replicas": "2"})])[topic_name].result(30)
    refused = f"{topic_name}-2"
    try:
        admin.create_topics([NewTopic(refused, 1, config={"min.insync.replicas": "33"})])[refused].result(30)
        raise AssertionError("min.insync.replicas=33 was taken")
    except KafkaException as e:
        assert "min.insync.replicas" in str(e) and "1..=32" in str(e), e
    resource = ConfigResource("topic", topic_name)
    described = admin.describe_configs([resource])[resource].result(30)
    assert described["min.insync.replicas"].value == "2"
    outcomes: dict[str, object] = {}
    for acks in ("all", "1"):
        p = Producer({"bootstrap.servers": broker.bootstrap, "acks": acks, "retries": 0, "message.timeout.ms": 5000})
        p.produce(
            topic_name,
            acks.encode(),
            partition=0,
            on_delivery=lambda err, msg, a=acks: outcomes.__setitem__(a, err or msg.offset()),
        )
        p.flush(30)
    assert isinstance(outcomes["all"], KafkaError) and outcomes["all"].code() == KafkaError.NOT_ENOUGH_REPLICAS, (
        outcomes
    )
    assert outcomes["1"] == 0, "acks=1 is taken; the refused acks=all record was never appended"
