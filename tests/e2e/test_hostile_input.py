"""Regression tests for the attacks of the "hostile input" issue, each against its own broker
over raw TCP (kafka_wire.py, kafka_messages.py) and real clients.

Covers: a 20-byte Produce whose topic count is 0x7fffffff closes the connection; record
batches that lie (recordsCount 2^31-1 over 3 gzip records; a gzip payload of random bytes;
the control bit from a client; a malformed record inside a valid CRC) are refused per
partition with INVALID_RECORD or CORRUPT_MESSAGE, append nothing, and leave the other
partitions of the request and later records alone (Produce v8 names the record in
record_errors); DescribeConfigs over 8,000 resources answers those beyond 1,000 with
INVALID_REQUEST and stays within 64 MB of peak RSS; the broker-wide partition budget
(sluice.partitions.max) refuses CreateTopics with POLICY_VIOLATION and survives a restart
with a lower budget; duplicate partitions in Fetch and ListOffsets get INVALID_REQUEST per
entry; queued.max.request.bytes pauses reading without dropping records; the connection
limits (max.connections.per.ip, max.connections); a pending JoinGroup member (or a member
that stops rejoining) does not lock its group past the rebalance timeout.
"""

from __future__ import annotations

import gzip
import random
import threading
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer

import kafka_messages as km
import kafka_wire as kw
from clients import consume_partition, create_topic
from conftest import wait_until
from kafka_wire import ConnectionClosed, KafkaConnection
from survival import kcat_round_trip

CLOSE_DEADLINE_S = 10.0
RNG = random.Random(20261203)


def latest(bootstrap: str, topic: str, partition: int) -> int:
    with KafkaConnection(bootstrap) as conn:
        [(_, _, error, offset)] = km.list_offsets(conn, [(topic, partition)])
        assert error == kw.NONE
        return offset


@pytest.fixture
def topic2(broker, topic_name):
    create_topic(broker.bootstrap, topic_name, 2)
    return topic_name


# --- 1. huge array count ----------------------------------------------------------------------


@pytest.mark.parametrize("version", [0, 3, 8])
def test_produce_with_huge_topic_count_closes_connection(broker, version):
    body = b"" if version < 3 else kw.i16(-1)  # null transactional id
    body += kw.i16(-1) + kw.i32(10_000) + kw.i32(0x7FFFFFFF)  # acks, timeout, topic count
    frame = kw.request_frame(kw.API_PRODUCE, version, 1, body, client_id="")
    assert version != 0 or len(frame) - 4 == 20
    with KafkaConnection(broker.bootstrap) as conn:
        conn.send_raw(frame)
        assert conn.wait_closed(CLOSE_DEADLINE_S), "a topic count of 0x7fffffff did not close the connection"
    assert broker.is_running()
    kcat_round_trip(broker.bootstrap)


# --- 2-5. lying record batches ------------------------------------------------------------------


def lying_count_batch() -> bytes:
    records = b"".join(kw.record(i, None, f"lie-{i}".encode()) for i in range(3))
    return kw.batch_with_header(
        gzip.compress(records), records_count=2**31 - 1, last_offset_delta=2**31 - 2, attributes=kw.COMPRESSION_GZIP
    )


def test_batch_lying_about_its_record_count_is_refused(broker, topic2):
    for version in range(3, 9):
        good = kw.record_batch([b"good-1", b"good-2"])
        with KafkaConnection(broker.bootstrap) as conn:
            answers = conn.produce_many({topic2: [(0, lying_count_batch()), (1, good)]}, version)
        results = {r.partition: r for r in answers}
        assert results[0].error_code in (kw.INVALID_RECORD, kw.CORRUPT_MESSAGE), f"v{version}: {results[0]}"
        assert results[1].error_code == kw.NONE, f"v{version}: the honest partition failed: {results[1]}"
        assert results[1].base_offset == 2 * (version - 3)
        assert latest(broker.bootstrap, topic2, 0) == 0, f"v{version}: the lying batch moved the log end offset"


