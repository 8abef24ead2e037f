"""Replication (replication factor 3) on a cluster of three real `sluice serve` processes,
with librdkafka (confluent-kafka) as the client:

- every record acknowledged with acks=all is on all three brokers: each replica's segment
  files are byte-for-byte the leader's (the followers append the leader's batches as they
  are: same offsets, same leader epochs);
- the leader killed with SIGKILL: another replica of the ISR takes over with a newer leader
  epoch, and a consumer reading through a surviving broker finds every acknowledged record,
  once, then new acks=all produces succeed with the two left (min.insync.replicas=2);
- the killed broker returns, catches up from the new leader and rejoins the ISR, its logs
  again byte-for-byte the leader's;
- with one of three replicas down and min.insync.replicas=3, acks=all is refused
  NOT_ENOUGH_REPLICAS (nothing appended) while acks=1 is taken; once the broker returns and
  rejoins the ISR, acks=all is taken again;
- a consumer never reads past the high watermark: records the followers have not copied
  are not served (the only follower stopped with SIGSTOP, acks=1 appends stay invisible
  until it resumes).
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

from cluster_support import cluster_factory  # noqa: F401 (fixture)
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import NewTopic

from clients import admin_op
from conftest import wait_until


def create_replicated(bootstrap: str, topic: str, partitions: int, rf: int, config: dict[str, str] | None = None):
    new = NewTopic(topic, num_partitions=partitions, replication_factor=rf, config=config or {})
    result = admin_op(bootstrap, "create_topics", [new], operation_timeout=30, request_timeout=30)
    assert result == {topic: None}, f"create_topics {topic}: {result}"


def partitions_of(cluster, via: int, topic: str) -> dict[int, dict]:
    data = cluster.metadata(via, topic)
    [t] = [t for t in data["topics"] if t["topic"] == topic]
    return {
        p["partition"]: {
            "leader": p["leader"],
            "replicas": sorted(r["id"] for r in p.get("replicas", [])),
            "isr": sorted(r["id"] for r in p.get("isrs", [])),
        }
        for p in t["partitions"]
    }


def produce(
    bootstrap: str, topic: str, values: list[bytes], acks: str = "all", partition: int | None = None
) -> list[tuple[int, int, bytes]]:
    """Produces `values` (idempotent when acks=all); returns (partition, offset, value) of each
    acknowledged record and raises on any delivery error."""
    conf = {"bootstrap.servers": bootstrap, "acks": acks, "linger.ms": 5, "message.timeout.ms": 60000}
    if acks == "all":
        conf["enable.idempotence"] = True
    p = Producer(conf)
    acked: list[tuple[int, int, bytes]] = []
    errors: list[str] = []

    def cb(err, msg):
        if err is not None:
            errors.append(str(err))
        else:
            acked.append((msg.partition(), msg.offset(), msg.value()))

    for v in values:
        kwargs = {"value": v, "on_delivery": cb}
        if partition is not None:
            kwargs["partition"] = partition
        while True:
            try:
                p.produce(topic, **kwargs)
                break
            except BufferError:
                p.poll(0.05)
        p.poll(0)
    assert p.flush(90) == 0, "records still undelivered"
    assert not errors, errors[:5]
    return acked


def consume_all(
    bootstrap: str, topic: str, partitions: int, expect: int, timeout_s: float = 60
) -> list[tuple[int, int, bytes]]:
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"repl-{time.monotonic_ns()}",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "fetch.wait.max.ms": 100,
        }
    )
    c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    seen: list[tuple[int, int, bytes]] = []
    deadline = time.monotonic() + timeout_s
    try:
        while len(seen) < expect and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is None or m.error():
                continue
            seen.append((m.partition(), m.offset(), m.value()))
    finally:
        c.close()
    return seen


def segment_bytes(node, topic: str, partition: int) -> bytes:
    """The partition's records as this node stores them: its `.log` files in offset order."""
    d = Path(node.data_dir) / "topics" / topic / str(partition)
    return b"".join(f.read_bytes() for f in sorted(d.glob("*.log")))


def wait_identical(cluster, nodes: list[int], topic: str, partitions: int, timeout_s: float = 60):
    for p in range(partitions):
        wait_until(
            lambda p=p: (
                len({segment_bytes(cluster.node(n), topic, p) for n in nodes}) == 1
                and len(segment_bytes(cluster.node(nodes[0]), topic, p)) > 0
            ),
            timeout_s,
            f"partition {p}'s logs to be identical on nodes {nodes}",
        )


