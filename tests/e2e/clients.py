"""Shared confluent-kafka (librdkafka) helpers for the suites: create a topic, produce with
delivery reports, read a partition back with assign() (no consumer groups: the broker has
none yet). Every wait has a deadline.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

DEFAULT_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class Record:
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...] = ()
    timestamp_ms: int | None = None


@dataclass(frozen=True)
class Delivered:
    partition: int
    offset: int
    record: Record


def admin(bootstrap: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": bootstrap})


def admin_op(bootstrap: str, op: str, *args, **kwargs) -> dict:
    """Runs AdminClient.<op> and waits for every future: key -> its result, or the
    KafkaError it failed with. (The client must outlive its futures, hence one call.)"""
    client = admin(bootstrap)
    out = {}
    for key, future in getattr(client, op)(*args, **kwargs).items():
        try:
            out[key] = future.result(timeout=DEFAULT_TIMEOUT_S)
        except KafkaException as err:
            out[key] = err.args[0]
    return out


def create_topic(bootstrap: str, topic: str, partitions: int = 1, config: dict[str, str] | None = None):
    new = NewTopic(topic, num_partitions=partitions, replication_factor=-1, config=config or {})
    result = admin_op(bootstrap, "create_topics", [new], operation_timeout=30, request_timeout=30)
    assert result == {topic: None}, f"create_topics {topic}: {result}"


def producer(bootstrap: str, **config) -> Producer:
    conf = {"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5}
    conf.update({k.replace("_", "."): v for k, v in config.items()})
    return Producer(conf)


def produce_all(p: Producer, topic: str, records: list[Record], partition: int = 0) -> list[Delivered]:
    """Produces `records` in order and returns their delivery reports; fails on any error."""
    delivered: list[Delivered] = []
    errors: list[str] = []

    def on_delivery(rec):
        def cb(err, msg):
            if err is not None:
                errors.append(str(err))
            else:
                delivered.append(Delivered(msg.partition(), msg.offset(), rec))

        return cb

    for rec in records:
        kwargs = {"key": rec.key, "value": rec.value, "on_delivery": on_delivery(rec)}
        if partition is not None:
            kwargs["partition"] = partition
        if rec.headers:
            kwargs["headers"] = list(rec.headers)
        if rec.timestamp_ms is not None:
            kwargs["timestamp"] = rec.timestamp_ms
        produce_with_backpressure(p, topic, **kwargs)
    remaining = p.flush(DEFAULT_TIMEOUT_S)
    assert remaining == 0, f"{remaining} records still undelivered after {DEFAULT_TIMEOUT_S}s"
    assert not errors, f"delivery errors: {errors[:5]}"
    assert len(delivered) == len(records)
    return delivered


def produce_with_backpressure(p: Producer, topic: str, **kwargs):
    deadline = time.monotonic() + DEFAULT_TIMEOUT_S
    while True:
        try:
            p.produce(topic, **kwargs)
            p.poll(0)
            return
        except BufferError:
            assert time.monotonic() < deadline, "producer queue stayed full"
            p.poll(0.05)


def consumer(bootstrap: str, **config) -> Consumer:
    conf = {
        "bootstrap.servers": bootstrap,
        "group.id": "sluice-e2e-assign-only",
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "enable.partition.eof": True,
        # A short long-poll: close() waits for the fetch in flight (librdkafka's default
        # 500 ms made each helper consumer's close cost about 0.2 s).
        "fetch.wait.max.ms": 100,
    }
    conf.update(config)
    return Consumer(conf)


def consume_partition(
    bootstrap: str,
    topic: str,
    partition: int,
    count: int,
    start_offset: int = 0,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    **config,
) -> list:
    """Reads exactly `count` messages from `start_offset` via assign(); fails on errors or
    if they do not arrive before the deadline. Returns confluent Message objects."""
    c = consumer(bootstrap, **config)
    try:
        c.assign([TopicPartition(topic, partition, start_offset)])
        messages = []
        deadline = time.monotonic() + timeout_s
        while len(messages) < count:
            assert time.monotonic() < deadline, f"got {len(messages)} of {count} messages before the deadline"
            for msg in c.consume(num_messages=min(10_000, count - len(messages)), timeout=0.5):
                if msg.error():
                    assert msg.error().code() == KafkaError._PARTITION_EOF, f"consume error: {msg.error()}"
                    continue
                messages.append(msg)
        return messages
    finally:
        c.close()


def watermarks(bootstrap: str, topic: str, partition: int) -> tuple[int, int]:
    c = consumer(bootstrap)
    try:
        return c.get_watermark_offsets(TopicPartition(topic, partition), timeout=30, cached=False)
    finally:
        c.close()


def topic_names(bootstrap: str) -> set[str]:
    return set(admin(bootstrap).list_topics(timeout=30).topics)