def test_gzip_batch_of_random_bytes_is_corrupt(broker, topic_name):
    create_topic(broker.bootstrap, topic_name)
    with KafkaConnection(broker.bootstrap) as conn:
        assert conn.produce(topic_name, 0, kw.record_batch([b"before-1", b"before-2"])).error_code == kw.NONE
        garbage = kw.batch_with_header(RNG.randbytes(300), records_count=3, attributes=kw.COMPRESSION_GZIP)
        assert conn.produce(topic_name, 0, garbage).error_code == kw.CORRUPT_MESSAGE
        assert latest(broker.bootstrap, topic_name, 0) == 2, "the corrupt batch was appended"
        after = conn.produce(topic_name, 0, kw.record_batch([b"after-1", b"after-2"]))
        assert (after.error_code, after.base_offset) == (kw.NONE, 2)
    got = consume_partition(broker.bootstrap, topic_name, 0, 4)
    assert [(m.offset(), m.value()) for m in got] == [
        (0, b"before-1"), (1, b"before-2"), (2, b"after-1"), (3, b"after-2"),
    ]  # fmt: skip


def test_control_batch_from_a_client_is_invalid(broker, topic_name):
    create_topic(broker.bootstrap, topic_name)
    records = kw.record(0, None, b"not-a-control-record")
    control = kw.batch_with_header(records, records_count=1, attributes=kw.ATTR_CONTROL)
    with KafkaConnection(broker.bootstrap) as conn:
        assert conn.produce(topic_name, 0, control).error_code == kw.INVALID_RECORD
    assert latest(broker.bootstrap, topic_name, 0) == 0


def malformed_record_batch() -> bytes:
    """Record 0 is fine; record 1 says its key is 5,000 bytes inside a 9-byte record."""
    bad_body = kw.i8(0) + kw.varint(0) + kw.varint(1) + kw.varint(5000) + b"ab" + kw.varint(-1) + kw.varint(0)
    records = kw.record(0, b"k", b"fine") + kw.varint(len(bad_body)) + bad_body
    return kw.batch_with_header(records, records_count=2)


@pytest.mark.parametrize("version", [3, 8])
def test_malformed_record_inside_a_valid_crc(broker, topic_name, version):
    create_topic(broker.bootstrap, topic_name)
    with KafkaConnection(broker.bootstrap) as conn:
        result = conn.produce_many({topic_name: [(0, malformed_record_batch())]}, version)[0]
    assert result.error_code in (kw.INVALID_RECORD, kw.CORRUPT_MESSAGE), result
    if version >= 8 and result.error_code == kw.INVALID_RECORD:
        assert [index for index, _ in result.record_errors] == [1], f"record_errors {result.record_errors}"
    assert latest(broker.bootstrap, topic_name, 0) == 0


# --- 6. DescribeConfigs fan-out ---------------------------------------------------------------

DESCRIBE_RESOURCES = 8_000
DESCRIBE_CONFIGS_RESOURCES_MAX = 1_000
RSS_GROWTH_MAX_KB = 64 * 1024


def peak_rss_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    raise AssertionError("no VmHWM in /proc/PID/status")


def test_describe_configs_with_thousands_of_resources(broker):
    """140 KB of names of one existing topic: each answered resource carries every config
    key with its documentation, so answering all 8,000 would build hundreds of MB."""
    topic = "describe-me-12345"  # 17 bytes
    create_topic(broker.bootstrap, topic)
    assert len(topic) * DESCRIBE_RESOURCES >= 136_000
    before = peak_rss_kb(broker.pid)
    with KafkaConnection(broker.bootstrap, timeout_s=120) as conn:
        resources = [(km.RESOURCE_TOPIC, topic)] * DESCRIBE_RESOURCES
        results = km.describe_configs(conn, resources, version=3, documentation=True)
    grown = peak_rss_kb(broker.pid) - before
    assert len(results) == DESCRIBE_RESOURCES
    answered, beyond = results[:DESCRIBE_CONFIGS_RESOURCES_MAX], results[DESCRIBE_CONFIGS_RESOURCES_MAX:]
    assert all(r.error_code == kw.NONE and "retention.ms" in r.configs for r in answered), answered[0]
    wrong = [(i, r.error_code) for i, r in enumerate(beyond) if r.error_code != kw.INVALID_REQUEST]
    assert not wrong, (
        f"{len(wrong)} resources beyond {DESCRIBE_CONFIGS_RESOURCES_MAX} not INVALID_REQUEST: {wrong[:3]}"
        f" (and peak RSS grew by {grown} KiB)"
    )
    assert "DESCRIBE_CONFIGS_RESOURCES_MAX" in (beyond[0].error_message or ""), beyond[0].error_message
    assert grown < RSS_GROWTH_MAX_KB, f"peak RSS grew by {grown} KiB"
    assert broker.is_running()


