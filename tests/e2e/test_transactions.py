"""Kafka transactions with real clients: the transaction coordinator (InitProducerId with a
transactional id, AddPartitionsToTxn, AddOffsetsToTxn, TxnOffsetCommit, EndTxn), COMMIT and
ABORT control markers, the last stable offset (LSO), Fetch and ListOffsets with
isolation.level=read_committed, and the admin APIs DescribeProducers, DescribeTransactions
and ListTransactions.

Covers:
- commit, abort, commit (confluent-kafka): a read_committed consumer sees exactly the committed
  records, a read_uncommitted one all of them and never a control record as data; a raw Fetch
  shows one marker per transaction (COMMIT, ABORT, COMMIT) and, read_committed, the aborted
  transaction in `aborted_transactions`;
- an open transaction holds read_committed consumers at its first offset: the consumer's EOF,
  raw ListOffsets v2 (isolation READ_COMMITTED), Fetch's last_stable_offset and AdminClient
  list_offsets(READ_COMMITTED) all equal the LSO, read_uncommitted reads on to the high
  watermark; the commit releases it;
- consume-transform-produce with a consumer group and send_offsets_to_transaction, one round
  aborted and redone from the committed offsets: the group's committed offset is the input's
  end and read_committed output holds each input record exactly once;
- zombie fencing: a second producer with the same transactional.id fences the first (a fatal
  error on its next commit), its open transaction is aborted, the second commits;
- a transaction left open past transaction.timeout.ms is aborted by the broker (the LSO moves
  past it, its records are never read committed, its producer's commit fails);
- kill -9 with a transaction open: after the restart the transaction is aborted on its
  timeout, and a new producer with the same transactional.id commits;
- kafka-python's transactional producer (commit and abort), read by confluent-kafka and
  kafka-python read_committed consumers;
- raw ListTransactions / DescribeTransactions / DescribeProducers (confluent-kafka 2.12's
  AdminClient has none of them) while a transaction is open and after it commits.
Every client call that can block takes a deadline (`bounded` for those that take none).
"""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, IsolationLevel, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import OffsetSpec

import kafka_wire as kw
from clients import DEFAULT_TIMEOUT_S, Record, admin, consumer, create_topic, produce_all, producer
from conftest import wait_until
from kafka_wire import Fields, KafkaConnection
from txn_support import (
    CONTROL_ABORT,
    CONTROL_COMMIT,
    INVALID_PRODUCER_EPOCH,
    PRODUCER_FENCED,
    READ_COMMITTED,
    READ_UNCOMMITTED,
    batch_headers,
    bounded,
    control_markers,
    describe_producers,
    describe_transactions,
    fetch_isolated,
    init_producer_id,
    list_offset,
    list_transactions,
)

# A failing coordinator makes init_transactions wait this long, then the test fails.
TXN_CALL_TIMEOUT_S = 20.0
DRAIN_DEADLINE_S = 30.0
# transaction.timeout.ms of the tests that wait for the broker to abort; Kafka's coordinator
# looks for expired transactions every 10 s (transaction.abort.timed.out.transaction.cleanup.interval.ms).
SHORT_TXN_TIMEOUT_MS = 3000
TIMEOUT_ABORT_DEADLINE_S = 45.0
TRANSACTIONAL_ID_NOT_FOUND = 105
BROKER_SETTINGS = {"group.initial.rebalance.delay.ms": "0"}


class TxnProducer(Producer):
    """A confluent-kafka producer that remembers its broker and transactional id (for `init`)."""

    def __init__(self, conf: dict, bootstrap: str, transactional_id: str):
        super().__init__(conf)
        self.bootstrap = bootstrap
        self.transactional_id = transactional_id


def txn_producer(bootstrap: str, transactional_id: str, **config) -> TxnProducer:
    conf = {
        "bootstrap.servers": bootstrap,
        "transactional.id": transactional_id,
        "linger.ms": 5,
        "reconnect.backoff.max.ms": 300,
        "log_level": 2,
    }
    conf.update(config)
    return TxnProducer(conf, bootstrap, transactional_id)


def init(p: TxnProducer):
    try:
        p.init_transactions(TXN_CALL_TIMEOUT_S)
    except KafkaException as err:
        why = coordinator_diagnosis(p.bootstrap, p.transactional_id)
        pytest.fail(f"init_transactions failed: {err.args[0]!r}; {why}")


