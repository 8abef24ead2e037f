"""Partitioner plugins through the broker, end to end with real clients and the real wasm
plugins built from plugins/ (see plugin_support.py):

- partition agreement: confluent-kafka (CRC-32 by default) and kafka-python (murmur2) produce
  the same keys to a topic bound to the murmur2 plugin; every key lands in the one partition
  the Java client's murmur2 picks, whatever partition the client sent it to;
- idempotent producers (InitProducerId) keep working while their records are re-routed;
- compressed batches are re-routed with their codec;
- hostile plugins (infinite loop, memory bomb, panic, huge allocation in init, wrong world,
  garbage bytes, oversized module, bad parameters) are stopped or refused with a clear error
  while the broker keeps serving;
- hot reload under load: a partitioner file replaced in the plugin dir while a producer runs;
  no delivery fails and records after the swap follow the new plugin.
"""

from __future__ import annotations

import threading
import time

import pytest
from confluent_kafka import KafkaError
from confluent_kafka.admin import NewTopic
from kafka import KafkaProducer
from plugin_support import (
    crc32_partition,
    landed,
    murmur2_partition,
    plugin_dir,
    produce_v8,
    replace_file,
    wasm,
)

from clients import Record, admin_op, create_topic, produce_all, producer
from conftest import wait_until
from kafka_wire import POLICY_VIOLATION, record_batch

PARTITIONS = 6
KEYS = [f"customer-{i}".encode() for i in range(120)]


def start_with_plugins(broker_factory, tmp_path, plugins: dict[str, str], **settings):
    d = plugin_dir(tmp_path, plugins)
    return broker_factory(settings={"plugin.dir": str(d), **settings}), d


def create_topic_error(bootstrap: str, topic: str, config: dict[str, str]) -> KafkaError | None:
    new = NewTopic(topic, num_partitions=PARTITIONS, replication_factor=1, config=config)
    return admin_op(bootstrap, "create_topics", [new], operation_timeout=30, request_timeout=30)[topic]


def keys_by_partition(bootstrap: str, topic: str) -> dict[bytes, set[int]]:
    out: dict[bytes, set[int]] = {}
    for p, messages in landed(bootstrap, topic, PARTITIONS).items():
        for m in messages:
            out.setdefault(m.key(), set()).add(p)
    return out


def test_confluent_and_kafka_python_agree_with_the_java_murmur2_mapping(broker_factory, tmp_path, topic_name):
    broker, _ = start_with_plugins(broker_factory, tmp_path, {"murmur2": "murmur2"})
    create_topic(broker.bootstrap, topic_name, PARTITIONS, {"sluice.partitioner": "murmur2"})
    # confluent-kafka: librdkafka's default partitioner (CRC-32 for keyed records).
    p = producer(broker.bootstrap)
    delivered = produce_all(p, topic_name, [Record(k, b"from-librdkafka") for k in KEYS], partition=None)
    assert {d.partition for d in delivered} != {0}, "librdkafka spread the keys itself"
    # kafka-python: murmur2, as the Java client.
    kp = KafkaProducer(bootstrap_servers=broker.bootstrap, acks="all", linger_ms=5)
    futures = [kp.send(topic_name, key=k, value=b"from-kafka-python") for k in KEYS]
    for f in futures:
        f.get(timeout=60)
    kp.close()

    placed = keys_by_partition(broker.bootstrap, topic_name)
    assert set(placed) == set(KEYS)
    for key in KEYS:
        assert placed[key] == {murmur2_partition(key, PARTITIONS)}, key
    # The two clients disagree on some keys, so the broker really re-routed.
    assert any(crc32_partition(k, PARTITIONS) != murmur2_partition(k, PARTITIONS) for k in KEYS)


def keyed_batch(keys: list[bytes]) -> bytes:
    """An uncompressed batch with one record per key (kafka_wire builds single-key batches)."""
    import struct

    from kafka_wire import crc32c, i8, i16, i32, i64, record

    ts = int(time.time() * 1000)
    records = b"".join(record(i, k, b"v") for i, k in enumerate(keys))
    after_crc = i16(0) + i32(len(keys) - 1) + i64(ts) + i64(ts) + i64(-1) + i16(-1) + i32(-1)
    after_crc += i32(len(keys)) + records
    after_length = i32(0) + i8(2) + struct.pack(">I", crc32c(after_crc)) + after_crc
    return i64(0) + i32(len(after_length)) + after_length