def test_three_replicas_hold_every_acknowledged_record_and_survive_the_leaders_death(cluster_factory, topic_name):
    cluster = cluster_factory(3, {"replica.lag.time.max.ms": "5000"})
    create_replicated(cluster.node(1).bootstrap, topic_name, 3, 3, {"min.insync.replicas": "2"})
    parts = partitions_of(cluster, 1, topic_name)
    assert all(p["replicas"] == [1, 2, 3] for p in parts.values()), parts
    wait_until(
        lambda: all(p["isr"] == [1, 2, 3] for p in partitions_of(cluster, 1, topic_name).values()),
        30,
        "every partition's ISR to be all three",
    )
    first = [f"first-{i}".encode() for i in range(3000)]
    acked = produce(cluster.node(1).bootstrap, topic_name, first)
    assert len(acked) == len(first)
    wait_identical(cluster, [1, 2, 3], topic_name, 3)

    # The leader of partition 0 dies without a chance to flush or hand over.
    victim = partitions_of(cluster, 1, topic_name)[0]["leader"]
    survivors = [n for n in (1, 2, 3) if n != victim]
    cluster.node(victim).kill()
    wait_until(
        lambda: partitions_of(cluster, survivors[0], topic_name)[0]["leader"] in survivors,
        30,
        "a surviving replica to lead partition 0",
    )
    seen = consume_all(cluster.node(survivors[0]).bootstrap, topic_name, 3, len(first))
    assert sorted(v for _, _, v in seen) == sorted(first), "every acknowledged record, once"
    assert {(p, o) for p, o, _ in seen} == {(p, o) for p, o, _ in acked}, "at the offsets acknowledged"

    # Two in-sync replicas meet min.insync.replicas=2: acks=all goes on.
    wait_until(
        lambda: all(victim not in p["isr"] for p in partitions_of(cluster, survivors[0], topic_name).values()),
        30,
        "the dead broker to leave every ISR",
    )
    second = [f"second-{i}".encode() for i in range(500)]
    produce(cluster.node(survivors[0]).bootstrap, topic_name, second)

    # It returns, catches up (truncating what it alone had) and rejoins every ISR.
    cluster.node(victim).start()
    cluster.wait_for_brokers({1, 2, 3}, via=survivors[0])
    wait_until(
        lambda: all(p["isr"] == [1, 2, 3] for p in partitions_of(cluster, survivors[0], topic_name).values()),
        60,
        "the returned broker to rejoin every ISR",
    )
    wait_identical(cluster, [1, 2, 3], topic_name, 3)
    seen = consume_all(cluster.node(victim).bootstrap, topic_name, 3, len(first) + len(second))
    assert sorted(v for _, _, v in seen) == sorted(first + second)


def test_acks_all_needs_min_insync_replicas_and_acks_one_does_not(cluster_factory, topic_name):
    cluster = cluster_factory(3, {"replica.lag.time.max.ms": "5000"})
    create_replicated(cluster.node(1).bootstrap, topic_name, 1, 3, {"min.insync.replicas": "3"})
    wait_until(lambda: partitions_of(cluster, 1, topic_name)[0]["isr"] == [1, 2, 3], 30, "a full ISR")
    produce(cluster.node(1).bootstrap, topic_name, [b"before"], partition=0)
    leader = partitions_of(cluster, 1, topic_name)[0]["leader"]
    follower = next(n for n in (1, 2, 3) if n != leader)
    cluster.node(follower).kill()
    wait_until(
        lambda: follower not in partitions_of(cluster, leader, topic_name)[0]["isr"],
        30,
        "the dead follower to leave the ISR",
    )
    p = Producer(
        {"bootstrap.servers": cluster.node(leader).bootstrap, "acks": "all", "message.timeout.ms": 5000, "retries": 0}
    )
    errors: list[KafkaError] = []
    p.produce(topic_name, b"refused", partition=0, on_delivery=lambda err, msg: errors.append(err))
    p.flush(30)
    assert errors and errors[0] is not None and errors[0].code() == KafkaError.NOT_ENOUGH_REPLICAS, errors
    produce(cluster.node(leader).bootstrap, topic_name, [b"acks-one"], acks="1", partition=0)

    cluster.node(follower).start()
    wait_until(
        lambda: partitions_of(cluster, leader, topic_name)[0]["isr"] == [1, 2, 3], 60, "the ISR to be full again"
    )
    produce(cluster.node(leader).bootstrap, topic_name, [b"after"], partition=0)
    values = [v for _, _, v in consume_all(cluster.node(leader).bootstrap, topic_name, 1, 3)]
    assert values == [b"before", b"acks-one", b"after"], "the refused record was never appended"