def coordinator_diagnosis(bootstrap: str, transactional_id: str) -> str:
    """What the broker answers the first two requests of init_transactions, raw."""
    with KafkaConnection(bootstrap) as conn:
        r = conn.request(kw.API_FIND_COORDINATOR, 1, Fields().string(transactional_id).i8(1))
        r.i32()  # throttle time
        find_error = r.i16()
        ids = init_producer_id(conn, transactional_id)
    return f"FindCoordinator(TRANSACTION) error {find_error}, InitProducerId(transactional id) error {ids.error_code}"


def send(p: Producer, topic: str, values: list[bytes], partition: int = 0):
    """Produces `values` in the open transaction and waits for their delivery reports."""
    errors = []
    for v in values:
        p.produce(topic, value=v, partition=partition, on_delivery=lambda err, _m: err and errors.append(err))
    assert p.flush(DEFAULT_TIMEOUT_S) == 0, "records undelivered"
    assert not errors, f"delivery errors: {errors[:5]}"


def watermarks(bootstrap: str, topic: str, partition: int) -> tuple[int, int]:
    """(low, high) watermarks as a read_uncommitted consumer sees them (librdkafka's default
    read_committed would report the LSO as the high watermark)."""
    c = consumer(bootstrap, **{"isolation.level": "read_uncommitted"})
    try:
        return c.get_watermark_offsets(TopicPartition(topic, partition), timeout=30, cached=False)
    finally:
        c.close()


def committed_round(p: Producer, topic: str, values: list[bytes], partition: int = 0):
    p.begin_transaction()
    send(p, topic, values, partition)
    p.commit_transaction(TXN_CALL_TIMEOUT_S)


def drain(bootstrap: str, topic: str, isolation: str, partition: int = 0) -> tuple[list[bytes], int]:
    """Reads the partition from offset 0 until the consumer reports its end (the LSO under
    read_committed, the high watermark under read_uncommitted): (values, end offset)."""
    c = consumer(bootstrap, **{"isolation.level": isolation})
    try:
        c.assign([TopicPartition(topic, partition, 0)])
        values = []
        deadline = time.monotonic() + DRAIN_DEADLINE_S
        while True:
            assert time.monotonic() < deadline, f"no end of partition within {DRAIN_DEADLINE_S}s ({isolation})"
            for msg in c.consume(num_messages=1000, timeout=0.5):
                if msg.error():
                    assert msg.error().code() == KafkaError._PARTITION_EOF, f"consume error: {msg.error()}"
                    return values, msg.offset()
                values.append(msg.value())
    finally:
        c.close()


def values(prefix: str, n: int) -> list[bytes]:
    return [f"{prefix}{i}".encode() for i in range(n)]


def lso(bootstrap: str, topic: str, partition: int = 0) -> int:
    with KafkaConnection(bootstrap) as conn:
        return list_offset(conn, topic, partition, READ_COMMITTED)


def wait_lso(bootstrap: str, topic: str, expected: int, timeout_s: float = DRAIN_DEADLINE_S, partition: int = 0):
    """Waits for the LSO to reach `expected`: Kafka answers EndTxn once the outcome is in its
    transaction log and writes the markers after, so a commit's effect is awaited, not assumed."""
    wait_until(lambda: lso(bootstrap, topic, partition) >= expected, timeout_s, f"the LSO to reach {expected}", 0.1)
    assert lso(bootstrap, topic, partition) == expected


def admin_latest(bootstrap: str, topic: str, isolation: IsolationLevel) -> int:
    client = admin(bootstrap)
    futures = client.list_offsets(
        {TopicPartition(topic, 0): OffsetSpec.latest()}, isolation_level=isolation, request_timeout=30
    )
    [(_tp, future)] = futures.items()
    return future.result(timeout=DEFAULT_TIMEOUT_S).offset


def is_fenced(err: KafkaError) -> bool:
    return err.fatal() or err.code() in (KafkaError._FENCED, PRODUCER_FENCED, INVALID_PRODUCER_EPOCH)