def test_the_produce_response_reports_offset_minus_one_for_a_split_batch(broker_factory, tmp_path, topic_name):
    broker, _ = start_with_plugins(broker_factory, tmp_path, {"murmur2": "murmur2"})
    create_topic(broker.bootstrap, topic_name, PARTITIONS, {"sluice.partitioner": "murmur2"})
    # All keys of partition 2: the batch stays whole and gets its real base offset.
    home = [k for k in KEYS if murmur2_partition(k, PARTITIONS) == 2][:5]
    assert produce_v8(broker.bootstrap, topic_name, 2, keyed_batch(home)) == (0, 0, None)
    assert produce_v8(broker.bootstrap, topic_name, 2, keyed_batch(home)) == (0, len(home), None)
    # Sent to partition 2 but spread: NONE with base offset -1 (offset unknown).
    assert produce_v8(broker.bootstrap, topic_name, 2, keyed_batch(KEYS)) == (0, -1, None)
    placed = keys_by_partition(broker.bootstrap, topic_name)
    assert all(placed[k] == {murmur2_partition(k, PARTITIONS)} for k in KEYS)


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
def test_compressed_batches_are_rerouted_with_their_codec(broker_factory, tmp_path, topic_name, codec):
    broker, _ = start_with_plugins(broker_factory, tmp_path, {"murmur2": "murmur2"})
    create_topic(broker.bootstrap, topic_name, PARTITIONS, {"sluice.partitioner": "murmur2"})
    p = producer(broker.bootstrap, compression_type=codec, linger_ms=50)
    produce_all(p, topic_name, [Record(k, b"x" * 300) for k in KEYS], partition=0)
    placed = keys_by_partition(broker.bootstrap, topic_name)
    assert all(placed[k] == {murmur2_partition(k, PARTITIONS)} for k in KEYS)


def test_an_idempotent_producer_works_through_a_partitioner(broker_factory, tmp_path, topic_name):
    broker, _ = start_with_plugins(broker_factory, tmp_path, {"murmur2": "murmur2"})
    create_topic(broker.bootstrap, topic_name, PARTITIONS, {"sluice.partitioner": "murmur2"})
    p = producer(broker.bootstrap, enable_idempotence=True)
    for round_ in range(3):
        produce_all(p, topic_name, [Record(k, b"r%d" % round_) for k in KEYS], partition=None)
    placed = keys_by_partition(broker.bootstrap, topic_name)
    assert all(placed[k] == {murmur2_partition(k, PARTITIONS)} for k in KEYS)
    counts = landed(broker.bootstrap, topic_name, PARTITIONS)
    assert sum(len(m) for m in counts.values()) == 3 * len(KEYS)


# --- hostile plugins ---------------------------------------------------------------------


def produce_one_error(bootstrap: str, topic: str, key: bytes) -> KafkaError | None:
    """Produces one record (no retries) and returns its delivery error."""
    result: list = []
    p = producer(bootstrap, retries=0, message_timeout_ms=30000)
    p.produce(topic, key=key, value=b"v", partition=0, on_delivery=lambda err, msg: result.append(err))
    assert p.flush(60) == 0
    return result[0]


def assert_serving(bootstrap: str, topic: str):
    """The broker still creates topics and takes produces."""
    create_topic(bootstrap, topic + "-alive", 1)
    produce_all(producer(bootstrap), topic + "-alive", [Record(b"k", b"still serving")])


HOSTILE_ON_PRODUCE = [
    ("hostile-infinite-loop", b"spin", "ran past plugin.call.timeout.ms"),
    ("hostile-memory-bomb", b"bomb", "plugin.memory.bytes.max"),
    ("hostile-panic", b"panic", "trapped"),
    ("hostile-panic", b"range", "returned partition 7"),
]


@pytest.mark.parametrize(("plugin", "key", "message"), HOSTILE_ON_PRODUCE)
def test_a_failing_partitioner_fails_the_produce_with_policy_violation(
    broker_factory, tmp_path, topic_name, plugin, key, message
):
    broker, _ = start_with_plugins(broker_factory, tmp_path, {plugin: plugin})
    create_topic(broker.bootstrap, topic_name, PARTITIONS, {"sluice.partitioner": plugin})
    err = produce_one_error(broker.bootstrap, topic_name, key)
    assert err is not None and err.code() == KafkaError.POLICY_VIOLATION, err
    # librdkafka does not show the response's error_message; Produce v8 on the wire does.
    code, base_offset, text = produce_v8(broker.bootstrap, topic_name, 0, record_batch([b"v"], key=key))
    assert (code, base_offset) == (POLICY_VIOLATION, -1)
    assert message in text and plugin in text, text
    # The next batch gets a fresh instance; a harmless key goes through.
    harmless = b"ok" if plugin == "hostile-infinite-loop" else b"fine"
    assert produce_one_error(broker.bootstrap, topic_name, harmless) is None
    assert_serving(broker.bootstrap, topic_name)


