"""Idempotent producers: the broker deduplicates retried batches by (producer id, epoch,
sequence), so a retry never stores a record twice, across lost answers, cut connections,
restarts and kill -9.

Covers:
- a confluent-kafka producer (enable.idempotence=true, acks=all) sends numbered records
  through `txn_support.FaultProxy` while its connections are cut, and while the broker's
  answers are dropped and then cut (the broker appended those batches; the client retries
  them): read back from offset 0, every number is there exactly once, in order per
  partition, at the offset its delivery report gave. The broker advertises the proxy
  (`advertised.listeners`), so every connection the client opens goes through it;
- the same while the broker is SIGKILLed and restarted on its data dir (the proxy hides the
  new port): producer state is rebuilt from the log;
- byte level (raw Produce v3 with `txn_support.producer_batch`): the same batch twice is
  answered with the first base offset and nothing appended (also for an older one of the
  last batches); a sequence gap is OUT_OF_ORDER_SEQUENCE_NUMBER; an older epoch after a newer
  one is INVALID_PRODUCER_EPOCH (Kafka since KIP-588; PRODUCER_FENCED also accepted); the
  next in-order sequence is appended;
- the same batch resent after a graceful restart, after kill -9 (sent after its acks=all
  answer), and after a graceful restart then more batches then kill -9, is a duplicate: same
  base offset, nothing appended; a sequence gap is still refused (the state survived).
"""

from __future__ import annotations

import threading
import time

import pytest
from confluent_kafka import Producer

import kafka_messages as km
import kafka_wire as kw
from clients import consume_partition, create_topic, produce_with_backpressure, watermarks
from kafka_wire import KafkaConnection
from txn_support import (
    INVALID_PRODUCER_EPOCH,
    OUT_OF_ORDER_SEQUENCE_NUMBER,
    PRODUCER_FENCED,
    FaultProxy,
    describe_producers,
    init_producer_id,
    producer_batch,
)

PARTITIONS = 3
RECORDS = 20_000
CHUNKS = 8
# Produce answers the proxy drops (at least) before each of those cuts; one is enough to make
# the client resend a batch the broker appended (librdkafka keeps up to 5 in flight).
DROPPED_PRODUCE_ANSWERS = 1
RECORDS_KILL9 = 6000
RESTART_GAP_S = 0.5
FLUSH_DEADLINE_S = 90.0


@pytest.fixture
def proxy():
    with FaultProxy() as p:
        yield p


def proxied_broker(broker_factory, proxy: FaultProxy, **settings):
    broker = broker_factory(settings={"advertised.listeners": proxy.advertised_listeners, **settings})
    proxy.upstream = broker.port
    return broker


def idempotent_producer(bootstrap: str, errors: list) -> Producer:
    return Producer(
        {
            "bootstrap.servers": bootstrap,
            "enable.idempotence": True,
            "acks": "all",
            "linger.ms": 5,
            "batch.num.messages": 500,
            # No message may time out: a timed-out idempotent batch is the client giving up.
            "message.timeout.ms": 120_000,
            "reconnect.backoff.ms": 50,
            "reconnect.backoff.max.ms": 300,
            "error_cb": lambda err: errors.append(err),
            "log_level": 2,
        }
    )


def value_of(n: int) -> bytes:
    return f"n={n:08d}".encode()


def produce_numbered(p: Producer, topic: str, count: int, fault, chunks: int = CHUNKS) -> dict[int, tuple[int, int]]:
    """Produces records 0..count-1 (record n to partition n % PARTITIONS) in `chunks`: chunk i
    is handed to the client by `fault(i, hand_over)`, which calls `hand_over()` once, around
    it whatever fault it injects. Returns number -> (partition, offset) from the delivery
    reports; fails on any delivery error."""
    delivered: dict[int, tuple[int, int]] = {}
    failed: list[str] = []

    def report(err, msg):
        n = int(msg.value().decode().split("=")[1])
        if err is not None:
            failed.append(f"{n}: {err}")
        else:
            if n in delivered:
                failed.append(f"{n}: reported delivered twice")
            delivered[n] = (msg.partition(), msg.offset())

    per_chunk = count // chunks
    for i in range(chunks):
        end = count if i == chunks - 1 else (i + 1) * per_chunk

        def hand_over(first=i * per_chunk, end=end):
            for n in range(first, end):
                produce_with_backpressure(p, topic, value=value_of(n), partition=n % PARTITIONS, on_delivery=report)
            p.poll(0)

        fault(i, hand_over)
    remaining = p.flush(FLUSH_DEADLINE_S)
    assert remaining == 0, f"{remaining} records undelivered after {FLUSH_DEADLINE_S}s"
    assert not failed, f"delivery errors: {failed[:5]}"
    assert len(delivered) == count
    return delivered