def test_commit_abort_commit_read_committed_and_uncommitted(broker, topic_name):
    create_topic(broker.bootstrap, topic_name)
    p = txn_producer(broker.bootstrap, f"{topic_name}-tx")
    init(p)
    a, b, c = values("a", 10), values("b", 10), values("c", 10)
    committed_round(p, topic_name, a)
    p.begin_transaction()
    send(p, topic_name, b)
    p.abort_transaction(TXN_CALL_TIMEOUT_S)
    committed_round(p, topic_name, c)

    # Records at 0-9, COMMIT at 10, 11-20, ABORT at 21, 22-31, COMMIT at 32.
    wait_lso(broker.bootstrap, topic_name, 33)
    assert watermarks(broker.bootstrap, topic_name, 0) == (0, 33)
    assert drain(broker.bootstrap, topic_name, "read_committed") == (a + c, 33)
    assert drain(broker.bootstrap, topic_name, "read_uncommitted") == (a + b + c, 33)

    with KafkaConnection(broker.bootstrap) as conn:
        raw = fetch_isolated(conn, topic_name, 0, 0, READ_UNCOMMITTED)
        assert raw.error_code == kw.NONE
        markers = control_markers(raw.records)
        assert [(off, kind) for off, _pid, kind in markers] == [
            (10, CONTROL_COMMIT),
            (21, CONTROL_ABORT),
            (32, CONTROL_COMMIT),
        ]
        pid = markers[0][1]
        assert pid >= 0 and {m[1] for m in markers} == {pid}
        committed = fetch_isolated(conn, topic_name, 0, 0, READ_COMMITTED)
        assert committed.error_code == kw.NONE and committed.last_stable_offset == 33
        assert (pid, 11) in committed.aborted, f"aborted transactions {committed.aborted}"


def test_open_transaction_holds_the_last_stable_offset(broker, topic_name):
    create_topic(broker.bootstrap, topic_name)
    p = txn_producer(broker.bootstrap, f"{topic_name}-tx")
    init(p)
    done = values("done", 5)
    committed_round(p, topic_name, done)  # 0-4, COMMIT at 5
    wait_lso(broker.bootstrap, topic_name, 6)
    p.begin_transaction()
    pending = values("open", 5)
    send(p, topic_name, pending)  # 6-10, not committed

    assert watermarks(broker.bootstrap, topic_name, 0) == (0, 11)
    assert drain(broker.bootstrap, topic_name, "read_committed") == (done, 6)
    assert drain(broker.bootstrap, topic_name, "read_uncommitted") == (done + pending, 11)
    with KafkaConnection(broker.bootstrap) as conn:
        assert list_offset(conn, topic_name, 0, READ_COMMITTED) == 6
        assert list_offset(conn, topic_name, 0, READ_UNCOMMITTED) == 11
        raw = fetch_isolated(conn, topic_name, 0, 0, READ_COMMITTED)
        assert (raw.error_code, raw.high_watermark, raw.last_stable_offset) == (kw.NONE, 11, 6)
        batches = batch_headers(raw.records)
        data = [o for b in batches if not b.is_control for o in range(b.base_offset, b.last_offset + 1)]
        assert data == list(range(5)) and max(b.last_offset for b in batches) < 6, (
            f"read_committed Fetch returned batches at or past the LSO: {batches}"
        )
    assert admin_latest(broker.bootstrap, topic_name, IsolationLevel.READ_COMMITTED) == 6
    assert admin_latest(broker.bootstrap, topic_name, IsolationLevel.READ_UNCOMMITTED) == 11

    p.commit_transaction(TXN_CALL_TIMEOUT_S)
    wait_lso(broker.bootstrap, topic_name, 12)
    assert drain(broker.bootstrap, topic_name, "read_committed") == (done + pending, 12)


