"""Multi-tenant authorization: transactions (issue 35, finding 1). On the tenants' broker
(tenant_support.py), as `attacker` (WRITE on the shared topic, and here WRITE on one
transactional id of its own, `x-attacker`), with raw Produce frames against a real
confluent-kafka transactional producer of tenant-a (`a-txn`) writing to the shared topic:

- a transactional batch with a null transactional id, and one under a transactional id the
  attacker may not WRITE: TRANSACTIONAL_ID_AUTHORIZATION_FAILED (Kafka's produce-time rule);
- one claiming the victim's producer id at the next epoch, or at its epoch into its open
  transaction, under the attacker's own transactional id: INVALID_PRODUCER_ID_MAPPING (the
  coordinator's verification, KIP-890; Kafka itself would take the second);
- one of the attacker's own producer to a partition it did not add to its transaction:
  INVALID_TXN_STATE;

then the victim commits two transactions, and a read_committed consumer and a materialized
transform on the shared topic see exactly its records, with the last stable offset at the
log end. Before this, each of those batches but the second was appended: the first and the
last left transactions no coordinator would end (the LSO stuck for good, every
read_committed reader and transform of the partition stopped), the third fenced the victim.

And a hanging transaction made as one arises on a real cluster: an open transactional batch
in a partition's log that the coordinator never knew (written while the broker was down;
recovery keeps it open across the restart). A transform on the partition says it waits on
it (describe, the CLI, the metrics), `kafka-transactions find-hanging` (Kafka 4.4's tool,
tests/clients/java) finds it, `kafka-transactions abort` run by tenant-a (no ALTER or
CLUSTER_ACTION on the cluster) and a raw WriteTxnMarkers from the attacker are refused, and
run by the super user it ends the transaction: the LSO reaches the log end, a read_committed
consumer moves on and the transform catches up.
"""

from __future__ import annotations

import re
import struct
import time

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition

import kafka_messages as km
from conftest import wait_until
from java_support import java_classpath, run_java
from plugin_support import wasm
from tenant_support import (  # noqa: F401 (tenants is a fixture)
    PASSWORDS,
    SHARED_TOPIC,
    TIMEOUT_S,
    admin_call,
    create_topics,
    grant,
    kafka_conf,
    raw_login,
    sluice,
    tenants,
)
from txn_support import (
    READ_COMMITTED,
    READ_UNCOMMITTED,
    batch_headers,
    describe_producers,
    flexible_request,
    init_producer_id,
    list_offset,
    producer_batch,
)

TRANSACTIONS = "org.apache.kafka.tools.TransactionsCommand"
CLUSTER_AUTHORIZATION_FAILED = 31
TRANSACTIONAL_ID_AUTHORIZATION_FAILED = 53
INVALID_PRODUCER_ID_MAPPING = 49
INVALID_TXN_STATE = 48
# A producer id no coordinator handed out: the hanging transaction's.
HANGING_PID = 777_777
# How old the hanging batch is: past find-hanging's default 15 minutes.
HANGING_AGE_MS = 60 * 60 * 1000


def keep_all(broker, name: str, source: str, output: str) -> None:
    """A materialized transform `name` copying `source` to `output` (json-filter keeping every
    `{"n": ...}` with n >= 0), deployed by the super user."""
    create_topics(broker, "admin", output)
    if admin_call(broker, "admin", "GET", "/v1/plugins/keep-all")[0] != 200:
        assert admin_call(broker, "admin", "PUT", "/v1/plugins/keep-all", raw=wasm("json-filter"))[0] == 200
    status, body = admin_call(broker, "admin", "POST", "/v1/transforms", {
        "name": name, "source": source, "plugin": "keep-all", "outputs": [output],
        "params": {"field": "$.n", "op": ">=", "value": "0"},
    })  # fmt: skip
    assert status == 201, body


def transform(broker, name: str) -> dict:
    status, body = admin_call(broker, "admin", "GET", f"/v1/transforms/{name}")
    assert status == 200, body
    return body