def assert_exactly_once(bootstrap: str, topic: str, count: int, delivered: dict[int, tuple[int, int]]):
    """Every number 0..count-1 is in the log exactly once, in order per partition, at its
    reported offset, and the log holds nothing else."""
    for partition in range(PARTITIONS):
        expected = sorted(n for n in range(count) if n % PARTITIONS == partition)
        low, high = watermarks(bootstrap, topic, partition)
        assert (low, high) == (0, len(expected)), (
            f"partition {partition}: watermarks {(low, high)}, {len(expected)} distinct records sent "
            f"({high - len(expected)} extra: duplicates appended)"
        )
        messages = consume_partition(bootstrap, topic, partition, high)
        numbers = [int(m.value().decode().split("=")[1]) for m in messages]
        assert len(set(numbers)) == len(numbers), f"partition {partition}: duplicated numbers"
        assert numbers == expected, f"partition {partition}: records missing or out of order"
        assert [m.offset() for m in messages] == list(range(high))
        for m, n in zip(messages, numbers, strict=True):
            assert delivered[n] == (partition, m.offset()), f"record {n} reported at {delivered[n]}"


def test_retries_through_cut_connections_store_each_record_once(broker_factory, proxy, topic_name):
    broker = proxied_broker(broker_factory, proxy, **{"sluice.acks.all.fsync": "false"})
    create_topic(broker.bootstrap, topic_name, partitions=PARTITIONS)
    errors: list = []
    p = idempotent_producer(proxy.bootstrap, errors)

    def fault(i: int, hand_over):
        if i % 2 == 0:
            # Appended by the broker, never acknowledged: the client sends these batches again.
            proxy.blackhole_then_cut(hand_over, answers=DROPPED_PRODUCE_ANSWERS)
        else:
            hand_over()
            proxy.cut()

    delivered = produce_numbered(p, topic_name, RECORDS, fault)
    fatal = [e for e in errors if e.fatal()]
    assert not fatal, f"fatal producer errors: {fatal}"
    assert proxy.dropped[kw.API_PRODUCE] >= CHUNKS // 2 * DROPPED_PRODUCE_ANSWERS
    assert proxy.cuts == CHUNKS
    assert_exactly_once(proxy.bootstrap, topic_name, RECORDS, delivered)


def test_kill9_while_producing_keeps_each_record_once(broker_factory, proxy, topic_name):
    broker = proxied_broker(broker_factory, proxy)
    create_topic(broker.bootstrap, topic_name, partitions=PARTITIONS)
    errors: list = []
    p = idempotent_producer(proxy.bootstrap, errors)
    killed = threading.Event()

    def kill():
        broker.kill()
        proxy.upstream = None

    def fault(i: int, hand_over):
        if i == 2:
            # Batches the broker made durable and answered (acks=all), the answers lost, then
            # SIGKILL: the restarted broker must know them from its log alone.
            proxy.blackhole_then_cut(hand_over, answers=DROPPED_PRODUCE_ANSWERS, before_cut=kill)
            time.sleep(RESTART_GAP_S)  # the client retries against a dead address meanwhile
            broker.start()
            proxy.upstream = broker.port
            killed.set()
        elif i == 5:
            proxy.blackhole_then_cut(hand_over, answers=DROPPED_PRODUCE_ANSWERS)
        else:
            hand_over()

    delivered = produce_numbered(p, topic_name, RECORDS_KILL9, fault)
    assert killed.is_set()
    fatal = [e for e in errors if e.fatal()]
    assert not fatal, f"fatal producer errors: {fatal}"
    assert_exactly_once(proxy.bootstrap, topic_name, RECORDS_KILL9, delivered)


# --- byte level --------------------------------------------------------------------------------


def latest(conn: KafkaConnection, topic: str) -> int:
    [(_t, _p, error, offset)] = km.list_offsets(conn, [(topic, 0)])
    assert error == kw.NONE
    return offset


def log_values(conn: KafkaConnection, topic: str) -> list[tuple[int, bytes | None]]:
    result = conn.fetch(topic, 0, 0)
    assert result.error_code == kw.NONE
    return kw.batch_record_values(result.records)


