"""ListOffsets by timestamp (confluent-kafka `offsets_for_times`) inside multi-record batches.

Covers: for every codec librdkafka writes (none, gzip, snappy, lz4, zstd), records produced
with increasing timestamps into batches of many records (checked with a raw fetch: fewer
batches than records, and the codec really used); a lookup of a timestamp that falls in the
middle of a batch answers the exact first record at or after it, with that record's
timestamp, as Kafka does by decoding (and decompressing) the batch.
"""

from __future__ import annotations

import time

import pytest
from confluent_kafka import TopicPartition

import kafka_wire as kw
from clients import Record, consumer, create_topic, produce_all, producer

CODECS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
RECORDS = 300


@pytest.mark.parametrize("codec", list(CODECS))
def test_time_lookup_finds_the_exact_record_inside_a_batch(broker, topic_name, codec):
    create_topic(broker.bootstrap, topic_name)
    base_ms = int(time.time() * 1000) - 600_000
    records = [Record(None, f"value-{i}".encode() * 8, (), base_ms + 10 * i) for i in range(RECORDS)]
    produce_all(producer(broker.bootstrap, compression_type=codec, linger_ms=200), topic_name, records)

    with kw.KafkaConnection(broker.bootstrap) as conn:
        fetched = conn.fetch(topic_name, 0, 0, version=11)
        codecs = kw.batch_compression_codecs(fetched.records)
    assert set(codecs) == {CODECS[codec]}
    assert len(codecs) < RECORDS // 4, f"{len(codecs)} batches: records were not batched"

    c = consumer(broker.bootstrap)
    try:
        for wanted in (1, 7, 150, 151, 298, 299):
            for ts in (base_ms + 10 * wanted, base_ms + 10 * wanted - 3):
                (tp,) = c.offsets_for_times([TopicPartition(topic_name, 0, ts)], timeout=30)
                assert tp.error is None and tp.offset == wanted, (codec, ts, tp)
    finally:
        c.close()