def test_consume_transform_produce_exactly_once(broker_factory, topic_name):
    broker = broker_factory(settings=BROKER_SETTINGS)
    source, sink, group = f"{topic_name}-in", f"{topic_name}-out", f"{topic_name}-g"
    create_topic(broker.bootstrap, source)
    create_topic(broker.bootstrap, sink)
    n = 300
    inputs = values("in", n)
    produce_all(producer(broker.bootstrap), source, [Record(None, v) for v in inputs])

    p = txn_producer(broker.bootstrap, f"{topic_name}-tx")
    init(p)
    c = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": group,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "isolation.level": "read_committed",
            "session.timeout.ms": 10_000,
        }
    )
    tp = TopicPartition(source, 0)
    aborted_outputs = 0
    try:
        c.subscribe([source])
        rounds = 0
        deadline = time.monotonic() + DRAIN_DEADLINE_S
        done = 0
        while done < n:
            assert time.monotonic() < deadline, f"{done} of {n} input records processed before the deadline"
            batch = [m for m in c.consume(num_messages=40, timeout=0.5) if not m.error()]
            if not batch:
                continue
            rounds += 1
            p.begin_transaction()
            send(p, sink, [m.value().replace(b"in", b"out") for m in batch])
            positions = c.position(c.assignment())
            p.send_offsets_to_transaction(positions, c.consumer_group_metadata(), TXN_CALL_TIMEOUT_S)
            if rounds == 3:
                p.abort_transaction(TXN_CALL_TIMEOUT_S)
                aborted_outputs += len(batch)
                # The aborted round's offsets were not committed: rewind to what was.
                [before] = c.committed([tp], timeout=30)
                assert before.offset == done, f"an aborted transaction moved the group to {before.offset}"
                c.seek(TopicPartition(source, 0, before.offset))
                continue
            p.commit_transaction(TXN_CALL_TIMEOUT_S)
            done = batch[-1].offset() + 1
        assert rounds > 3 and aborted_outputs > 0
        [committed] = c.committed([tp], timeout=30)
        assert committed.offset == n
    finally:
        c.close()

    wait_lso(broker.bootstrap, sink, watermarks(broker.bootstrap, sink, 0)[1])
    out, end = drain(broker.bootstrap, sink, "read_committed")
    assert out == values("out", n), "output records missing, duplicated or out of order"
    all_out, _ = drain(broker.bootstrap, sink, "read_uncommitted")
    assert len(all_out) == n + aborted_outputs
    assert end == watermarks(broker.bootstrap, sink, 0)[1]


def test_second_producer_fences_the_first(broker, topic_name):
    create_topic(broker.bootstrap, topic_name)
    tid = f"{topic_name}-tx"
    zombie = txn_producer(broker.bootstrap, tid)
    init(zombie)
    zombie.begin_transaction()
    send(zombie, topic_name, [b"zombie-1"])

    fresh = txn_producer(broker.bootstrap, tid)
    init(fresh)  # bumps the epoch and aborts the zombie's open transaction

    with pytest.raises(KafkaException) as fenced:
        zombie.produce(topic_name, value=b"zombie-2", partition=0)
        zombie.flush(DEFAULT_TIMEOUT_S)
        zombie.commit_transaction(TXN_CALL_TIMEOUT_S)
    err = fenced.value.args[0]
    assert is_fenced(err), f"the zombie's commit failed with {err!r}, not a fencing error"

    committed_round(fresh, topic_name, [b"fresh-1"])
    wait_lso(broker.bootstrap, topic_name, watermarks(broker.bootstrap, topic_name, 0)[1])
    got, _end = drain(broker.bootstrap, topic_name, "read_committed")
    assert got == [b"fresh-1"]
    everything, _ = drain(broker.bootstrap, topic_name, "read_uncommitted")
    assert b"zombie-1" in everything and b"zombie-2" not in everything


def test_transaction_timeout_aborts_on_the_broker(broker, topic_name):
    create_topic(broker.bootstrap, topic_name)
    stale = txn_producer(broker.bootstrap, f"{topic_name}-slow", **{"transaction.timeout.ms": SHORT_TXN_TIMEOUT_MS})
    init(stale)
    stale.begin_transaction()
    send(stale, topic_name, values("stale", 3))  # 0-2, then nothing
    other = txn_producer(broker.bootstrap, f"{topic_name}-other")
    init(other)
    committed_round(other, topic_name, values("later", 3))  # 3-5, COMMIT at 6
    wait_until(lambda: watermarks(broker.bootstrap, topic_name, 0)[1] == 7, DRAIN_DEADLINE_S, "the COMMIT marker")
    assert lso(broker.bootstrap, topic_name) == 0, "the open transaction does not hold the LSO"

    # The coordinator aborts the stale transaction: an ABORT marker at 7, LSO at the end.
    wait_lso(broker.bootstrap, topic_name, 8, TIMEOUT_ABORT_DEADLINE_S)
    assert drain(broker.bootstrap, topic_name, "read_committed") == (values("later", 3), 8)
    with KafkaConnection(broker.bootstrap) as conn:
        markers = control_markers(fetch_isolated(conn, topic_name, 0, 0, READ_UNCOMMITTED).records)
    assert [(off, kind) for off, _pid, kind in markers] == [(6, CONTROL_COMMIT), (7, CONTROL_ABORT)]

    with pytest.raises(KafkaException):
        stale.commit_transaction(TXN_CALL_TIMEOUT_S)
    assert drain(broker.bootstrap, topic_name, "read_committed")[0] == values("later", 3)