def test_consumers_read_only_below_the_high_watermark(cluster_factory, topic_name):
    cluster = cluster_factory(3, {"replica.lag.time.max.ms": "60000", "broker.session.timeout.ms": "60000"})
    create_replicated(cluster.node(1).bootstrap, topic_name, 1, 2)
    wait_until(lambda: len(partitions_of(cluster, 1, topic_name)[0]["isr"]) == 2, 30, "a full ISR")
    produce(cluster.node(1).bootstrap, topic_name, [b"replicated"], partition=0)
    p = partitions_of(cluster, 1, topic_name)[0]
    leader = p["leader"]
    follower = next(n for n in p["replicas"] if n != leader)
    os.kill(cluster.node(follower).proc.pid, signal.SIGSTOP)
    try:
        produce(cluster.node(leader).bootstrap, topic_name, [b"not-yet"], acks="1", partition=0)
        # The consumer waits for two records and gets one: the other is above the high
        # watermark while the only follower is stopped.
        values = [v for _, _, v in consume_all(cluster.node(leader).bootstrap, topic_name, 1, 2, timeout_s=10)]
        assert values == [b"replicated"], "a record only the leader has is not served"
    finally:
        os.kill(cluster.node(follower).proc.pid, signal.SIGCONT)
    values = [v for _, _, v in consume_all(cluster.node(leader).bootstrap, topic_name, 1, 2)]
    assert values == [b"replicated", b"not-yet"]


def test_a_follower_that_stops_fetching_leaves_the_isr_and_rejoins(cluster_factory, topic_name):
    """ISR shrink by lag alone (the follower's broker stays registered: its session outlives
    the pause), through AlterPartition: acks=all goes on with the other two at
    min.insync.replicas=2, and the follower rejoins once it has caught up."""
    cluster = cluster_factory(3, {"replica.lag.time.max.ms": "2000", "broker.session.timeout.ms": "60000"})
    create_replicated(cluster.node(1).bootstrap, topic_name, 1, 3, {"min.insync.replicas": "2"})
    wait_until(lambda: partitions_of(cluster, 1, topic_name)[0]["isr"] == [1, 2, 3], 30, "a full ISR")
    leader = partitions_of(cluster, 1, topic_name)[0]["leader"]
    follower = next(n for n in (1, 2, 3) if n != leader)
    others = sorted(n for n in (1, 2, 3) if n != follower)
    os.kill(cluster.node(follower).proc.pid, signal.SIGSTOP)
    try:
        wait_until(
            lambda: partitions_of(cluster, leader, topic_name)[0]["isr"] == others,
            30,
            "the stopped follower to leave the ISR",
        )
        assert cluster.live_brokers(leader) == {1, 2, 3}, "its broker is still registered"
        produce(cluster.node(leader).bootstrap, topic_name, [b"while-out"], partition=0)
    finally:
        os.kill(cluster.node(follower).proc.pid, signal.SIGCONT)
    wait_until(lambda: partitions_of(cluster, leader, topic_name)[0]["isr"] == [1, 2, 3], 30, "the follower to rejoin")
    wait_identical(cluster, [1, 2, 3], topic_name, 1)


def tagged(r) -> dict[int, bytes]:
    """A tagged-field section: tag -> its bytes."""
    out = {}
    for _ in range(r.uvarint()):
        tag = r.uvarint()
        out[tag] = r.take(r.uvarint())
    return out


