"""Data survives broker restarts: graceful (SIGTERM, exit 0) and SIGKILL mid-stream.

Covers: records, topics, partition counts and deletions survive a graceful restart on the same
data dir, and appends continue at the right offset after it; a broker SIGKILLed while a
confluent-kafka producer streams with acks=all still has every acknowledged record at its
acknowledged offset after restart (acks=all is answered only once the append is durable:
`sluice.acks.all.fsync`), and the recovered log is contiguous and holds only records we sent;
SIGTERM under the same load exits 0 and loses no acknowledged record either.
"""

from __future__ import annotations

import time

import pytest

from clients import (
    Record,
    admin,
    admin_op,
    consume_partition,
    create_topic,
    produce_all,
    producer,
    topic_names,
    watermarks,
)
from conftest import wait_until

ACKED_BEFORE_KILL = 20_000


def test_graceful_restart_between_produce_and_consume(broker, topic_name):
    create_topic(broker.bootstrap, topic_name, partitions=3)
    gone = f"{topic_name}-deleted"
    create_topic(broker.bootstrap, gone)
    # Recent explicit timestamps: older than log.retention.ms (7 days) would be deleted.
    base_ms = int(time.time() * 1000) - 60_000
    records = [Record(f"k{i}".encode(), f"v{i}".encode() * 10, (("h", b"x"),), base_ms + i) for i in range(2000)]
    produce_all(producer(broker.bootstrap, compression_type="lz4"), topic_name, records, partition=2)
    assert admin_op(broker.bootstrap, "delete_topics", [gone]) == {gone: None}
    wait_until(lambda: gone not in topic_names(broker.bootstrap), 10, "deleted topic to leave metadata")

    broker.restart()

    md = admin(broker.bootstrap).list_topics(timeout=30)
    assert topic_name in md.topics and gone not in md.topics
    assert len(md.topics[topic_name].partitions) == 3
    assert watermarks(broker.bootstrap, topic_name, 2) == (0, len(records))
    messages = consume_partition(broker.bootstrap, topic_name, 2, len(records))
    assert [(m.offset(), m.key(), m.value(), m.headers(), m.timestamp()[1]) for m in messages] == [
        (i, r.key, r.value, list(r.headers), r.timestamp_ms) for i, r in enumerate(records)
    ]
    more = produce_all(producer(broker.bootstrap), topic_name, [Record(b"after", b"restart")], partition=2)
    assert more[0].offset == len(records)


def test_two_restarts_keep_appending(broker, topic_name):
    create_topic(broker.bootstrap, topic_name)
    for round_ in range(3):
        produce_all(
            producer(broker.bootstrap), topic_name, [Record(None, f"r{round_}-{i}".encode()) for i in range(100)]
        )
        broker.restart()
    messages = consume_partition(broker.bootstrap, topic_name, 0, 300)
    assert [m.value() for m in messages] == [f"r{r}-{i}".encode() for r in range(3) for i in range(100)]


# Records produced after the wanted count is acknowledged, without polling for their reports.
IN_FLIGHT_TAIL = 200


def stream_until_acked(bootstrap: str, topic: str, wanted: int, acks: str = "all"):
    """Produces with `acks`, keeping the pipeline full, until `wanted` records are
    acknowledged. Returns (producer, acked offset -> value, records sent); records are still
    in flight when it returns."""
    p = producer(bootstrap, acks=acks, linger_ms=2, message_timeout_ms=10_000)
    acked: dict[int, bytes] = {}
    sent = 0

    def on_delivery(err, msg):
        if err is None:
            acked[msg.offset()] = msg.value()

    deadline = time.monotonic() + 120
    while len(acked) < wanted:
        assert time.monotonic() < deadline, f"only {len(acked)} records acknowledged in 120s"
        try:
            p.produce(topic, value=stream_value(sent), partition=0, on_delivery=on_delivery)
            sent += 1
        except BufferError:
            p.poll(0.01)
        p.poll(0)
    # A fast broker can acknowledge everything before the loop ends: queue a tail that is
    # not polled for, so records are still in flight when the broker is stopped.
    for _ in range(IN_FLIGHT_TAIL):
        try:
            p.produce(topic, value=stream_value(sent), partition=0, on_delivery=on_delivery)
            sent += 1
        except BufferError:
            break
    assert len(p) > 0, "nothing in flight at the stop; the test would prove nothing"
    return p, acked, sent


def stream_value(i: int) -> bytes:
    return f"record-{i:08d}".encode() * 4


def finish_after_broker_gone(p, acked: dict[int, bytes]):
    """Serves delivery reports received before the broker went away, then drops the rest."""
    p.poll(0.5)
    p.purge()
    p.flush(30)


def assert_acked_records_survived(bootstrap: str, topic: str, acked: dict[int, bytes], sent: int) -> int:
    """Every acknowledged record is at its offset; the log is contiguous and holds only
    records we sent. Returns the high watermark."""
    low, high = watermarks(bootstrap, topic, 0)
    assert low == 0
    assert high >= max(acked) + 1, f"high watermark {high} lost acknowledged offset {max(acked)}"
    messages = consume_partition(bootstrap, topic, 0, high)
    log = {m.offset(): m.value() for m in messages}
    assert sorted(log) == list(range(high)), "recovered log has gaps or duplicates"
    missing = [o for o, v in acked.items() if log.get(o) != v]
    assert not missing, f"{len(missing)} acknowledged records lost or changed, first offsets {sorted(missing)[:5]}"
    sent_values = {stream_value(i) for i in range(sent)}
    assert set(log.values()) <= sent_values, "recovered log holds records nobody sent"
    return high


@pytest.mark.parametrize("acks", ["all", "1"])
def test_sigkill_mid_stream_keeps_every_acked_record(broker, topic_name, acks):
    """acks=1 is answered once the append returned, without the fsync wait: a process kill
    loses none of it either (docs/durability.md, the table)."""
    create_topic(broker.bootstrap, topic_name)
    p, acked, sent = stream_until_acked(broker.bootstrap, topic_name, ACKED_BEFORE_KILL, acks)
    broker.kill()
    finish_after_broker_gone(p, acked)
    assert len(acked) >= ACKED_BEFORE_KILL

    broker.start()
    high = assert_acked_records_survived(broker.bootstrap, topic_name, acked, sent)
    # The recovered partition accepts appends right after the recovered end.
    assert produce_all(producer(broker.bootstrap), topic_name, [Record(None, b"after-kill")])[0].offset == high


def test_sigterm_under_load_exits_cleanly_and_keeps_acked_records(broker, topic_name):
    create_topic(broker.bootstrap, topic_name)
    p, acked, sent = stream_until_acked(broker.bootstrap, topic_name, ACKED_BEFORE_KILL // 4)
    broker.stop()  # asserts exit 0 within the deadline despite the busy producer
    finish_after_broker_gone(p, acked)

    broker.start()
    assert_acked_records_survived(broker.bootstrap, topic_name, acked, sent)


def test_consumer_position_semantics_after_restart(broker, topic_name):
    """ListOffsets after restart: earliest 0, latest = records written, per partition."""
    create_topic(broker.bootstrap, topic_name, partitions=2)
    produce_all(producer(broker.bootstrap), topic_name, [Record(None, b"x")] * 7, partition=0)
    produce_all(producer(broker.bootstrap), topic_name, [Record(None, b"y")] * 3, partition=1)
    broker.restart()
    assert watermarks(broker.bootstrap, topic_name, 0) == (0, 7)
    assert watermarks(broker.bootstrap, topic_name, 1) == (0, 3)
