"""Topic-level configs that change what clients observe, through confluent-kafka and raw fetches.

Covers: time retention (`retention.ms` with small `segment.bytes` and a short
`log.retention.check.interval.ms`): whole old segments go away while the broker runs, the log
start offset moves up, fetching below it is OFFSET_OUT_OF_RANGE, and recent records stay;
size retention (`retention.bytes`); `message.timestamp.type=LogAppendTime`: consumers see
the broker's append time, not the producer's.
"""

from __future__ import annotations

import time

from confluent_kafka import TIMESTAMP_LOG_APPEND_TIME

import kafka_wire as kw
from clients import Record, consume_partition, create_topic, produce_all, producer, watermarks
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
