"""kafka-python (pure Python client) against a real broker.

Covers: version inference from ApiVersions (it must land on a version with record batch v2,
i.e. >= 0.11), topic creation through its admin client, producing keyed records with headers
(uncompressed and gzip) with acks=all, and reading them back with an assign()-ed consumer
(no group) from the beginning, byte-exact, with contiguous offsets.
"""

from __future__ import annotations

import time

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import NewTopic

RECORDS = 50
DEADLINE_S = 60.0


def make_records(n: int) -> list[tuple[bytes, bytes, list[tuple[str, bytes]]]]:
    return [(f"k{i}".encode(), f"value {i} ".encode() * (1 + i % 5), [("idx", str(i).encode())]) for i in range(n)]


def consume_all(bootstrap: str, topic: str, count: int) -> list:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False)
    try:
        tp = TopicPartition(topic, 0)
        consumer.assign([tp])
        consumer.seek_to_beginning(tp)
        got = []
        deadline = time.monotonic() + DEADLINE_S
        while len(got) < count:
            assert time.monotonic() < deadline, f"got {len(got)} of {count} records before the deadline"
            for batch in consumer.poll(timeout_ms=500).values():
                got.extend(batch)
        return got
    finally:
        consumer.close()


@pytest.mark.parametrize("compression", [None, "gzip"])
def test_produce_and_consume(broker, topic_name, compression):
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        admin.create_topics([NewTopic(topic_name, num_partitions=1, replication_factor=1)])
    finally:
        admin.close()

    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, acks="all", compression_type=compression, linger_ms=5)
    try:
        assert producer.config["api_version"] >= (0, 11), producer.config["api_version"]
        records = make_records(RECORDS)
        futures = [producer.send(topic_name, key=k, value=v, headers=h, partition=0) for k, v, h in records]
        producer.flush(timeout=DEADLINE_S)
        offsets = [f.get(timeout=DEADLINE_S).offset for f in futures]
    finally:
        producer.close(timeout=DEADLINE_S)
    assert offsets == list(range(RECORDS))

    got = consume_all(broker.bootstrap, topic_name, RECORDS)
    assert [r.offset for r in got] == list(range(RECORDS))
    assert [(r.key, r.value, list(r.headers)) for r in got] == records
