"""Fetch long polling and size limits, from a raw socket (kafka_wire.py) so the client adds
no waits of its own.

Covers: a Fetch with max_wait_ms=5000 and min_bytes=1 on an empty partition is held (no
empty answer within the first half second) and answered promptly once a record is produced
(well before the 5 s timeout: a broker that only answers at the timeout fails); a fetch
with nothing to return answers empty at about max_wait_ms, not immediately and not never;
a record produced to another partition does not wake the fetch early; a fetch whose
max_bytes is smaller than the first batch still returns that whole batch (KIP-74: progress
over the limit), and a large max_bytes returns several batches; a confluent-kafka consumer
tailing the end of a partition sees records produced after it started.
"""

from __future__ import annotations

import select
import time

from confluent_kafka import OFFSET_END, KafkaError, TopicPartition

import kafka_wire as kw
from clients import Record, consumer, create_topic, produce_all, producer
from kafka_wire import KafkaConnection

MAX_WAIT_MS = 5000
HELD_CHECK_S = 0.5
# Generous for a loaded 2-core CI box, yet far below the 5 s a timeout-only broker needs.
WAKE_BOUND_S = 2.0


def no_response_within(conn: KafkaConnection, seconds: float) -> bool:
    readable, _, _ = select.select([conn.sock], [], [], seconds)
    return not readable


def test_fetch_wakes_when_a_record_arrives(broker, topic_name):
    create_topic(broker.bootstrap, topic_name)
    with KafkaConnection(broker.bootstrap) as fetcher, KafkaConnection(broker.bootstrap) as producer:
        cid = fetcher.send_fetch(topic_name, 0, 0, max_wait_ms=MAX_WAIT_MS)
        assert no_response_within(fetcher, HELD_CHECK_S), "fetch on an empty partition answered before max_wait_ms"
        produced_at = time.monotonic()
        assert producer.produce(topic_name, 0, kw.record_batch([b"wake up"])).error_code == kw.NONE
        result = fetcher.recv_fetch(cid)
        waited_s = time.monotonic() - produced_at
    assert result.error_code == kw.NONE
    assert kw.batch_record_values(result.records) == [(0, b"wake up")]
    assert waited_s < WAKE_BOUND_S, f"fetch answered {waited_s:.2f}s after the produce"


def test_fetch_with_nothing_answers_at_max_wait(broker, topic_name):
    create_topic(broker.bootstrap, topic_name)
    with KafkaConnection(broker.bootstrap) as conn:
        started = time.monotonic()
        result = conn.fetch(topic_name, 0, 0, max_wait_ms=1000)
        waited_s = time.monotonic() - started
    assert result.error_code == kw.NONE
    assert not result.records
    assert result.high_watermark == 0
    assert 0.9 <= waited_s < 4.0, f"empty fetch with max_wait_ms=1000 answered after {waited_s:.2f}s"


def test_record_on_other_partition_does_not_satisfy_fetch(broker, topic_name):
    create_topic(broker.bootstrap, topic_name, partitions=2)
    with KafkaConnection(broker.bootstrap) as fetcher, KafkaConnection(broker.bootstrap) as producer:
        started = time.monotonic()
        cid = fetcher.send_fetch(topic_name, 0, 0, max_wait_ms=1500)
        assert producer.produce(topic_name, 1, kw.record_batch([b"elsewhere"])).error_code == kw.NONE
        result = fetcher.recv_fetch(cid)
        waited_s = time.monotonic() - started
    assert result.error_code == kw.NONE
    assert not result.records
    assert waited_s >= 1.4, f"fetch of partition 0 returned after {waited_s:.2f}s with nothing"


def test_fetch_returns_first_batch_even_above_max_bytes(broker, topic_name):
    create_topic(broker.bootstrap, topic_name)
    with KafkaConnection(broker.bootstrap) as conn:
        for i in range(3):
            assert conn.produce(topic_name, 0, kw.record_batch([bytes([65 + i]) * 5000, b"tail"])).error_code == kw.NONE
        cid = conn.send_fetch(topic_name, 0, 0, max_bytes=100)
        small = conn.recv_fetch(cid)
        assert small.error_code == kw.NONE
        assert kw.batch_record_values(small.records)[:2] == [(0, b"A" * 5000), (1, b"tail")]
        everything = conn.fetch(topic_name, 0, 0)
        assert [o for o, _ in kw.batch_record_values(everything.records)] == list(range(6))
        assert everything.high_watermark == 6


def test_real_consumer_tails_new_records(broker, topic_name):
    create_topic(broker.bootstrap, topic_name)
    produce_all(producer(broker.bootstrap), topic_name, [Record(None, b"old")])
    c = consumer(broker.bootstrap, **{"fetch.wait.max.ms": 5000})
    try:
        c.assign([TopicPartition(topic_name, 0, OFFSET_END)])
        # Wait until the consumer has caught up with the end (it reports partition EOF).
        deadline = time.monotonic() + 30
        while True:
            assert time.monotonic() < deadline, "consumer never reached the end of the partition"
            msg = c.poll(0.2)
            if msg is not None:
                assert msg.error() and msg.error().code() == KafkaError._PARTITION_EOF, msg.error() or msg.value()
                break
        produced_at = time.monotonic()
        produce_all(producer(broker.bootstrap), topic_name, [Record(None, b"new")])
        while True:
            assert time.monotonic() - produced_at < WAKE_BOUND_S + 1, "tailing consumer did not get the new record"
            msg = c.poll(0.1)
            if msg is not None and not msg.error():
                break
        assert (msg.offset(), msg.value()) == (1, b"new")
    finally:
        c.close()