def through(broker, name: str, records: int) -> dict:
    """Waits until transform `name` has taken `records` source records with nothing left and
    waits on no transaction."""

    def done():
        t = transform(broker, name)
        p = t["partitions"][0]
        ok = t["lag"] == 0 and p["records_in"] == records and p["waiting_on_transaction"] is None
        return t if ok else None

    return wait_until(done, TIMEOUT_S, f"transform {name} to take {records} records", interval_s=0.1)


def read_committed(broker, user: str, topic: str) -> list[bytes]:
    """Every value of partition 0 of `topic` a read_committed consumer of `user` (a tenant-a
    group: the ACLs give tenants their own prefix) reads to the end (the last stable offset)."""
    c = Consumer({**kafka_conf(broker, user), "group.id": "a-reader", "enable.auto.commit": False,
                  "enable.partition.eof": True, "isolation.level": "read_committed"})  # fmt: skip
    try:
        c.assign([TopicPartition(topic, 0, 0)])
        values = []
        deadline = time.monotonic() + TIMEOUT_S
        while time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is None:
                continue
            if m.error():
                assert m.error().code() == KafkaError._PARTITION_EOF, m.error()
                return values
            values.append(m.value())
        raise AssertionError(f"{topic}: no end of partition after {values}")
    finally:
        c.close()


def offsets(broker, topic: str) -> tuple[int, int]:
    """(last stable offset, high watermark) of partition 0 of `topic`."""
    conn = raw_login(broker, "admin")
    try:
        return list_offset(conn, topic, 0, READ_COMMITTED), list_offset(conn, topic, 0, READ_UNCOMMITTED)
    finally:
        conn.close()


def n(i: int) -> bytes:
    return b'{"n": %d}' % i


def test_transactional_batches_are_verified_with_the_coordinator(tenants):
    broker = tenants
    grant(broker, "tenant-a", "topic", SHARED_TOPIC, "write,read,describe")
    grant(broker, "attacker", "transactional-id", "x-attacker", "write,describe")
    keep_all(broker, "a-copy", SHARED_TOPIC, "a-shared-copy")

    victim = Producer({**kafka_conf(broker, "tenant-a"), "transactional.id": "a-txn"})
    victim.init_transactions(TIMEOUT_S)
    victim.begin_transaction()
    victim.produce(SHARED_TOPIC, value=n(0), partition=0)
    assert victim.flush(TIMEOUT_S) == 0
    conn = raw_login(broker, "admin")
    producers = describe_producers(conn, SHARED_TOPIC, 0).producers
    conn.close()
    [state] = [p for p in producers if p.current_txn_start_offset >= 0]
    pid, epoch, last_seq = state.producer_id, state.epoch, state.last_sequence

    attacker = raw_login(broker, "attacker")
    own = init_producer_id(attacker, "x-attacker")
    assert own.error_code == 0, own

    def attack(batch_pid: int, batch_epoch: int, seq: int, transactional_id: str | None) -> int:
        batch = producer_batch([n(-1)], batch_pid, batch_epoch, seq, transactional=True)
        result = attacker.produce(SHARED_TOPIC, 0, batch, version=8, transactional_id=transactional_id)
        return result.error_code

    results = {
        "null transactional id": attack(pid, epoch + 1, 0, None),
        "null transactional id, made-up producer": attack(999_999, 0, 0, None),
        "the victim's transactional id": attack(pid, epoch + 1, 0, "a-txn"),
        "the victim's producer at the next epoch": attack(pid, epoch + 1, 0, "x-attacker"),
        "into the victim's open transaction": attack(pid, epoch, last_seq + 1, "x-attacker"),
        "a partition not added to the transaction": attack(own.producer_id, own.epoch, 0, "x-attacker"),
    }
    attacker.close()
    assert results == {
        "null transactional id": TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
        "null transactional id, made-up producer": TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
        "the victim's transactional id": TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
        "the victim's producer at the next epoch": INVALID_PRODUCER_ID_MAPPING,
        "into the victim's open transaction": INVALID_PRODUCER_ID_MAPPING,
        "a partition not added to the transaction": INVALID_TXN_STATE,
    }

    # The victim keeps working: this transaction and the next commit.
    victim.produce(SHARED_TOPIC, value=n(1), partition=0)
    victim.commit_transaction(TIMEOUT_S)
    victim.begin_transaction()
    victim.produce(SHARED_TOPIC, value=n(2), partition=0)
    victim.commit_transaction(TIMEOUT_S)

    lso, high_watermark = offsets(broker, SHARED_TOPIC)
    assert lso == high_watermark, "no transaction left open in the shared topic"
    assert read_committed(broker, "tenant-a", SHARED_TOPIC) == [n(0), n(1), n(2)]
    t = through(broker, "a-copy", 3)
    assert t["partitions"][0]["records_out"] == {"a-shared-copy": 3}