# --- 7. partition budget ----------------------------------------------------------------------


def test_partition_budget(broker_factory, topic_name):
    # No auto-creation, so asking Metadata about the refused topic cannot create it.
    broker = broker_factory({"sluice.partitions.max": "20", "auto.create.topics.enable": "false"})
    a, b, c = f"{topic_name}-a", f"{topic_name}-b", f"{topic_name}-c"
    with KafkaConnection(broker.bootstrap) as conn:
        assert km.create_topics(conn, [(a, 10)])[a][0] == kw.NONE
        assert km.create_topics(conn, [(b, 8)])[b][0] == kw.NONE
        error, message = km.create_topics(conn, [(c, 5)])[c]
        assert error == kw.POLICY_VIOLATION and "sluice.partitions.max" in (message or ""), (error, message)
        assert conn.metadata_topic_errors([c]) == {c: kw.UNKNOWN_TOPIC_OR_PARTITION}
        for topic, partition in ((a, 9), (b, 7)):
            assert conn.produce(topic, partition, kw.record_batch([b"in-budget"])).error_code == kw.NONE
    broker.settings["sluice.partitions.max"] = "5"
    broker.restart()
    with KafkaConnection(broker.bootstrap) as conn:
        for topic, partition in ((a, 9), (b, 7)):
            fetched = conn.fetch(topic, partition, 0)
            assert kw.batch_record_values(fetched.records) == [(0, b"in-budget")]
        assert km.create_topics(conn, [(c, 1)])[c][0] == kw.POLICY_VIOLATION


# --- 8. duplicate partitions ------------------------------------------------------------------


def test_duplicate_partitions_in_fetch_and_list_offsets(broker, topic2):
    with KafkaConnection(broker.bootstrap) as conn:
        for partition in (0, 1):
            assert conn.produce(topic2, partition, kw.record_batch([b"a", b"b"])).error_code == kw.NONE
        answers = conn.fetch_many([(topic2, 0, 0)] * 50 + [(topic2, 1, 0)], version=11)
        dup = [r.error_code for r in answers if r.partition == 0]
        assert dup == [kw.INVALID_REQUEST] * 50, f"duplicated partition answered {dup}"
        [other] = [r for r in answers if r.partition == 1]
        assert other.error_code == kw.NONE and kw.batch_record_values(other.records) == [(0, b"a"), (1, b"b")]
        for version in (1, 5):
            offsets = km.list_offsets(conn, [(topic2, 0), (topic2, 0), (topic2, 1)], version=version)
            assert sorted((p, e) for _, p, e, _ in offsets) == [
                (0, kw.INVALID_REQUEST), (0, kw.INVALID_REQUEST), (1, kw.NONE),
            ], f"ListOffsets v{version}: {offsets}"  # fmt: skip
            assert [o for _, p, _, o in offsets if p == 1] == [2]


# --- 9. queued.max.request.bytes --------------------------------------------------------------

PRODUCERS = 8
REQUESTS_PER_PRODUCER = 2
RECORDS_PER_REQUEST = 90
VALUE_BYTES = 10_000  # 90 x 10 KB: a ~900 KB request


def partition_answer(r) -> tuple[int, int, int]:
    """(partition, error, base offset) of a Produce v3 partition answer."""
    partition, error, base = r.i32(), r.i16(), r.i64()
    r.i64()  # log append time
    return partition, error, base


