"""Log compaction (`cleanup.policy=compact`) through confluent-kafka against a real broker.

Covers: a topic created with small `segment.bytes`, `segment.ms` and
`min.cleanable.dirty.ratio` is compacted while the broker runs, so reading it from the
beginning yields exactly the latest value of each key at the offset the producer was given
(gaps between offsets, as in Kafka); tombstones go after `delete.retention.ms`, and the
deleted keys with them; a keyless record is refused (INVALID_RECORD); switching an existing
topic to `compact` with IncrementalAlterConfigs or AlterConfigs compacts it, and
DescribeConfigs shows the compaction keys; SIGKILLs of the broker while it produces and
cleans, each followed by a restart on the same data dir: every key's latest acknowledged
value (or a newer one) is still readable.
"""

from __future__ import annotations

import random
import threading
import time

from confluent_kafka import OFFSET_BEGINNING, KafkaError, TopicPartition
from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

from clients import Record, admin_op, consumer, create_topic, produce_all, producer, watermarks
from conftest import wait_until

COMPACTION_DEADLINE_S = 60
CLEANER_SETTINGS = {"log.cleaner.backoff.ms": "100"}
COMPACT = {
    "cleanup.policy": "compact",
    "segment.bytes": "2048",
    "segment.ms": "300",
    "min.cleanable.dirty.ratio": "0.01",
}
KEYS = 12
ROUNDS = 15
KILL_TRIALS = 4


def read_all(bootstrap: str, topic: str) -> list[tuple[int, bytes, bytes | None]]:
    """Every record of partition 0 from the beginning to the end: (offset, key, value)."""
    c = consumer(bootstrap)
    try:
        c.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        out = []
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            msg = c.poll(0.5)
            if msg is None:
                continue
            if msg.error():
                assert msg.error().code() == KafkaError._PARTITION_EOF, msg.error()
                return out
            out.append((msg.offset(), msg.key(), msg.value()))
        raise AssertionError("no end of partition before the deadline")
    finally:
        c.close()


def produce_rounds(
    bootstrap: str, topic: str, rounds: int, tag: str, prefix: str = "k"
) -> dict[bytes, tuple[int, bytes | None]]:
    """`rounds` values of each key; returns key -> (offset, value) of its latest."""
    records = [Record(f"{prefix}{k}".encode(), f"{tag}-{r}-{k}".encode() * 3) for r in range(rounds) for k in range(KEYS)]
    delivered = produce_all(producer(bootstrap, batch_size=1024), topic, records)
    latest = {}
    for d in sorted(delivered, key=lambda d: d.offset):
        latest[d.record.key] = (d.offset, d.record.value)
    return latest


def compacted_to(bootstrap: str, topic: str, latest: dict) -> list:
    """Waits until the partition holds exactly one record per key: its latest, at its offset."""
    want = sorted((offset, key, value) for key, (offset, value) in latest.items())

    def done():
        got = read_all(bootstrap, topic)
        return got if got == want else None

    return wait_until(done, COMPACTION_DEADLINE_S, f"{topic} compacted to the latest value per key", 0.3)


def test_a_compacted_topic_keeps_the_latest_value_per_key_at_its_offset(broker_factory, topic_name):
    broker = broker_factory(CLEANER_SETTINGS)
    create_topic(broker.bootstrap, topic_name, config=COMPACT)
    latest = produce_rounds(broker.bootstrap, topic_name, ROUNDS, "a")
    got = compacted_to(broker.bootstrap, topic_name, latest)
    assert len(got) == KEYS
    # Offsets are kept: the log still starts at 0 and ends where the producer left it,
    # with the removed records' offsets a gap.
    low, high = watermarks(broker.bootstrap, topic_name, 0)
    assert (low, high) == (0, ROUNDS * KEYS)
    assert got[0][0] == (ROUNDS - 1) * KEYS


def test_tombstones_go_after_delete_retention_ms(broker_factory, topic_name):
    broker = broker_factory(CLEANER_SETTINGS)
    create_topic(broker.bootstrap, topic_name, config={**COMPACT, "delete.retention.ms": "1000"})
    latest = produce_rounds(broker.bootstrap, topic_name, 4, "t")
    deleted = [b"k1", b"k2", b"k3"]
    produce_all(producer(broker.bootstrap), topic_name, [Record(k, None) for k in deleted])
    # More data behind the tombstones, so their segment rolls and is cleaned.
    latest.update(produce_rounds(broker.bootstrap, topic_name, 2, "u", prefix="p"))
    for key in deleted:
        del latest[key]
    compacted_to(broker.bootstrap, topic_name, latest)


def test_keyless_records_are_refused(broker_factory, topic_name):
    broker = broker_factory(CLEANER_SETTINGS)
    create_topic(broker.bootstrap, topic_name, config=COMPACT)
    errors = []
    p = producer(broker.bootstrap, retries=0)
    p.produce(topic_name, value=b"no key", partition=0, on_delivery=lambda err, _msg: errors.append(err))
    p.flush(30)
    assert len(errors) == 1 and errors[0] is not None
    assert errors[0].code() == KafkaError.INVALID_RECORD, errors[0]


