"""Client byte-rate quotas: set with `sluice quota` (AlterClientQuotas), listed
(DescribeClientQuotas), kept across a restart, and enforced as Kafka does: a Produce or Fetch
over its client id's quota is answered with `throttle_time_ms`, the connection reads nothing
more until that time has passed (KIP-219's muted channel), and nothing is dropped.

Raw sockets check the exact fields (a client id without a quota is never throttled; one over
its `producer_byte_rate` is, and its next request waits; a Fetch over its `consumer_byte_rate`
is answered empty with its throttle time, as Kafka answers it, and the records come with a
later fetch); confluent-kafka producers and
consumers over their quotas still deliver and read every record, and the broker counts the
throttled requests in `sluice_produce_throttled_total` / `sluice_fetch_throttled_total`.
"""

from __future__ import annotations

import json
import os
import subprocess
import time

import kafka_messages as km
import kafka_wire as kw
from clients import Record, consume_partition, create_topic, produce_all, producer
from conftest import sluice_bin
from kafka_wire import KafkaConnection
from tls_support import metric

API_PRODUCE = 0
API_FETCH = 1
RATE = 50_000  # bytes per second
# Over the 10 s the rate is measured across, a client must send more than RATE * 10 bytes
# to be over it; three produces of 300 kB are.
CHUNK = 300_000


def quota(broker, *args: str) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLUICE_")}
    proc = subprocess.run(
        [sluice_bin(), "quota", *args, "--brokers", broker.bootstrap, "--output", "json"],
        capture_output=True, text=True, timeout=60, env=env,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def produce_raw(conn: KafkaConnection, client_id: str, topic: str, value: bytes) -> tuple[int, int]:
    """One Produce v7 as `client_id`: (partition error code, throttle_time_ms)."""
    body = kw.produce_body(7, {topic: [(0, kw.record_batch([value]))]})
    conn.correlation_id += 1
    conn.send_raw(kw.request_frame(API_PRODUCE, 7, conn.correlation_id, bytes(body), client_id=client_id))
    r = conn.recv_response(conn.correlation_id)
    def partition(x):
        _, error = x.i32(), x.i16()
        x.i64(), x.i64(), x.i64()  # base offset, log append time, log start offset
        return error

    [(_, [error])] = r.array(lambda t: (t.string(), t.array(partition)))
    return error, r.i32()


def test_quotas_are_set_listed_and_survive_a_restart(broker):
    doc = quota(broker, "set", "--client-id", "slow", "--producer-byte-rate", str(RATE))
    assert doc["quotas"] == [{"entity": {"client-id": "slow"}, "quotas": {"producer_byte_rate": float(RATE)}}]
    quota(broker, "set", "--default-user", "--consumer-byte-rate", "1000000")
    listed = quota(broker, "list")["quotas"]
    assert {"entity": {"user": "<default>"}, "quotas": {"consumer_byte_rate": 1e6}} in listed
    broker.stop()
    broker.start()
    assert sorted(map(json.dumps, quota(broker, "list")["quotas"])) == sorted(map(json.dumps, listed))
    quota(broker, "remove", "--default-user", "--consumer-byte-rate")
    assert quota(broker, "list")["quotas"] == [{"entity": {"client-id": "slow"}, "quotas": {"producer_byte_rate": float(RATE)}}]


def test_a_produce_over_its_quota_is_throttled_and_the_connection_muted(broker):
    create_topic(broker.bootstrap, "q")
    quota(broker, "set", "--client-id", "slow", "--producer-byte-rate", str(RATE))
    value = os.urandom(CHUNK)
    with KafkaConnection(broker.bootstrap) as fast:
        for _ in range(3):
            assert produce_raw(fast, "fast", "q", value) == (0, 0)
    with KafkaConnection(broker.bootstrap) as slow:
        throttles = [produce_raw(slow, "slow", "q", value) for _ in range(3)]
        assert all(error == 0 for error, _ in throttles), throttles
        throttle_ms = throttles[-1][1]
        assert throttle_ms > 0, throttles
        # Muted: the next request is read only once the throttle time has passed.
        started = time.monotonic()
        slow.request(3, 1, km.metadata_body(1, []))
        assert time.monotonic() - started >= throttle_ms / 1000 * 0.9
    assert metric(broker, "sluice_produce_throttled_total") >= 1


def fetch_raw(conn: KafkaConnection, client_id: str, topic: str, offset: int) -> tuple[int, int, int]:
    """One Fetch v11 as `client_id`: (throttle_time_ms, top-level error, topics answered)."""
    body = kw.fetch_body(11, [(topic, 0, offset)], max_bytes=CHUNK)
    conn.correlation_id += 1
    conn.send_raw(kw.request_frame(API_FETCH, 11, conn.correlation_id, bytes(body), client_id=client_id))
    r = conn.recv_response(conn.correlation_id)
    throttle, error, _session = r.i32(), r.i16(), r.i32()
    return throttle, error, r.i32()


def test_a_fetch_over_its_quota_is_answered_empty_with_its_throttle(broker):
    create_topic(broker.bootstrap, "qf")
    value = os.urandom(CHUNK - 1000)
    with KafkaConnection(broker.bootstrap) as writer:
        for _ in range(4):
            assert produce_raw(writer, "writer", "qf", value) == (0, 0)
    quota(broker, "set", "--client-id", "slow-reader", "--consumer-byte-rate", str(RATE))
    with KafkaConnection(broker.bootstrap) as reader:
        answers = [fetch_raw(reader, "slow-reader", "qf", 0) for _ in range(4)]
        # Within the quota: the topic comes back with its records; once over it: nothing but
        # the throttle time (Kafka's getThrottledResponse), never records and a throttle.
        assert answers[0] == (0, 0, 1), answers
        throttled = [a for a in answers if a[0] > 0]
        assert throttled, answers
        assert all(topics == 0 and error == 0 for _, error, topics in throttled), answers
    assert metric(broker, "sluice_fetch_throttled_total") >= 1


def test_clients_over_their_quotas_still_get_every_record(broker):
    create_topic(broker.bootstrap, "qc")
    quota(broker, "set", "--client-id", "slow-producer", "--producer-byte-rate", "200000")
    quota(broker, "set", "--client-id", "slow-consumer", "--consumer-byte-rate", "200000")
    records = [Record(key=b"%d" % i, value=os.urandom(10_000)) for i in range(300)]  # 3 MB
    delivered = produce_all(producer(broker.bootstrap, **{"client.id": "slow-producer"}), "qc", records)
    assert [d.offset for d in delivered] == list(range(len(records)))
    assert metric(broker, "sluice_produce_throttled_total") >= 1
    messages = consume_partition(broker.bootstrap, "qc", 0, len(records), **{"client.id": "slow-consumer"})
    assert [m.value() for m in messages] == [r.value for r in records]
    assert metric(broker, "sluice_fetch_throttled_total") >= 1