def segment_tail(data_dir, topic: str) -> tuple:
    """The active segment of partition 0 of `topic`, its log end offset, and the partition
    leader epoch of its last batch."""
    segment = max((data_dir / "topics" / topic / "0").glob("*.log"))
    data = segment.read_bytes()
    pos, last = 0, None
    while pos + 61 <= len(data):
        last = pos
        pos += 12 + struct.unpack_from(">i", data, pos + 8)[0]
    assert last is not None and pos == len(data), f"{segment}: no whole batch at its end"
    [header] = batch_headers(data[last:])
    (leader_epoch,) = struct.unpack_from(">i", data, last + 12)
    return segment, header.last_offset + 1, leader_epoch


def write_hanging_batch(broker, topic: str) -> int:
    """With the broker down, appends an open transactional batch of HANGING_PID (an hour old)
    at the log end of partition 0 of `topic`: a transaction no coordinator knows. Returns its
    offset."""
    segment, end, leader_epoch = segment_tail(broker.data_dir, topic)
    batch = bytearray(producer_batch([n(99)], HANGING_PID, 0, 0, transactional=True,
                                     timestamp_ms=int(time.time() * 1000) - HANGING_AGE_MS))  # fmt: skip
    # Base offset and partition leader epoch are outside the CRC.
    struct.pack_into(">q", batch, 0, end)
    struct.pack_into(">i", batch, 12, leader_epoch)
    with open(segment, "ab") as f:
        f.write(batch)
    return end


def transactions_tool(broker, tmp_path, user: str, *args: str, check: bool = True):
    """kafka-transactions (TransactionsCommand) as `user`, over SASL/SCRAM."""
    config = tmp_path / f"{user}.properties"
    config.write_text(
        "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-256\n"
        "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
        f'username="{user}" password="{PASSWORDS[user]}";\n'
    )
    return run_java(java_classpath(), TRANSACTIONS, "--bootstrap-server", broker.listener("SASL_PLAINTEXT"),
                    "--command-config", str(config), *args, check=check)  # fmt: skip


def hanging_rows(out: str) -> list[list[str]]:
    """find-hanging's table rows (Topic, Partition, ProducerId, ProducerEpoch, ...)."""
    lines = [line.split() for line in out.splitlines() if line.strip()]
    assert lines and lines[0][0] == "Topic", out
    return lines[1:]


def write_txn_markers_error(broker, user: str, topic: str, producer_id: int) -> int:
    """A raw WriteTxnMarkers v1 (ABORT of `producer_id` in partition 0 of `topic`) as `user`:
    the partition's error code."""
    conn = raw_login(broker, user)
    try:
        r = flexible_request(conn, 27, 1, km.write_txn_markers_body(producer_id, 0, [(topic, 0)], commit=False))
        marker = r.array(lambda m: (m.i64(), m.array(lambda t: (t.string(), t.array(lambda p: (p.i32(), p.i16()))))))
        [(pid, [(_, [(_, error)])])] = marker
        assert pid == producer_id
        return error
    finally:
        conn.close()