@pytest.mark.parametrize(
    ("plugin", "config", "message"),
    [
        ("hostile-init-alloc", {}, "plugin.memory.bytes.max"),
        ("hostile-filter-kind", {}, "is a filter, not a partitioner"),
        ("garbage", {}, "no plugin named `garbage`"),
        ("oversized", {}, "no plugin named `oversized`"),
        ("murmur2", {"sluice.partitioner.params": "field=x"}, "rejected its parameters"),
        ("json-field", {}, "sluice.partitioner.params"),
        ("murmur2", {"sluice.partitioner.params": "novalue"}, "is not key=value"),
        ("nonexistent", {}, "no plugin named `nonexistent`"),
    ],
)
def test_a_plugin_that_cannot_partition_is_refused_at_create_topics(
    broker_factory, tmp_path, topic_name, plugin, config, message
):
    plugins = {p: p for p in ["hostile-init-alloc", "hostile-filter-kind", "murmur2", "json-field"]}
    d = plugin_dir(tmp_path, plugins)
    (d / "garbage.wasm").write_bytes(b"\x00asm this is not wasm at all")
    (d / "oversized.wasm").write_bytes(wasm("murmur2") + b"\x00" * 70_000)
    broker = broker_factory(settings={"plugin.dir": str(d), "plugin.module.bytes.max": "64 KiB"})
    err = create_topic_error(broker.bootstrap, topic_name, {"sluice.partitioner": plugin, **config})
    assert err is not None and err.code() == KafkaError.INVALID_CONFIG, err
    assert message in err.str(), err.str()
    assert_serving(broker.bootstrap, topic_name)


def test_garbage_dropped_over_a_working_plugin_never_replaces_it(broker_factory, tmp_path, topic_name):
    broker, d = start_with_plugins(broker_factory, tmp_path, {"router": "murmur2"})
    create_topic(broker.bootstrap, topic_name, PARTITIONS, {"sluice.partitioner": "router"})
    replace_file(d / "router.wasm", b"\x00asm\x01\x00\x00\x00garbage")
    replace_file(d / "router.wasm", wasm("hostile-filter-kind"))
    # Produce only once the watcher has looked at the filter and kept the partitioner the
    # topic is bound to: a plugin of another kind never takes over a name in use.
    wait_until(
        lambda: "a filter cannot replace it" in broker.log_path.read_text(errors="replace"),
        30,
        "the watcher to refuse the filter dropped over the partitioner",
    )
    p = producer(broker.bootstrap)
    produce_all(p, topic_name, [Record(k, b"v") for k in KEYS], partition=None)
    placed = keys_by_partition(broker.bootstrap, topic_name)
    assert all(placed[k] == {murmur2_partition(k, PARTITIONS)} for k in KEYS)


# --- hot reload ----------------------------------------------------------------------------


def test_hot_reload_under_load_switches_records_to_the_new_partitioner(broker_factory, tmp_path, topic_name):
    broker, d = start_with_plugins(broker_factory, tmp_path, {"router": "murmur2"})
    create_topic(broker.bootstrap, topic_name, PARTITIONS, {"sluice.partitioner": "router"})
    # A key each plugin sends to a different partition, to see when the swap is live.
    probe = next(k for k in KEYS if murmur2_partition(k, PARTITIONS) != crc32_partition(k, PARTITIONS))
    errors: list = []
    stop = threading.Event()
    sent = [0]

    def run():
        p = producer(broker.bootstrap, linger_ms=2)
        i = 0
        while not stop.is_set():
            key = KEYS[i % len(KEYS)]
            p.produce(
                topic_name,
                key=key,
                value=b"load-%d" % i,
                on_delivery=lambda err, msg: err and errors.append(err),
            )
            p.poll(0)
            i += 1
            if i % 200 == 0:
                p.flush(30)
        assert p.flush(60) == 0
        sent[0] = i

    t = threading.Thread(target=run)
    t.start()
    try:
        wait_until(
            lambda: sum(len(m) for m in landed(broker.bootstrap, topic_name, PARTITIONS).values()) > 500,
            60,
            "load before the swap",
        )
        replace_file(d / "router.wasm", wasm("crc32"))

        def probe_follows_crc32():
            produce_all(producer(broker.bootstrap), topic_name, [Record(probe, b"probe")], partition=None)
            placed = keys_by_partition(broker.bootstrap, topic_name)
            return crc32_partition(probe, PARTITIONS) in placed[probe]

        swapped_at = time.monotonic()
        wait_until(probe_follows_crc32, 10, "the new partitioner to take over", interval_s=0.1)
        assert time.monotonic() - swapped_at < 5
        after = [Record(k, b"after-swap") for k in KEYS]
        produce_all(producer(broker.bootstrap), topic_name, after, partition=None)
    finally:
        stop.set()
        t.join(120)
    assert not errors, errors[:5]
    assert sent[0] > 0
    for p, messages in landed(broker.bootstrap, topic_name, PARTITIONS).items():
        for m in messages:
            if m.value() == b"after-swap":
                assert p == crc32_partition(m.key(), PARTITIONS), m.key()
            elif m.value().startswith(b"load-") and p != murmur2_partition(m.key(), PARTITIONS):
                # Every load record follows one of the two plugins.
                assert p == crc32_partition(m.key(), PARTITIONS), m.key()