def test_kill9_with_a_transaction_open(broker, topic_name):
    create_topic(broker.bootstrap, topic_name)
    tid = f"{topic_name}-tx"
    first = txn_producer(broker.bootstrap, tid, **{"transaction.timeout.ms": SHORT_TXN_TIMEOUT_MS})
    init(first)
    committed_round(first, topic_name, values("before", 4))  # 0-3, COMMIT at 4
    wait_lso(broker.bootstrap, topic_name, 5)
    first.begin_transaction()
    send(first, topic_name, values("lost", 4))  # 5-8, open when the broker dies
    broker.kill()
    broker.start()

    assert watermarks(broker.bootstrap, topic_name, 0)[1] == 9
    assert drain(broker.bootstrap, topic_name, "read_committed") == (values("before", 4), 5)
    # The recovered coordinator still knows the transaction and aborts it on its timeout.
    wait_lso(broker.bootstrap, topic_name, 10, TIMEOUT_ABORT_DEADLINE_S)

    second = txn_producer(broker.bootstrap, tid)
    init(second)
    committed_round(second, topic_name, values("after", 4))  # 10-13, COMMIT at 14
    wait_lso(broker.bootstrap, topic_name, 15)
    assert drain(broker.bootstrap, topic_name, "read_committed") == (values("before", 4) + values("after", 4), 15)
    with KafkaConnection(broker.bootstrap) as conn:
        markers = control_markers(fetch_isolated(conn, topic_name, 0, 0, READ_UNCOMMITTED).records)
    assert [(off, kind) for off, _pid, kind in markers] == [
        (4, CONTROL_COMMIT),
        (9, CONTROL_ABORT),
        (14, CONTROL_COMMIT),
    ]


def test_kill9_then_new_producer_aborts_the_open_transaction(broker, topic_name):
    """Without waiting for the timeout: init_transactions of the same transactional.id fences
    the pre-crash producer and aborts its transaction."""
    create_topic(broker.bootstrap, topic_name)
    tid = f"{topic_name}-tx"
    first = txn_producer(broker.bootstrap, tid)  # the default 60 s timeout: never reached here
    init(first)
    committed_round(first, topic_name, values("before", 2))  # 0-1, COMMIT at 2
    wait_lso(broker.bootstrap, topic_name, 3)
    first.begin_transaction()
    send(first, topic_name, values("lost", 2))  # 3-4
    broker.kill()
    broker.start()

    second = txn_producer(broker.bootstrap, tid)
    init(second)  # ABORT at 5
    wait_lso(broker.bootstrap, topic_name, 6)
    committed_round(second, topic_name, values("after", 2))  # 6-7, COMMIT at 8
    wait_lso(broker.bootstrap, topic_name, 9)
    assert drain(broker.bootstrap, topic_name, "read_committed") == (values("before", 2) + values("after", 2), 9)