def test_queued_request_bytes_pause_reading_without_dropping(broker_factory, topic_name):
    broker = broker_factory(
        {
            "queued.max.request.bytes": str(2 * 1024 * 1024),
            "socket.request.max.bytes": "1048576",
            "message.max.bytes": "1000000",
        }
    )
    create_topic(broker.bootstrap, topic_name, PRODUCERS)

    def value(p: int, r: int, i: int) -> bytes:
        return f"{p}-{r}-{i}-".encode().ljust(VALUE_BYTES, b"v")

    batches = {
        p: [kw.record_batch([value(p, r, i) for i in range(RECORDS_PER_REQUEST)]) for r in range(REQUESTS_PER_PRODUCER)]
        for p in range(PRODUCERS)
    }
    results: dict[int, list] = {}

    def produce(p: int):
        try:
            with KafkaConnection(broker.bootstrap, timeout_s=120) as conn:
                cids = [conn.send_produce(topic_name, p, b) for b in batches[p]]  # pipelined
                results[p] = []
                for cid in cids:
                    r = conn.recv_response(cid)
                    [(_, [(_, error, base)])] = r.array(lambda x: (x.string(), x.array(partition_answer)))
                    results[p].append((error, base))
        except Exception as err:  # noqa: BLE001 - reported below
            results[p] = [repr(err)]

    threads = [threading.Thread(target=produce, args=(p,)) for p in range(PRODUCERS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=180)
    expected = [(kw.NONE, r * RECORDS_PER_REQUEST) for r in range(REQUESTS_PER_PRODUCER)]
    assert results == {p: expected for p in range(PRODUCERS)}
    for p in range(PRODUCERS):
        got = consume_partition(broker.bootstrap, topic_name, p, REQUESTS_PER_PRODUCER * RECORDS_PER_REQUEST)
        want = [value(p, r, i) for r in range(REQUESTS_PER_PRODUCER) for i in range(RECORDS_PER_REQUEST)]
        assert [m.value() for m in got] == want, f"partition {p} read back wrong"


# --- 10. connection limits --------------------------------------------------------------------


def served(conn: KafkaConnection) -> bool:
    try:
        return conn.api_versions().error_code == kw.NONE
    except (ConnectionClosed, OSError):
        return False


def wait_for_a_served_connection(broker):
    """Once one of the 5 connections has closed, a new one is served again."""

    def a_new_one_works():
        with KafkaConnection(broker.bootstrap) as c:
            return served(c)

    wait_until(a_new_one_works, CLOSE_DEADLINE_S, "a connection after one of the 5 closed")


def test_max_connections_per_ip(broker_factory):
    broker = broker_factory({"max.connections.per.ip": "5"})
    first = [KafkaConnection(broker.bootstrap) for _ in range(5)]
    try:
        assert all(served(c) for c in first)
        with KafkaConnection(broker.bootstrap) as sixth:
            assert sixth.wait_closed(CLOSE_DEADLINE_S), "the 6th connection from 127.0.0.1 was not closed"
        assert all(served(c) for c in first), "the first 5 stopped working"
        first.pop().close()
        wait_for_a_served_connection(broker)
    finally:
        for c in first:
            c.close()


def test_max_connections_alone_is_a_valid_setting(broker_factory):
    """As in Kafka, max.connections can be lowered without also setting
    max.connections.per.ip (whose default must not then make the config inconsistent)."""
    broker = broker_factory({"max.connections": "5"})
    with KafkaConnection(broker.bootstrap) as conn:
        assert served(conn)


def test_max_connections_total(broker_factory):
    broker = broker_factory({"max.connections": "5", "max.connections.per.ip": "5"})
    first = [KafkaConnection(broker.bootstrap) for _ in range(5)]
    try:
        assert all(served(c) for c in first)
        extra = KafkaConnection(broker.bootstrap, timeout_s=2.0)
        refused = False
        try:
            extra.send_request(kw.API_API_VERSIONS, 0, b"")
            extra.recv_response(1)
            pytest.fail("a 6th connection was served above max.connections=5")
        except (ConnectionClosed, OSError):
            refused = True  # closed, or still waiting in the backlog (timeout)
        assert refused
        assert all(served(c) for c in first), "existing connections stopped working"
        first.pop().close()
        extra.close()
        wait_for_a_served_connection(broker)
    finally:
        for c in first:
            c.close()


# --- 11. pending and vanished group members ---------------------------------------------------

REBALANCE_TIMEOUT_MS = 10_000
SLACK_S = 8.0


def group_consumer(bootstrap: str, group: str, rebalance_timeout_ms: int = REBALANCE_TIMEOUT_MS) -> Consumer:
    return Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "session.timeout.ms": rebalance_timeout_ms,
            "max.poll.interval.ms": rebalance_timeout_ms,  # librdkafka's rebalance timeout
            "heartbeat.interval.ms": 500,
        }
    )


