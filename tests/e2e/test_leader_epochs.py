"""Leader epochs with a real client (KIP-101, KIP-320): librdkafka (confluent-kafka) reads the
partition's leader epoch from Metadata, stores it with its position and its commits, and
after an epoch change asks OffsetForLeaderEpoch where its epoch ended. A broker restart is a
new epoch and a consumer carries on with no record lost or repeated; a log whose tail was
lost while the broker was down (what a power cut does to data the flush policy had not yet
fsynced) is detected as truncated, so the consumer does not silently skip the records
written after the truncation point."""

from __future__ import annotations

import struct
import time

from clients import Record, consumer, create_topic, produce_all, producer
from confluent_kafka import KafkaError, TopicPartition

DEADLINE_S = 30.0


def segment_path(broker, topic: str):
    return broker.data_dir / "topics" / topic / "0" / f"{0:020}.log"


def keep_batches(path, count: int) -> None:
    """Cuts a segment file after its first `count` record batches."""
    data = path.read_bytes()
    pos = 0
    for _ in range(count):
        (length,) = struct.unpack(">i", data[pos + 8 : pos + 12])
        pos += 12 + length
    with open(path, "r+b") as f:
        f.truncate(pos)


def poll_values(c, want: int) -> tuple[list[tuple[int, bytes]], list]:
    """(offset, value) of up to `want` records, and any consumer errors, before the deadline."""
    got, errors = [], []
    deadline = time.monotonic() + DEADLINE_S
    while len(got) < want and time.monotonic() < deadline:
        msg = c.poll(0.2)
        if msg is None:
            continue
        if msg.error():
            if msg.error().code() != KafkaError._PARTITION_EOF:
                errors.append(msg.error())
            continue
        got.append((msg.offset(), msg.value()))
    return got, errors


def test_a_restart_is_a_new_epoch_and_the_consumer_carries_on(broker_factory, topic_name):
    broker = broker_factory()
    create_topic(broker.bootstrap, topic_name)
    produce_all(producer(broker.bootstrap), topic_name, [Record(None, f"a{i}".encode()) for i in range(5)])
    c = consumer(broker.bootstrap, **{"group.id": f"{topic_name}-g", "auto.offset.reset": "earliest"})
    try:
        c.assign([TopicPartition(topic_name, 0, 0)])
        first, errors = poll_values(c, 5)
        assert [v for _, v in first] == [f"a{i}".encode() for i in range(5)] and not errors
        epochs = {m for m in [c.position([TopicPartition(topic_name, 0)])[0].leader_epoch]}
        assert epochs == {0}, f"the position carries epoch 0: {epochs}"
        broker.restart(keep_port=True)
        produce_all(producer(broker.bootstrap), topic_name, [Record(None, f"b{i}".encode()) for i in range(5)])
        second, errors = poll_values(c, 5)
        assert second == [(5 + i, f"b{i}".encode()) for i in range(5)], "nothing lost or repeated"
        assert not errors, errors
        assert c.position([TopicPartition(topic_name, 0)])[0].leader_epoch == 1
    finally:
        c.close()


def test_a_truncated_log_is_detected_by_its_leader_epoch(broker_factory, topic_name):
    broker = broker_factory()
    create_topic(broker.bootstrap, topic_name)
    p = producer(broker.bootstrap, **{"linger.ms": 0})
    for i in range(10):  # one batch each, so the log can be cut between any two
        produce_all(p, topic_name, [Record(None, f"old{i}".encode())])
    c = consumer(broker.bootstrap, **{"auto.offset.reset": "earliest"})
    try:
        c.assign([TopicPartition(topic_name, 0, 0)])
        old, _ = poll_values(c, 10)
        assert len(old) == 10
        broker.stop()
        keep_batches(segment_path(broker, topic_name), 5)  # offsets 5..9 never reached the disk
        broker.listen = f"127.0.0.1:{broker.last_port}"  # the consumer reconnects to it
        broker.start()
        new = produce_all(producer(broker.bootstrap), topic_name, [Record(None, f"new{i}".encode()) for i in range(8)])
        assert [d.offset for d in new] == list(range(5, 13))
        # The new epoch in Metadata makes librdkafka ask OffsetForLeaderEpoch where epoch 0
        # ended (5, below its position 10) and seek there: without epochs it would go on
        # from 10 and silently skip new0..new4.
        got, errors = poll_values(c, 8)
        assert got == [(5 + i, f"new{i}".encode()) for i in range(8)], got
        assert not errors, errors
    finally:
        c.close()