def test_kafka_python_transactional_producer(broker, topic_name):
    from kafka import KafkaConsumer, KafkaProducer
    from kafka import TopicPartition as KTopicPartition
    from kafka.errors import KafkaTimeoutError

    create_topic(broker.bootstrap, topic_name)
    tid = f"{topic_name}-tx"
    p = KafkaProducer(
        bootstrap_servers=broker.bootstrap,
        transactional_id=tid,
        max_block_ms=int(TXN_CALL_TIMEOUT_S * 1000),
    )
    try:
        try:
            bounded(p.init_transactions, TXN_CALL_TIMEOUT_S + 5, "kafka-python init_transactions")
        except KafkaTimeoutError as err:
            pytest.fail(f"kafka-python init_transactions: {err}; {coordinator_diagnosis(broker.bootstrap, tid)}")
        for prefix, commit in (("kp-c", True), ("kp-a", False), ("kp-d", True)):
            p.begin_transaction()
            futures = [p.send(topic_name, value=v, partition=0) for v in values(prefix, 5)]
            for f in futures:
                f.get(timeout=DEFAULT_TIMEOUT_S)
            end = p.commit_transaction if commit else p.abort_transaction
            bounded(end, TXN_CALL_TIMEOUT_S, f"kafka-python {'commit' if commit else 'abort'}_transaction")
    finally:
        p.close(timeout=10)

    expected = values("kp-c", 5) + values("kp-d", 5)
    wait_lso(broker.bootstrap, topic_name, 18)
    assert drain(broker.bootstrap, topic_name, "read_committed") == (expected, 18)
    assert drain(broker.bootstrap, topic_name, "read_uncommitted")[0] == values("kp-c", 5) + values("kp-a", 5) + values(
        "kp-d", 5
    )

    c = KafkaConsumer(
        bootstrap_servers=broker.bootstrap, group_id=None, enable_auto_commit=False, isolation_level="read_committed"
    )
    try:
        tp = KTopicPartition(topic_name, 0)
        c.assign([tp])
        c.seek_to_beginning(tp)
        got = []
        deadline = time.monotonic() + DRAIN_DEADLINE_S
        while len(got) < len(expected):
            assert time.monotonic() < deadline, f"kafka-python read_committed got {got} before the deadline"
            for batch in c.poll(timeout_ms=500).values():
                got.extend(r.value for r in batch)
        assert got == expected
    finally:
        c.close()


def test_transaction_admin_apis(broker, topic_name):
    create_topic(broker.bootstrap, topic_name, partitions=2)
    tid = f"{topic_name}-tx"
    timeout_ms = 45_000
    p = txn_producer(broker.bootstrap, tid, **{"transaction.timeout.ms": timeout_ms})
    init(p)
    p.begin_transaction()
    send(p, topic_name, values("p0-", 3), partition=0)
    send(p, topic_name, values("p1-", 2), partition=1)

    with KafkaConnection(broker.bootstrap) as conn:
        error, unknown, listed = list_transactions(conn)
        assert (error, unknown) == (kw.NONE, [])
        mine = [t for t in listed if t.transactional_id == tid]
        assert len(mine) == 1 and mine[0].state == "Ongoing", listed
        pid = mine[0].producer_id
        _e, _u, ongoing = list_transactions(conn, states=["Ongoing"])
        assert tid in {t.transactional_id for t in ongoing}
        _e, _u, by_pid = list_transactions(conn, producer_ids=[pid])
        assert [t.transactional_id for t in by_pid] == [tid]
        _e, bogus, _t = list_transactions(conn, states=["NoSuchState"])
        assert bogus == ["NoSuchState"]

        [desc] = describe_transactions(conn, [tid])
        assert (desc.error_code, desc.transactional_id, desc.state) == (kw.NONE, tid, "Ongoing")
        assert desc.producer_id == pid and desc.timeout_ms == timeout_ms
        assert {t: sorted(ps) for t, ps in desc.partitions.items()} == {topic_name: [0, 1]}
        assert desc.start_time_ms > 0
        epoch = desc.epoch

        for partition, count in ((0, 3), (1, 2)):
            state = describe_producers(conn, topic_name, partition)
            assert state.error_code == kw.NONE, state
            [prod] = [s for s in state.producers if s.producer_id == pid]
            assert (prod.epoch, prod.last_sequence, prod.current_txn_start_offset) == (epoch, count - 1, 0)

        [missing] = describe_transactions(conn, [f"{tid}-unknown"])
        assert missing.error_code == TRANSACTIONAL_ID_NOT_FOUND

    p.commit_transaction(TXN_CALL_TIMEOUT_S)
    wait_lso(broker.bootstrap, topic_name, 4)
    wait_lso(broker.bootstrap, topic_name, 3, partition=1)
    with KafkaConnection(broker.bootstrap) as conn:
        wait_until(
            lambda: describe_transactions(conn, [tid])[0].state == "CompleteCommit", DRAIN_DEADLINE_S, "CompleteCommit"
        )
        [desc] = describe_transactions(conn, [tid])
        assert desc.partitions == {}, desc
        _e, _u, ongoing = list_transactions(conn, states=["Ongoing"])
        assert tid not in {t.transactional_id for t in ongoing}
        [prod] = [s for s in describe_producers(conn, topic_name, 0).producers if s.producer_id == pid]
        assert prod.current_txn_start_offset == -1