def test_a_hanging_transaction_is_found_and_aborted_with_kafkas_tool(tenants, tmp_path):
    broker = tenants
    create_topics(broker, "tenant-a", "a-events")
    keep_all(broker, "a-events-copy", "a-events", "a-events-out")
    p = Producer({**kafka_conf(broker, "tenant-a"), "acks": "all"})
    for i in range(3):
        p.produce("a-events", value=n(i), partition=0)
    assert p.flush(TIMEOUT_S) == 0
    through(broker, "a-events-copy", 3)

    broker.kill()
    hanging_at = write_hanging_batch(broker, "a-events")
    broker.start()
    p = Producer({**kafka_conf(broker, "tenant-a"), "acks": "all"})
    for i in range(3, 5):
        p.produce("a-events", value=n(i), partition=0)
    assert p.flush(TIMEOUT_S) == 0
    assert offsets(broker, "a-events") == (hanging_at, hanging_at + 3), "the hanging transaction holds the LSO"

    # The transform says what holds it, instead of a bare lag 0.
    def waiting():
        t = transform(broker, "a-events-copy")
        w = t["partitions"][0]["waiting_on_transaction"]
        return (t, w) if w and w["waiting_ms"] > 0 else None

    t, w = wait_until(waiting, TIMEOUT_S, "the transform to report the open transaction", interval_s=0.1)
    assert t["lag"] == 0 and t["partitions"][0]["records_in"] == 0, t
    assert (w["producer_id"], w["since_offset"], w["records_held"]) == (HANGING_PID, hanging_at, 3), w
    described = sluice(broker, "admin", "transform", "describe", "a-events-copy").stdout
    assert f"waiting on an open transaction of producer {HANGING_PID} since offset {hanging_at}" in described
    listed = sluice(broker, "admin", "transform", "list").stdout
    assert "a-events-copy: a-events -> keep-all -> a-events-out (running, lag 0, waiting on an open transaction)" in listed
    _, metrics = admin_call(broker, "admin", "GET", "/metrics")
    assert 'sluice_transform_txn_held_records{transform="a-events-copy",partition="0"} 3' in metrics
    assert re.search(r'sluice_transform_txn_wait_ms\{transform="a-events-copy",partition="0"\} [1-9]', metrics)

    # Kafka's tool finds it: no transactional id has its producer id.
    rows = hanging_rows(transactions_tool(broker, tmp_path, "admin", "find-hanging", "--broker-id", "0").stdout)
    assert [(r[0], r[1], r[2], r[5]) for r in rows] == [("a-events", "0", str(HANGING_PID), str(hanging_at))], rows

    # Without ALTER or CLUSTER_ACTION on the cluster, nobody may end it.
    refused = transactions_tool(broker, tmp_path, "tenant-a", "abort", "--topic", "a-events", "--partition", "0",
                                "--start-offset", str(hanging_at), check=False)  # fmt: skip
    assert refused.returncode != 0 and "cluster authorization error" in refused.stderr + refused.stdout, refused
    assert write_txn_markers_error(broker, "attacker", "a-events", HANGING_PID) == CLUSTER_AUTHORIZATION_FAILED
    assert offsets(broker, "a-events") == (hanging_at, hanging_at + 3)

    # The super user aborts it: the LSO reaches the log end (past the ABORT marker), readers
    # and the transform move on, and nothing hangs any more.
    transactions_tool(broker, tmp_path, "admin", "abort", "--topic", "a-events", "--partition", "0",
                      "--start-offset", str(hanging_at))  # fmt: skip
    assert offsets(broker, "a-events") == (hanging_at + 4, hanging_at + 4)
    assert read_committed(broker, "tenant-a", "a-events") == [n(i) for i in range(5)]
    through(broker, "a-events-copy", 2)  # counters restarted with the broker: n3 and n4
    rows = hanging_rows(transactions_tool(broker, tmp_path, "admin", "find-hanging", "--broker-id", "0").stdout)
    assert rows == [], rows