def test_a_refused_produce_names_the_leader_and_its_endpoint(cluster_factory, topic_name):
    """KIP-951: Produce v10+ to a broker that does not lead the partition is refused
    NOT_LEADER_OR_FOLLOWER with the current leader and leader epoch, and the leader's endpoint
    on the client's listener, so a client moves without a Metadata round trip."""
    import struct

    import kafka_wire as kw

    cluster = cluster_factory(3)
    create_replicated(cluster.node(1).bootstrap, topic_name, 1, 3)
    wait_until(lambda: partitions_of(cluster, 1, topic_name)[0]["isr"] == [1, 2, 3], 30, "a full ISR")
    leader = partitions_of(cluster, 1, topic_name)[0]["leader"]
    other = next(n for n in (1, 2, 3) if n != leader)
    batch = kw.record_batch([b"hint"])
    with kw.KafkaConnection(cluster.node(other).bootstrap) as conn:
        r = conn.request(0, 10, kw.produce_body(10, {topic_name: [(0, batch)]}))
        r.skip_tagged_fields()
        [(name, [(index, error, hint)])] = r.compact_array(
            lambda t: (
                t.compact_string(),
                t.compact_array(
                    lambda p: (
                        p.i32(),
                        p.i16(),
                        (p.i64(), p.i64(), p.i64(), p.compact_array(lambda e: None), p.compact_string(), tagged(p))[-1],
                    )
                ),
                t.skip_tagged_fields(),
            )[:2]
        )
        r.i32()  # throttle
        top = tagged(r)
    assert (name, index, error) == (topic_name, 0, 6), (name, index, error)
    leader_id, leader_epoch = struct.unpack(">ii", hint[0][:8])
    assert leader_id == leader and leader_epoch >= 0
    endpoints = kw._Reader(top[0]).compact_array(
        lambda e: (e.i32(), e.compact_string(), e.i32(), e.compact_string(), e.skip_tagged_fields())[:3]
    )
    host, port = cluster.node(leader).bootstrap.rsplit(":", 1)
    assert endpoints == [(leader, host, int(port))], endpoints


def replica_fetch_errors(bootstrap: str, topic: str, replica_id: int, leader_epoch: int) -> tuple[int, list[int]]:
    """A follower's Fetch v12 (ReplicaId `replica_id`) of partition 0 at `leader_epoch`: the
    top-level error and each partition's."""
    import kafka_wire as kw

    part = kw.Fields().i32(0).i32(leader_epoch).i64(0).i32(-1).i64(-1).i32(1 << 20).tagged_fields()
    body = (
        kw.Fields()
        .i32(replica_id)
        .i32(0)
        .i32(1)
        .i32(1 << 20)
        .i8(0)
        .i32(0)
        .i32(-1)
        .compact_array([kw.Fields().compact_string(topic).compact_array([part]).tagged_fields()])
        .compact_array([])
        .compact_string("")
        .tagged_fields()
    )
    with kw.KafkaConnection(bootstrap) as conn:
        r = conn.request(1, 12, body)
        r.skip_tagged_fields()
        r.i32()  # throttle
        error = r.i16()
        r.i32()  # session

        def partition(p):
            index, code = p.i32(), p.i16()
            p.i64(), p.i64(), p.i64()
            p.compact_array(lambda a: (a.i64(), a.i64(), a.skip_tagged_fields()))
            p.i32()
            p.compact_bytes()
            p.skip_tagged_fields()
            return index, code

        topics = r.compact_array(lambda t: (t.compact_string(), t.compact_array(partition), t.skip_tagged_fields())[1])
    return error, [code for parts in topics for _, code in parts]


def test_bad_replication_requests_get_a_clear_error(cluster_factory, topic_name):
    """More replicas than live brokers is INVALID_REPLICATION_FACTOR; a follower fetch from a
    broker that is not a replica is NOT_LEADER_OR_FOLLOWER, at an epoch the leader never had
    UNKNOWN_LEADER_EPOCH; produce goes on."""
    from confluent_kafka.admin import NewTopic

    cluster = cluster_factory(3)
    too_many = admin_op(
        cluster.node(1).bootstrap, "create_topics", [NewTopic(f"{topic_name}-4", 1, 4)], operation_timeout=30
    )
    assert too_many[f"{topic_name}-4"].code() == KafkaError.INVALID_REPLICATION_FACTOR, too_many
    create_replicated(cluster.node(1).bootstrap, topic_name, 1, 2)
    wait_until(lambda: len(partitions_of(cluster, 1, topic_name)[0]["isr"]) == 2, 30, "a full ISR")
    p = partitions_of(cluster, 1, topic_name)[0]
    leader = cluster.node(p["leader"]).bootstrap
    outsider = next(n for n in (1, 2, 3) if n not in p["replicas"])
    follower = next(n for n in p["replicas"] if n != p["leader"])
    assert replica_fetch_errors(leader, topic_name, outsider, 0) == (0, [6]), "NOT_LEADER_OR_FOLLOWER"
    assert replica_fetch_errors(leader, topic_name, follower, 999) == (0, [75]), "UNKNOWN_LEADER_EPOCH"
    produce(cluster.node(1).bootstrap, topic_name, [b"one"], partition=0)
    assert len(segment_bytes(cluster.node(p["leader"]), topic_name, 0)) > 0