def describe(bootstrap: str, topic: str) -> dict[str, str]:
    resource = ConfigResource(ResourceType.TOPIC, topic)
    (entries,) = admin_op(bootstrap, "describe_configs", [resource]).values()
    return {k: v.value for k, v in entries.items()}


def test_switching_a_topic_to_compact_compacts_it(broker_factory, topic_name):
    broker = broker_factory(CLEANER_SETTINGS)
    create_topic(broker.bootstrap, topic_name, config={"segment.bytes": "2048", "segment.ms": "300"})
    latest = produce_rounds(broker.bootstrap, topic_name, 6, "s")
    assert describe(broker.bootstrap, topic_name)["cleanup.policy"] == "delete"
    assert len(read_all(broker.bootstrap, topic_name)) == 6 * KEYS
    resource = ConfigResource(
        ResourceType.TOPIC,
        topic_name,
        incremental_configs=[
            ConfigEntry("cleanup.policy", "compact", incremental_operation=AlterConfigOpType.SET),
            ConfigEntry("min.cleanable.dirty.ratio", "0.01", incremental_operation=AlterConfigOpType.SET),
        ],
    )
    assert list(admin_op(broker.bootstrap, "incremental_alter_configs", [resource]).values()) == [None]
    described = describe(broker.bootstrap, topic_name)
    assert described["cleanup.policy"] == "compact"
    assert described["min.cleanable.dirty.ratio"] == "0.01"
    for key in ("delete.retention.ms", "min.compaction.lag.ms", "max.compaction.lag.ms"):
        assert key in described, key
    compacted_to(broker.bootstrap, topic_name, latest)
    # AlterConfigs (the whole set) back to delete, then compact,delete.
    for policy in ("delete", "compact,delete"):
        full = ConfigResource(
            ResourceType.TOPIC,
            topic_name,
            set_config={"cleanup.policy": policy, "segment.bytes": "2048", "segment.ms": "300", "min.cleanable.dirty.ratio": "0.01"},
        )
        assert list(admin_op(broker.bootstrap, "alter_configs", [full]).values()) == [None]
        assert describe(broker.bootstrap, topic_name)["cleanup.policy"] == policy
    latest.update(produce_rounds(broker.bootstrap, topic_name, 3, "c"))
    compacted_to(broker.bootstrap, topic_name, latest)


class KeyedProducer(threading.Thread):
    """Produces rounds of values of every key until stopped; keeps key -> (offset, value) of
    the latest acknowledged record."""

    def __init__(self, bootstrap: str, topic: str, tag: str):
        super().__init__(daemon=True)
        self.topic, self.tag = topic, tag
        self.producer = producer(bootstrap, batch_size=1024, message_timeout_ms=5000, retries=0)
        self.acked: dict[bytes, tuple[int, bytes]] = {}
        self.stop = threading.Event()

    def on_delivery(self, err, msg):
        if err is None:
            key = msg.key()
            if key not in self.acked or self.acked[key][0] < msg.offset():
                self.acked[key] = (msg.offset(), msg.value())

    def run(self):
        n = 0
        while not self.stop.is_set():
            key = f"k{n % KEYS}".encode()
            try:
                self.producer.produce(self.topic, key=key, value=f"{self.tag}-{n}".encode() * 4, partition=0, on_delivery=self.on_delivery)
            except BufferError:
                pass
            self.producer.poll(0.002)
            n += 1
        self.producer.flush(2)


def test_kill9_while_cleaning_loses_no_acknowledged_latest_value(broker_factory, topic_name):
    broker = broker_factory(CLEANER_SETTINGS)
    create_topic(broker.bootstrap, topic_name, config=COMPACT)
    rng = random.Random(20261204)
    acked: dict[bytes, tuple[int, bytes]] = {}
    for trial in range(KILL_TRIALS):
        writer = KeyedProducer(broker.bootstrap, topic_name, f"t{trial}")
        writer.start()
        time.sleep(rng.uniform(0.5, 2.5))
        broker.kill()
        writer.stop.set()
        writer.join(30)
        for key, (offset, value) in writer.acked.items():
            if key not in acked or acked[key][0] < offset:
                acked[key] = (offset, value)
        broker.start()  # same data dir; SIGKILLed, so no graceful stop first
        rows = read_all(broker.bootstrap, topic_name)
        by_offset = {o: (k, v) for o, k, v in rows}
        for key, (offset, value) in acked.items():
            newer = [o for o, k, _ in rows if k == key and o > offset]
            assert by_offset.get(offset) == (key, value) or newer, f"trial {trial}: {key!r} lost its value at {offset}"
    # And the survivor is compacted: one record per key, none older than an acknowledgement.
    def one_per_key():
        rows = read_all(broker.bootstrap, topic_name)
        keys = [k for _, k, _ in rows]
        return rows if len(keys) == len(set(keys)) else None

    rows = wait_until(one_per_key, COMPACTION_DEADLINE_S, "compaction after the restarts", 0.3)
    latest = {k: o for o, k, _ in rows}
    for key, (offset, _) in acked.items():
        assert latest[key] >= offset, key