def test_duplicates_gaps_and_old_epochs_byte_level(broker, topic_name):
    create_topic(broker.bootstrap, topic_name)
    with KafkaConnection(broker.bootstrap) as conn:
        # A plain record first, so the idempotent batch does not start at offset 0.
        assert conn.produce(topic_name, 0, kw.record_batch([b"plain"])).base_offset == 0
        ids = init_producer_id(conn)
        assert ids.error_code == kw.NONE and ids.producer_id >= 0 and ids.epoch == 0, ids
        pid = ids.producer_id

        first = producer_batch([b"s0", b"s1", b"s2"], pid, 0, 0)
        r = conn.produce(topic_name, 0, first)
        assert (r.error_code, r.base_offset) == (kw.NONE, 1)
        assert latest(conn, topic_name) == 4

        again = conn.produce(topic_name, 0, first)
        assert (again.error_code, again.base_offset) == (kw.NONE, 1), "a duplicate is answered with its offset"
        assert latest(conn, topic_name) == 4, "a duplicate batch was appended"

        gap = conn.produce(topic_name, 0, producer_batch([b"s5"], pid, 0, 5))
        assert gap.error_code == OUT_OF_ORDER_SEQUENCE_NUMBER, gap
        assert latest(conn, topic_name) == 4

        nxt = conn.produce(topic_name, 0, producer_batch([b"s3", b"s4"], pid, 0, 3))
        assert (nxt.error_code, nxt.base_offset) == (kw.NONE, 4)
        # An older one of the producer's last batches is still recognised.
        older = conn.produce(topic_name, 0, first)
        assert (older.error_code, older.base_offset) == (kw.NONE, 1)
        assert latest(conn, topic_name) == 6

        # A newer epoch starts again at sequence 0 ...
        bumped = conn.produce(topic_name, 0, producer_batch([b"e1s0"], pid, 1, 0))
        assert (bumped.error_code, bumped.base_offset) == (kw.NONE, 6)
        # ... after which the old epoch is refused.
        stale = conn.produce(topic_name, 0, producer_batch([b"e0s5"], pid, 0, 5))
        assert stale.error_code in (INVALID_PRODUCER_EPOCH, PRODUCER_FENCED), stale
        assert latest(conn, topic_name) == 7
        after = conn.produce(topic_name, 0, producer_batch([b"e1s1"], pid, 1, 1))
        assert (after.error_code, after.base_offset) == (kw.NONE, 7)

        assert log_values(conn, topic_name) == list(
            enumerate([b"plain", b"s0", b"s1", b"s2", b"s3", b"s4", b"e1s0", b"e1s1"])
        )

        described = describe_producers(conn, topic_name, 0)
        assert described.error_code == kw.NONE, described
        [state] = described.producers
        assert (state.producer_id, state.epoch, state.last_sequence) == (pid, 1, 1), state
        assert state.current_txn_start_offset == -1, "an idempotent producer has no open transaction"
        missing = describe_producers(conn, topic_name, 7)
        assert missing.error_code == kw.UNKNOWN_TOPIC_OR_PARTITION, missing


@pytest.mark.parametrize("how", ["graceful", "kill9", "graceful-then-kill9"])
def test_duplicate_after_restart_is_not_appended(broker, topic_name, how):
    """`graceful-then-kill9`: the first batch before a graceful restart (whatever producer
    state the shutdown saves), the second after it, then SIGKILL: the state comes from what
    was saved plus the log after it."""
    create_topic(broker.bootstrap, topic_name)
    with KafkaConnection(broker.bootstrap) as conn:
        ids = init_producer_id(conn)
        assert ids.error_code == kw.NONE, ids
        first = producer_batch([b"a0", b"a1"], ids.producer_id, ids.epoch, 0)
        second = producer_batch([b"a2"], ids.producer_id, ids.epoch, 2)
        assert conn.produce(topic_name, 0, first, acks=-1).base_offset == 0
    if how == "graceful-then-kill9":
        broker.restart()
    with KafkaConnection(broker.bootstrap) as conn:
        r = conn.produce(topic_name, 0, second, acks=-1)
        assert (r.error_code, r.base_offset) == (kw.NONE, 2)

    if how == "graceful":
        broker.restart()
    else:
        broker.kill()  # after the acks=all answers: both batches are durable
        broker.start()

    with KafkaConnection(broker.bootstrap) as conn:
        assert latest(conn, topic_name) == 3
        again = conn.produce(topic_name, 0, second, acks=-1)
        assert (again.error_code, again.base_offset) == (kw.NONE, 2), f"after {how}: {again}"
        older = conn.produce(topic_name, 0, first, acks=-1)
        assert (older.error_code, older.base_offset) == (kw.NONE, 0), f"after {how}: {older}"
        assert latest(conn, topic_name) == 3, f"a duplicate was appended after {how}"
        gap = conn.produce(topic_name, 0, producer_batch([b"a9"], ids.producer_id, ids.epoch, 9), acks=-1)
        assert gap.error_code == OUT_OF_ORDER_SEQUENCE_NUMBER, f"sequence state lost after {how}: {gap}"
        nxt = conn.produce(topic_name, 0, producer_batch([b"a3"], ids.producer_id, ids.epoch, 3), acks=-1)
        assert (nxt.error_code, nxt.base_offset) == (kw.NONE, 3)
        assert log_values(conn, topic_name) == list(enumerate([b"a0", b"a1", b"a2", b"a3"]))
        [state] = describe_producers(conn, topic_name, 0).producers
        assert (state.producer_id, state.last_sequence) == (ids.producer_id, 3), f"after {how}: {state}"