def assigned_within(
    bootstrap: str, group: str, topic: str, timeout_s: float, rebalance_timeout_ms: int = REBALANCE_TIMEOUT_MS
) -> tuple[float, list[int]]:
    """A confluent-kafka consumer joins `group`; returns (seconds until assigned, partitions)."""
    assigned: list[int] = []
    c = group_consumer(bootstrap, group, rebalance_timeout_ms)
    started = time.monotonic()
    try:
        c.subscribe([topic], on_assign=lambda _c, parts: assigned.extend(p.partition for p in parts))
        while not assigned:
            assert time.monotonic() - started < timeout_s, f"no assignment within {timeout_s}s"
            c.poll(0.2)
        return time.monotonic() - started, sorted(assigned)
    finally:
        c.close()


class BackgroundMember:
    """A confluent-kafka group member polling in a thread (so it rejoins rebalances)."""

    def __init__(self, bootstrap: str, group: str, topic: str, rebalance_timeout_ms: int):
        self.assignments: list[list[int]] = []
        self.stop = threading.Event()
        self.consumer = group_consumer(bootstrap, group, rebalance_timeout_ms)
        self.consumer.subscribe([topic], on_assign=self._on_assign)
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _on_assign(self, _consumer, partitions):
        self.assignments.append([p.partition for p in partitions])

    def _run(self):
        while not self.stop.is_set():
            self.consumer.poll(0.1)
        self.consumer.close()

    def close(self):
        self.stop.set()
        self.thread.join(timeout=30)


@pytest.fixture
def group_broker(broker_factory):
    return broker_factory({"group.initial.rebalance.delay.ms": "0"})


def test_pending_join_does_not_lock_the_group(group_broker, topic_name):
    """A member id handed out (MEMBER_ID_REQUIRED) but never used must not hold a rebalance
    of the group's real members past that join's rebalance timeout (here 3 s, while its
    session timeout and the real members' rebalance timeouts are 30 s)."""
    create_topic(group_broker.bootstrap, topic_name, 2)
    group = f"{topic_name}-g"
    slow_ms = 30_000
    first = BackgroundMember(group_broker.bootstrap, group, topic_name, slow_ms)
    try:
        wait_until(lambda: first.assignments, 30, "the first member's assignment")
        with KafkaConnection(group_broker.bootstrap) as conn:
            pending = km.join_group(conn, group, "", version=4, session_timeout_ms=slow_ms, rebalance_timeout_ms=3_000)
            assert pending.error_code == kw.MEMBER_ID_REQUIRED and pending.member_id, pending
            # Never rejoins with that member id. A second real member joins: the rebalance
            # must finish once the pending id expires, not when the 30 s timeouts run out.
            seconds, parts = assigned_within(group_broker.bootstrap, group, topic_name, 3 + SLACK_S, slow_ms)
        assert len(parts) == 1, f"assigned {parts} after {seconds:.1f}s"
    finally:
        first.close()


def test_member_that_stops_rejoining_is_dropped_after_the_rebalance_timeout(group_broker, topic_name):
    create_topic(group_broker.bootstrap, topic_name, 2)
    group = f"{topic_name}-g"
    timeouts = {"session_timeout_ms": 60_000, "rebalance_timeout_ms": 6_000}
    with KafkaConnection(group_broker.bootstrap, timeout_s=30) as conn:
        first = km.join_group(conn, group, "", version=4, **timeouts)
        assert first.error_code == kw.MEMBER_ID_REQUIRED
        joined = km.join_group(conn, group, first.member_id, version=4, **timeouts)
        assert joined.error_code == kw.NONE and joined.leader == first.member_id, joined
        assignment = kw.i16(0) + kw.array([]) + kw.nbytes(None)
        body = km.sync_group_body(3, group, joined.generation_id, first.member_id, [(first.member_id, assignment)])
        r = conn.request(kw.API_SYNC_GROUP, 3, body)
        r.i32()  # throttle time
        assert r.i16() == kw.NONE
        # Now silent: no heartbeat, no rejoin, connection open. A new member must get every
        # partition within the group's rebalance timeout (the larger of the two members'),
        # well before this member's 60 s session timeout.
        deadline_s = REBALANCE_TIMEOUT_MS / 1000 + SLACK_S
        seconds, parts = assigned_within(group_broker.bootstrap, group, topic_name, deadline_s)
    assert parts == [0, 1], f"assigned {parts} after {seconds:.1f}s"
