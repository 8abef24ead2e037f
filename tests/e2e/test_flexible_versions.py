"""The flexible versions of the data path, on the wire: Produce v9-v11 (compact lengths,
tagged fields) and Fetch v12-v18 (v13+ name topics by id, the response hand-encoded so
records still go out with sendfile). Every version's records are read back byte-exact by
every other, and a topic id nobody has is answered UNKNOWN_TOPIC_ID as Kafka answers it.
"""

from __future__ import annotations

import struct
import uuid

import kafka_wire as kw
from clients import admin, create_topic
from confluent_kafka import TopicCollection
from kafka_wire import KafkaConnection

PRODUCE_VERSIONS = range(3, 12)
FETCH_VERSIONS = range(4, 19)
UNKNOWN_TOPIC_ID = 100
TIMEOUT_S = 30


def topic_id(bootstrap: str, topic: str) -> bytes:
    """The topic's id as the admin client's DescribeTopics reports it."""
    client = admin(bootstrap)  # kept alive until the answer is in
    described = client.describe_topics(TopicCollection([topic]))[topic].result(timeout=TIMEOUT_S)
    tid = described.topic_id
    return struct.pack(">qq", tid.get_most_significant_bits(), tid.get_least_significant_bits())


def values_of(records: bytes | None) -> list[bytes | None]:
    return [v for _, v in kw.batch_record_values(records or b"")]


def test_every_produce_version_reads_back_through_every_fetch_version(broker, topic_name):
    create_topic(broker.bootstrap, topic_name, partitions=1)
    sent: list[bytes] = []
    with KafkaConnection(broker.bootstrap) as conn:
        for version in PRODUCE_VERSIONS:
            values = [f"v{version}-{i}".encode() for i in range(3)]
            result = conn.produce(topic_name, 0, kw.record_batch(values), version=version)
            assert result.error_code == kw.NONE, (version, result)
            assert result.base_offset == len(sent), (version, result)
            sent += values
        tid = topic_id(broker.bootstrap, topic_name)
        assert tid != bytes(16)
        for version in FETCH_VERSIONS:
            topic = tid if version >= 13 else topic_name
            [part] = conn.fetch_many([(topic, 0, 0)], version=version)
            assert (part.topic, part.partition, part.error_code) == (topic, 0, kw.NONE), version
            assert part.high_watermark == len(sent), version
            assert values_of(part.records) == sent, version


def test_an_unknown_topic_id_is_unknown_topic_id(broker, topic_name):
    create_topic(broker.bootstrap, topic_name, partitions=2)
    with KafkaConnection(broker.bootstrap) as conn:
        conn.produce(topic_name, 1, kw.record_batch([b"kept"]), version=11)
        known = topic_id(broker.bootstrap, topic_name)
        nobody = uuid.uuid4().bytes
        for version in (13, 18):
            parts = conn.fetch_many([(nobody, 0, 0), (nobody, 1, 0), (known, 1, 0)], version=version)
            assert [(p.topic, p.partition, p.error_code) for p in parts] == [
                (nobody, 0, UNKNOWN_TOPIC_ID),
                (nobody, 1, UNKNOWN_TOPIC_ID),
                (known, 1, kw.NONE),
            ], version
            assert values_of(parts[2].records) == [b"kept"]
